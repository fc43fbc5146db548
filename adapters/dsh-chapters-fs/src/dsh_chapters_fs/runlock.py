"""A non-blocking, machine-local lock for one background job per workspace (ports.model.DrainLock).

Enrichment drains hold it (`state/enrich-run.lock`), and so does the one idle waiter
(`state/enrich-idle.lock`): a second drain does not queue up behind the first, it leaves the
work to it. The OS releases the lock when its process dies; `<name>.pid` says who holds it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import filelock

from dsh_chapters_fs.atomic import make_dirs, pid_alive, write_atomic


class FileRunLock:
    """Satisfies ports.model.DrainLock."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.pid_path = self.path.with_suffix(".pid")

    @contextlib.contextmanager
    def try_hold(self) -> Iterator[bool]:
        make_dirs(self.path.parent)
        lock = filelock.FileLock(self.path, timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout:
            yield False
            return
        try:
            write_atomic(self.pid_path, f"{os.getpid()}\n".encode())
            yield True
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.pid_path.unlink()
            lock.release()

    def holder_pid(self) -> int:
        """The holder's pid, 0 when nobody holds it (or it is unknown). A pid file left by a
        killed holder names nobody: the kernel released that holder's lock."""
        try:
            text = self.pid_path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return 0
        pid = int(text) if text.isdigit() else 0
        return pid if pid_alive(pid) else 0
