"""Time as a port, so archive output is byte-deterministic under test."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    """Wall time as ISO-8601 UTC (`2026-11-30T08:50:00Z`) and a monotonic reading in seconds."""

    def now(self) -> str: ...

    def monotonic(self) -> float: ...
