"""When a session is over, so that its unfinished last turn is archived rather than clamped.

§4.3 keeps an in-flight turn out of chapters because the next archive will see it complete. A
session that is over has no next archive: Claude Code up to about 2.1.62 writes
`stop_reason: null` on its final reply, 1.0.x and headless runs write no turn-end record, and
such a session would lose its last turn (or everything). It is over when the user says so
(`--final`), when Claude Code's SessionEnd hook fires, or when its file has not been written for
`sessionFinalAfterMinutes` (Codex has no session-end hook: this rule finalizes its tail).
"""

from __future__ import annotations

import os
import time

from dsh_chapters_core.config import Config


def idle_seconds(path: str, now: float | None = None) -> float | None:
    """Seconds since the file's last write, or None when it cannot be read."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    return max(0.0, (time.time() if now is None else now) - mtime)


def is_finished(path: str, config: Config, now: float | None = None) -> bool:
    """True when the file is older than `sessionFinalAfterMinutes` (0 turns the rule off)."""
    minutes = config.session_final_after_minutes
    if minutes <= 0:
        return False
    idle = idle_seconds(path, now)
    return idle is not None and idle >= minutes * 60
