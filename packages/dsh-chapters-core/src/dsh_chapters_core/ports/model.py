"""The model door (§6): one structured chat call, for enrichment only, never on the archive path.

An adapter speaks to an OpenAI-compatible server (llama.cpp, Ollama, vLLM, OpenAI). The core
only sees messages in and text out, and failures as `ModelFailure` codes it branches on: the
ladder keeps the deterministic values whatever the code, and stops a batch when the server is
down or slow (§6.2: a single-slot server is never hammered).
"""

from __future__ import annotations

import enum
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol


class ModelFailure(enum.StrEnum):
    """Why a model call gave no text. Stable, documented, machine-readable."""

    DOWN = "down"  # nothing answered: connection refused, unreachable host
    TIMEOUT = "timeout"  # the hard deadline (`enrichmentTimeoutMs`) passed
    AUTH = "auth"  # 401/403: the key is missing or wrong
    HTTP = "http"  # any other non-2xx answer (a tape's unknown request is a 503)
    MALFORMED = "malformed"  # a 2xx that is not a chat completion with text


class ModelError(Exception):
    """A failed model call. `code` is what callers branch on; the message is for humans and
    never carries the key (adapters build it from codes, statuses and numbers)."""

    def __init__(self, code: ModelFailure, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a chat call to the model: its role and its text."""

    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One structured call: the messages, a low token ceiling and a hard deadline (§6.1)."""

    messages: tuple[ChatMessage, ...]
    max_tokens: int
    timeout_s: float


class ModelDoor(Protocol):
    """An OpenAI-compatible chat endpoint behind one route (`provider/model`).

    `route` is what provenance records (`{by: model, model: <route>, at}`); `complete` returns
    the answer's text or raises `ModelError`.
    """

    @property
    def route(self) -> str: ...

    def complete(self, call: ModelCall) -> str: ...

    def close(self) -> None: ...


class DrainLock(Protocol):
    """One enrichment drain at a time per workspace (machine-local, released on death).

    `try_hold` never waits: it yields False when another process drains, so an automatic
    trigger simply leaves the queue to it.
    """

    def try_hold(self) -> AbstractContextManager[bool]: ...

    def holder_pid(self) -> int:
        """The live holder's pid; 0 when nobody holds the lock (a dead holder holds nothing)."""
        ...
