"""Fakes of the model side: a scripted `ModelDoor` and a `DrainLock` (ports.model)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from dsh_chapters_core.ports.model import ModelCall, ModelError

Answer = str | ModelError
Responder = Callable[[ModelCall], Answer]


@dataclass
class ScriptedDoor:
    """Answers from `script` in order (the last one repeats), or from `responder` per call.

    Every call is kept in `calls`; `closed` counts `close()`.
    """

    route: str = "fake/enricher-1"
    script: list[Answer] = field(default_factory=list)
    responder: Responder | None = None
    calls: list[ModelCall] = field(default_factory=list)
    closed: int = 0

    def complete(self, call: ModelCall) -> str:
        self.calls.append(call)
        if self.responder is not None:
            answer = self.responder(call)
        else:
            if not self.script:
                raise AssertionError("ScriptedDoor has no answer scripted")
            answer = self.script[min(len(self.calls), len(self.script)) - 1]
        if isinstance(answer, ModelError):
            raise answer
        return answer

    def close(self) -> None:
        self.closed += 1


@dataclass
class FakeDrainLock:
    """`busy` makes `try_hold` yield False, as when another process drains."""

    busy: bool = False
    held: bool = False
    pid: int = 0

    @contextmanager
    def try_hold(self) -> Iterator[bool]:
        if self.busy or self.held:
            yield False
            return
        self.held = True
        try:
            yield True
        finally:
            self.held = False

    def holder_pid(self) -> int:
        return self.pid
