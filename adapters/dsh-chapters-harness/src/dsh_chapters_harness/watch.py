"""Session folders watched through the kernel (inotify, via `watchfiles`), never by polling.

`chapters watch` blocks here until a transcript changes. `watchfiles` coalesces a burst of
writes: after the first change it waits until the folder has been quiet for `step_ms` (at most
`debounce_ms`), then yields the changed paths once. A wake-up with nothing changed comes every
`tick_ms`, so the caller can finalize idle sessions and run a deferred push (§5.2) without
stat-ing a single file. A stop event (set by SIGTERM) ends the wait between two batches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import watchfiles
from watchfiles._rust_notify import RustNotify

# JSON lines, and DSH's, compressed by default (.jsonl.zstd); Gemini CLI's session documents
# and OpenCode's JSON storage (.json); OpenCode's database, whose writes land in its
# write-ahead log first (.db, .db-wal); the Cursor IDE's database likewise (.vscdb, .vscdb-wal).
_SESSION_SUFFIXES = (".jsonl", ".jsonl.zstd", ".json", ".db", ".db-wal", ".vscdb",
                     ".vscdb-wal")


def _session_file(change: watchfiles.Change, path: str) -> bool:
    # A transcript is appended to (modified) or created; a deleted one has nothing to archive.
    return change != watchfiles.Change.deleted and path.endswith(_SESSION_SUFFIXES)


@dataclass(frozen=True, slots=True)
class WatchTiming:
    """How long the watcher holds a burst of changes, and how often an idle wait wakes up."""

    debounce_ms: int  # the longest a burst is held before it is yielded
    tick_ms: int  # how often an idle wait wakes up with an empty batch


def existing_roots(roots: Sequence[Path]) -> list[Path]:
    """The folders (and single session files, such as Aider's history) that exist, each once,
    outermost first (inotify needs an existing path)."""
    kept: list[Path] = []
    for root in sorted({r.absolute() for r in roots if r.is_dir() or r.is_file()},
                       key=lambda p: len(p.parts)):
        if not any(root.is_relative_to(k) for k in kept):
            kept.append(root)
    return kept


def session_changes(
    roots: Sequence[Path], timing: WatchTiming, stop: threading.Event
) -> Iterator[set[str] | None]:
    """None once the kernel watch is live, then batches of changed session files under
    `roots` (and of the roots that are files themselves, such as Aider's history), and an empty
    batch at each idle tick.

    The first None is the caller's moment for a full pass: from then on no write is missed,
    whereas a pass made before the watch existed could miss what was written in between.
    Ends when `stop` is set (watchfiles checks it between waits) or when no root exists.
    """
    watched = existing_roots(roots)
    if not watched:
        return
    files = {str(p) for p in watched if p.is_file()}
    step = max(10, min(timing.debounce_ms, 200))
    # watchfiles' documented low-level backend: the same Rust notifier `watchfiles.watch`
    # wraps, used directly so that "the watch is live" is a point this code can see.
    with RustNotify([str(p) for p in watched], False, False, 300, True, False) as notify:
        yield None
        while not stop.is_set():
            raw = notify.watch(timing.debounce_ms, step, timing.tick_ms, stop)
            if isinstance(raw, str):  # "timeout", or "stop" / "signal"
                if raw != "timeout":
                    return
                yield set()
                continue
            changed = {path for change, path in raw
                       if _session_file(watchfiles.Change(change), path)
                       or (path in files and change != watchfiles.Change.deleted)}
            if changed:
                yield changed
