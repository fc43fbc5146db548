"""Transcript readers: what a `dsh_chapters.harnesses` entry point returns."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from dsh_chapters_core.events import Transcript


@runtime_checkable
class HarnessReader(Protocol):
    """Reads one harness's on-disk sessions into core events, accounting for every line."""

    name: str  # "dsh" | "claude-code" | "codex" | a plugin's

    def sniff(self, head: bytes) -> bool:
        """True if the first bytes of a file look like this harness's format."""
        ...

    def read(self, path: str) -> Transcript: ...

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Session files to import: those of the project at `cwd`, or all under `source`."""
        ...
