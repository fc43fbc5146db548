"""The store's own log, `.dsh-chapters/logs/chapters.log` (machine-local, never published).

One JSON object a line. Callers pass counts, paths and codes, never content: a line here must
never carry a transcript's text or a token.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dsh_chapters_fs.atomic import make_dirs

LOG_RELPATH = "logs/chapters.log"
# How much of the log's end a reader reads: its last archive is there, whatever its age.
LOG_READ_BYTES = 8 * 1024 * 1024


def _open_regular(path: Path, flags: int) -> int | None:
    """A descriptor on `path` when it is a regular file reached without a symlink (a FIFO
    never blocks the open), else None."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def read_log_tail(path: Path, size: int, *, whole: bool = False) -> bytes:
    """The last `size` bytes of a log (from the first whole line in them), or with `whole` the
    file when it is no larger; b"" when it is absent, unreadable or not a regular file."""
    fd = _open_regular(path, os.O_RDONLY)
    if fd is None:
        return b""
    with os.fdopen(fd, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        if whole:
            if end > size:
                return b""
            handle.seek(0)
            return handle.read(size)
        start = max(0, end - size)
        handle.seek(start)
        data = handle.read(size)
    if start:
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    return data


def append_log_line(path: Path, line: bytes) -> tuple[int, int] | None:
    """Append one line (one O_APPEND write); the file's size before and after it, or None when
    the log cannot take it (not a regular file, unwritable)."""
    try:
        make_dirs(path.parent)
    except OSError:
        return None
    fd = _open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    if fd is None:
        return None
    try:
        before = os.fstat(fd).st_size
        os.write(fd, line)
        return before, os.fstat(fd).st_size
    except OSError:
        return None
    finally:
        os.close(fd)


class StoreLog:
    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        self.path = Path(store_root) / LOG_RELPATH

    def write(self, event: str, at: str, **fields: Any) -> None:
        """Append one line. A single O_APPEND write keeps concurrent lines whole. A log that
        cannot take it (not a regular file, unwritable) loses the line, never the command
        that wrote it: `chapters doctor` names such a log."""
        line = json.dumps({"at": at, "event": event, **fields}, ensure_ascii=False,
                          sort_keys=True, separators=(",", ":")) + "\n"
        append_log_line(self.path, line.encode("utf-8"))

    def entries(self, event: str | None = None) -> Iterator[dict[str, Any]]:
        """Lines in order, from the log's last LOG_READ_BYTES; a line a crash cut short, or
        one that does not read, is skipped, and a log that is not a readable regular file has
        no lines."""
        text = read_log_tail(self.path, LOG_READ_BYTES).decode("utf-8", errors="replace")
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(entry, dict) and (event is None or entry.get("event") == event):
                yield entry

    def last(self, event: str) -> dict[str, Any] | None:
        found = None
        for entry in self.entries(event):
            found = entry
        return found
