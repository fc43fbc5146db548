"""The per-workspace writer lock (§5.2): archive and sync serialize on it.

The lock itself is a filelock on `.dsh-chapters/state/writer.lock` (an OS lock, released by the
kernel when its process dies). Beside it, `writer.holder` says who holds it: pid, host and start
time. A holder file whose pid is gone and that is older than `lockStaleSeconds` is stale: the
writer was killed. `state()` reports it; `hold()` takes over from it (and, where the filesystem
only offers a soft lock, breaks the lock file the dead writer left), and sweeps the temp files
of dead writers from the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.ports.store import LockState

from dsh_chapters_fs.atomic import (
    make_dirs,
    pid_alive,
    recording,
    sweep_temp_files,
    write_atomic,
    writes_started,
)
from dsh_chapters_fs.storelog import LOG_RELPATH, append_log_line, read_log_tail

LOCK_NAME = "writer.lock"
HOLDER_NAME = "writer.holder"
RELEASED_NAME = "writer.released"  # written at a clean release: no sweep needed next time
# The writer generation lives in the store's own log (`logs/chapters.log`): each writer section
# appends a `writer` line numbering it as it starts, before it can write a byte, so anything
# derived from the store (the search index) knows it is current by comparing one number. The
# log is append-only, so the store's other files stay exactly as the archive left them.
_WRITER_EVENT = b'"event":"writer"'
_TAIL_BYTES = 64 * 1024  # how far back a reader looks for the last `writer` line
_HOLDER_MAX_BYTES = 4096  # a holder record is one short line; more is damage, not a holder

if TYPE_CHECKING:
    import filelock


def read_generation(store_root: str | os.PathLike[str]) -> str:
    """The store's writer generation: the number of the last `writer` line of the store log,
    read from its tail. "" when there is none within reach (no writer ever held the lock, or a
    damaged line), which a reader takes as "unknown": it must look for itself."""
    path = Path(store_root) / LOG_RELPATH
    tail = read_log_tail(path, _TAIL_BYTES)
    for line in reversed(tail.splitlines()):
        if _WRITER_EVENT in line:
            try:
                number = json.loads(line)["generation"]
            except (ValueError, KeyError, TypeError, RecursionError):
                return ""
            return str(number) if isinstance(number, int) and number > 0 else ""
    return ""


def _hostname() -> str:
    import socket  # on use: `chapters search` loads this module (the generation) and never locks

    return socket.gethostname()


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds (or last held, if it died) the writer lock. A stdlib dataclass, not attrs:
    `chapters search` imports this module (for the store generation), and attrs would add
    its import to every query's start."""

    pid: int
    host: str
    started_at: str  # ISO-8601 UTC, for humans
    started_epoch: float  # for the age

    def to_json(self) -> bytes:
        data = {"pid": self.pid, "host": self.host, "startedAt": self.started_at,
                "startedEpoch": self.started_epoch}
        return (json.dumps(data, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Holder | None:
        try:
            data: Any = json.loads(raw)
            return cls(pid=int(data["pid"]), host=str(data.get("host", "")),
                       started_at=str(data.get("startedAt", "")),
                       started_epoch=float(data["startedEpoch"]))
        except (ValueError, KeyError, TypeError):
            return None


class FileWriterLock:
    """Satisfies ports.store.WriterLock. One instance per workspace store."""

    def __init__(self, store_root: str | os.PathLike[str], *, stale_seconds: float,
                 on_written: Callable[[list[str]], object] | None = None) -> None:
        """`on_written` hears, at the end of each section that wrote, the store paths it wrote
        (relative, sorted), while the lock is still held: the section's own generation is the
        store's last, so what it tells the index is filed under the right number."""
        self.state_dir = Path(store_root) / "state"
        self.on_written = on_written
        self.path = self.state_dir / LOCK_NAME
        self.holder_path = self.state_dir / HOLDER_NAME
        self.released_path = self.state_dir / RELEASED_NAME
        self.stale_seconds = stale_seconds
        self._lock: filelock.BaseFileLock | None = None
        self._depth = 0  # nested holds in this process (sync archiving inside its own hold)
        self.took_over: Holder | None = None  # the stale holder the last hold() replaced
        self.swept = 0  # temp files of killed writers the last hold() removed

    def _read_holder(self) -> Holder | None:
        try:
            return Holder.from_json(read_log_tail(self.holder_path, _HOLDER_MAX_BYTES,
                                                  whole=True))
        except RecursionError:
            return None

    def _is_stale(self, holder: Holder) -> bool:
        same_host = holder.host == _hostname()
        dead = same_host and not pid_alive(holder.pid)
        return dead and time.time() - holder.started_epoch > self.stale_seconds

    def _held_by_someone(self) -> bool:
        if self._lock is not None and self._lock.is_locked:
            return True
        try:
            if not self.path.exists():
                return False
        except OSError:
            return False  # state/ cannot be looked into: no lock there (hold() names it)
        held = self._flock_probe()
        if held is not None:
            return held
        import filelock  # on use: a command that never locks (a search) never loads it

        probe = filelock.FileLock(self.path, timeout=0)
        try:
            probe.acquire()
        except filelock.Timeout:
            return True
        except OSError:
            return False  # a lock file that cannot be opened holds nothing (hold() names it)
        probe.release()
        return False

    def _flock_probe(self) -> bool | None:
        """Whether another holds the lock, asked of the OS lock filelock takes on POSIX
        (`flock`), or None where that cannot answer (no fcntl, a file system without flock:
        filelock then decides). `chapters status` only asks; importing filelock to ask would
        cost it a tenth of a second."""
        try:
            import fcntl
        except ImportError:  # Windows: filelock's own lock
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False  # a lock file that cannot be opened holds nothing (hold() names it)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return None  # no flock here (ENOSYS, a network file system)
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def _tell_written(self, written: list[str]) -> None:
        if self.on_written is None:
            return
        root = str(self.state_dir.parent)
        inside = sorted({os.path.relpath(p, root).replace(os.sep, "/") for p in written
                         if p.startswith(root + os.sep)})
        if not inside:
            return
        # Untold, this section's number stays uncovered, and the next query walks instead.
        with contextlib.suppress(OSError, ChaptersError):
            self.on_written(inside)

    def _append_writer_line(self, generation: int) -> tuple[int, int]:
        """Append this section's `writer` line (one O_APPEND write, so concurrent log lines
        stay whole); the log's size before and after it."""
        path = self.state_dir.parent / LOG_RELPATH
        line = json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "event": "writer", "generation": generation, "pid": os.getpid()},
                          sort_keys=True, separators=(",", ":")).encode("ascii") + b"\n"
        # A log that cannot take the line (not a file, unwritable) leaves the generation
        # unknown: readers then look for themselves. `chapters doctor` names the log.
        return append_log_line(path, line) or (0, 0)

    def _take_back_writer_line(self, before: int, after: int) -> None:
        """Truncate the log back to `before`, unless someone appended since (then the line
        stays: a number nobody indexed at only costs one walk)."""
        path = self.state_dir.parent / LOG_RELPATH
        try:
            if os.stat(path).st_size != after:
                return
            if before:
                os.truncate(path, before)
            else:
                path.unlink()
        except OSError:
            return

    def state(self) -> LockState:
        holder = self._read_holder()
        held = self._held_by_someone()
        if holder is None:
            return LockState(held=held, path=str(self.path))
        return LockState(
            held=held,
            pid=holder.pid,
            age_seconds=max(0.0, time.time() - holder.started_epoch),
            stale=self._is_stale(holder),
            path=str(self.path),
        )

    def _check_lock_file(self) -> None:
        """The lock file must be a regular file (or absent): filelock would wait forever on a
        FIFO and fail on a directory; either is named here instead."""
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._unusable(f"cannot be read ({exc.strerror})") from None
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise self._unusable(f"is {kind}")

    def _unusable(self, why: str) -> ChaptersError:
        return ChaptersError(
            f"the store's writer lock {self.path} {why}; nothing was written",
            hint=f"remove {self.path} (no writer holds a lock file that is not a regular file "
                 "it can open); the next command makes it again")

    def _refusal(self, timeout_s: float) -> ChaptersError:
        holder = self._read_holder()
        if holder is None:
            who = "another writer"
        else:
            age = max(0.0, time.time() - holder.started_epoch)
            who = f"pid {holder.pid} on {holder.host or '?'} (held for {age:.0f} s)"
        return ChaptersError(
            f"the store's writer lock {self.path} is held by {who}; waited {timeout_s:g} s",
            hint="wait for that archive or sync to finish, then run the command again",
        )

    @contextmanager
    def hold(self, timeout_s: float) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        try:
            make_dirs(self.state_dir)
        except OSError as exc:
            raise self._unusable(f"cannot be made ({exc.strerror})") from None
        import filelock  # on use: a command that never locks (a search) never loads it

        self._check_lock_file()
        lock = filelock.FileLock(self.path, timeout=timeout_s)
        try:
            lock.acquire()
        except filelock.Timeout:  # a TimeoutError, so before OSError
            holder = self._read_holder()
            if holder is None or not self._is_stale(holder):
                raise self._refusal(timeout_s) from None
            # A soft lock left by a killed writer: break it once, then take it normally.
            self.path.unlink(missing_ok=True)
            try:
                lock.acquire()
            except filelock.Timeout:
                raise self._refusal(timeout_s) from None
        except OSError as exc:
            raise self._unusable(f"cannot be opened ({exc.strerror or type(exc).__name__})") \
                from None
        holder_written = False
        log_sizes: tuple[int, int] | None = None
        writes_before = 0
        written: list[str] = []
        try:
            previous = self._read_holder()
            # What a killed writer left half-written is garbage now: sweep it (§1 invariant 3).
            # The last holder marks a clean release; without that mark (a kill, or a store
            # never locked before) the whole store is walked, and after a clean hand-over it is
            # not, so the archive path stays O(new turns).
            clean = self.released_path.is_file()
            self.released_path.unlink(missing_ok=True)
            self.swept = 0 if clean else sweep_temp_files(self.state_dir.parent)
            # A missing or damaged number restarts from the clock, never from a number an
            # index may already have recorded.
            generation = read_generation(self.state_dir.parent)
            following = int(generation) + 1 if generation else time.time_ns() // 1000
            log_sizes = self._append_writer_line(following)
            self.took_over = previous if previous is not None and self._is_stale(previous) else None
            now = time.time()
            holder = Holder(pid=os.getpid(), host=_hostname(),
                            started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                            started_epoch=now)
            write_atomic(self.holder_path, holder.to_json())
            holder_written = True
            writes_before = writes_started()
            self._lock = lock
            self._depth = 1
            with recording() as written:
                yield
        finally:
            self._lock = None
            self._depth = 0
            wrote = holder_written and writes_started() != writes_before
            try:
                self.holder_path.unlink(missing_ok=True)
                if wrote and written:
                    self._tell_written(written)
                if holder_written and log_sizes and not wrote:
                    # A section that wrote nothing leaves the store as it found it, byte for
                    # byte (a re-run of an archive writes nothing at all): its `writer` line is
                    # taken back. A reader that saw its number only walks once more.
                    self._take_back_writer_line(*log_sizes)
                if holder_written:
                    write_atomic(self.released_path, b"")
            finally:
                lock.release()
