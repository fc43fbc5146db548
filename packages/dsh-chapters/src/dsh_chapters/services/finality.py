"""When a session is over, so that its unfinished last turn is archived rather than held back.

§4.3 keeps an in-flight turn out of chapters because the next archive will see it complete. A
session that is over has no next archive: Claude Code up to about 2.1.62 writes
`stop_reason: null` on its final reply, 1.0.x and headless runs write no turn-end record, and
such a session would lose its last turn (or everything). It is over when the user says so
(`--final`), when Claude Code's SessionEnd hook fires, or, for `chapters import` and
`chapters watch`, when its file has not been written for `sessionFinalAfterMinutes` or its last
record's own time is older than that (a transcript copied from another machine is written
now, yet its session ended months ago). Codex has no session-end hook: these rules finalize
its tail.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from dsh_chapters_core.config import Config
from dsh_chapters_core.events import Transcript


def idle_seconds(path: str, now: float | None = None) -> float | None:
    """Seconds since the file's last write, or None when it cannot be read."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    return max(0.0, (time.time() if now is None else now) - mtime)


def last_record_time(transcript: Transcript) -> float | None:
    """The epoch seconds of the transcript's last timed event (its last record's own time),
    or None when no event carries a time the harness wrote."""
    for event in reversed(transcript.events):
        if not event.time:
            continue
        try:
            moment = datetime.fromisoformat(event.time)
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    return None


def is_finished(path: str, config: Config, now: float | None = None,
                transcript: Transcript | None = None) -> bool:
    """True when the file has been idle for `sessionFinalAfterMinutes`, or (given the
    transcript read from it) its last record is that old (0 turns the rule off)."""
    minutes = config.session_final_after_minutes
    if minutes <= 0:
        return False
    now = time.time() if now is None else now
    idle = idle_seconds(path, now)
    if idle is not None and idle >= minutes * 60:
        return True
    last = last_record_time(transcript) if transcript is not None else None
    return last is not None and now - last >= minutes * 60
