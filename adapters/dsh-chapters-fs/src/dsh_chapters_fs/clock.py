"""The real clock (ports.clock.Clock): wall time as ISO-8601 UTC, and a monotonic reading."""

from __future__ import annotations

import time


class SystemClock:
    def now(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def monotonic(self) -> float:
        return time.monotonic()
