"""Atomic file writes: temp file in the same directory, fsync, rename, fsync the directory.

§1 invariant 3: a reader (or a crash) never sees half a chapter. A temp file is named
`.<name>.<pid>-<random>.tmp`, so every listing of the store skips it by name, and a writer that
holds the lock may sweep the ones a killed writer left behind.

Test hook (not a user setting): with `DSH_CHAPTERS_FS_TRACE_WRITES=1` every write prints
`fs-write temp <n> <path>` after the temp file is synced and `fs-write done <n> <path>` after the
rename (n counts the writes of the process), to stderr. `DSH_CHAPTERS_FS_WRITE_PAUSE_MS=<ms>`
sleeps at those points; with `DSH_CHAPTERS_FS_WRITE_PAUSE_AT=<stage>:<n>` only at that one. The
crash-safety tests SIGKILL a real archive while it sleeps there.
"""

from __future__ import annotations

import _thread
import contextlib
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from dsh_chapters_core.errors import ChaptersError

TEMP_SUFFIX = ".tmp"
TRACE_ENV = "DSH_CHAPTERS_FS_TRACE_WRITES"
PAUSE_ENV = "DSH_CHAPTERS_FS_WRITE_PAUSE_MS"
PAUSE_AT_ENV = "DSH_CHAPTERS_FS_WRITE_PAUSE_AT"


def is_temp_name(name: str) -> bool:
    """True for a temp file this module creates (never a chapter, never an artifact)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


_write_numbers = itertools.count(1)
_started = [0]  # write_atomic calls begun in this process (the writer lock reads it)
# threading.Lock is this; the threading module itself (a millisecond to import) is not needed.
_started_guard = _thread.allocate_lock()


# The paths written while a writer section is open, one list a section (lock.py): what the
# section tells the index it wrote. Only open sections record, so a long-running process
# that writes outside the lock keeps nothing.
_recorders: list[list[str]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    """The paths `write_atomic` completes while this is open, in the order written."""
    paths: list[str] = []
    _recorders.append(paths)
    try:
        yield paths
    finally:
        for at, recorder in enumerate(_recorders):
            if recorder is paths:  # by identity: two empty lists are equal
                del _recorders[at]
                break


def writes_started() -> int:
    """How many writes this process has begun: a writer section that began none wrote nothing."""
    return _started[0]


def note_write() -> None:
    """Count a write made by other means than `write_atomic` (a derived file's fast path)."""
    with _started_guard:
        _started[0] += 1


def _trace(stage: str, number: int, path: Path) -> None:
    if os.environ.get(TRACE_ENV) == "1":
        sys.stderr.write(f"fs-write {stage} {number} {path}\n")
        sys.stderr.flush()
    pause = os.environ.get(PAUSE_ENV, "")
    if not pause.isdigit() or int(pause) <= 0:
        return
    at = os.environ.get(PAUSE_AT_ENV, "")
    if not at or at == f"{stage}:{number}":
        time.sleep(int(pause) / 1000)


def fsync_dir(directory: Path) -> None:
    """Make a rename durable: the directory entry itself must reach the disk."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(directory: Path, mode: int = 0o755) -> None:
    """Create `directory` and its parents, syncing each new entry into its parent."""
    _make_all_dirs({directory}, mode)


class StoreWriteError(ChaptersError):
    """A store file that cannot be written (its directory unreadable or not a directory, the
    disk full): named with the path and the reason; nothing of it was written."""


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644, exclusive: bool = False) -> None:
    """Write `data` to `path` atomically. With `exclusive`, refuse to replace an existing file.

    `exclusive` uses `os.link` (fails if the target exists) instead of `os.replace`, so two
    writers can never both think they created the same chapter. Any other failure is a
    `StoreWriteError` naming the path: the file is as it was, whole or absent.
    """
    try:
        _write_atomic(path, data, mode=mode, exclusive=exclusive)
    except FileExistsError:
        if exclusive:
            raise  # the chapter is there already: the caller's to word
        raise StoreWriteError(f"cannot write {path}: a file stands where a directory should",
                              hint="`chapters doctor` names what is damaged") from None
    except OSError as exc:
        raise _write_error(path, exc) from None


def _write_error(path: Path, exc: OSError) -> StoreWriteError:
    return StoreWriteError(
        f"cannot write {path}: {exc.strerror or type(exc).__name__}; it is as it was",
        hint=f"check that {path.parent} is a directory this user can write (and that the "
             "disk has room); `chapters doctor` names what is damaged")


def _temp_path(path: Path) -> Path:
    """`.<name>.<pid>-<random>.tmp` beside `path`: skipped by every listing, swept by pid."""
    import secrets  # on write only: a search that writes nothing never loads it

    return path.parent / f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_atomic(path: Path, data: bytes, *, mode: int, exclusive: bool) -> None:
    number = next(_write_numbers)
    note_write()
    make_dirs(path.parent)
    tmp = _temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)  # O_CREAT's mode is filtered by the umask; the caller's mode is meant
        _trace("temp", number, path)
        if exclusive:
            _link_exclusive(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    for recorder in _recorders:
        recorder.append(str(path))
    _trace("done", number, path)


# How many syncs `write_atomic_many` has in flight at once. A sync waits on the disk with the
# GIL released, and the filesystem commits syncs that wait together as one journal commit: 300
# artifacts synced eight at a time took a quarter of the time of one after another here.
_SYNCS_IN_FLIGHT = 8


def _sync_all(targets: Sequence[Path | int], sync: Callable[[Path | int], None]) -> None:
    """`sync` for every target, several at once: the first error is raised after all ran."""
    if len(targets) < 2:
        for target in targets:
            sync(target)
        return
    from concurrent.futures import ThreadPoolExecutor  # on a batched write only

    with ThreadPoolExecutor(min(_SYNCS_IN_FLIGHT, len(targets))) as pool:
        for _ in pool.map(sync, targets):
            pass


def _sync_target(target: Path | int) -> None:
    if isinstance(target, int):
        os.fsync(target)
    else:
        fsync_dir(target)


def write_atomic_many(files: Sequence[tuple[Path, bytes]], *, mode: int = 0o644) -> None:
    """Write each (path, data) as `write_atomic` writes one, with their syncs made together:
    every temp file is written, then all are synced at once, then each is renamed into place
    and their directories are synced at once. Each file is whole and durable before its name
    points at it, and all are durable when this returns, as after as many `write_atomic`
    calls; a failure is a `StoreWriteError` naming the path, the files before it written and
    the rest as they were."""
    if len(files) < 2:
        for path, data in files:
            write_atomic(path, data, mode=mode)
        return
    made: list[tuple[int, Path, Path, int]] = []  # (write number, path, temp, fd)
    at = files[0][0]
    try:
        _make_all_dirs({path.parent for path, _ in files})
        for path, data in files:
            at = path
            number = next(_write_numbers)
            note_write()
            tmp = _temp_path(path)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            made.append((number, path, tmp, fd))
            _write_all(fd, data)
        at = files[0][0]
        _sync_all([fd for *_, fd in made], _sync_target)
        for index, (number, path, tmp, fd) in enumerate(made):
            at = path
            os.close(fd)
            made[index] = (number, path, tmp, -1)
            os.chmod(tmp, mode)
            _trace("temp", number, path)
            os.replace(tmp, path)
            made[index] = (number, path, path, -1)
        _sync_all(sorted({path.parent for _, path, _, _ in made}), _sync_target)
    except OSError as exc:
        raise _write_error(at, exc) from None
    finally:
        for _, path, tmp, fd in made:
            if fd >= 0:
                os.close(fd)
            if tmp != path:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
    for number, path, _, _ in made:
        for recorder in _recorders:
            recorder.append(str(path))
        _trace("done", number, path)


def _make_all_dirs(directories: set[Path], mode: int = 0o755) -> None:
    """Create each directory and its parents; the new entries' parents synced together."""
    parents: set[Path] = set()
    for directory in sorted(directories):
        missing: list[Path] = []
        current = directory
        while not current.exists():
            missing.append(current)
            current = current.parent
        for new in reversed(missing):
            try:
                new.mkdir(mode=mode)
            except FileExistsError:
                continue
            parents.add(new.parent)
    _sync_all(sorted(parents), _sync_target)


def _link_exclusive(tmp: Path, path: Path) -> None:
    try:
        os.link(tmp, path)  # raises FileExistsError: a chapter is never overwritten
    except FileExistsError:
        raise
    except OSError:
        # A filesystem without hard links: the writer lock already serializes writers, so a
        # check-then-rename is safe here.
        if path.exists():
            raise FileExistsError(str(path)) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def _writer_pid(name: str) -> int:
    """The pid a temp name carries (`.<name>.<pid>-<random>.tmp`), 0 if it carries none."""
    stem = name[: -len(TEMP_SUFFIX)]
    pid = stem.rsplit(".", 1)[-1].split("-", 1)[0]
    return int(pid) if pid.isdigit() else 0


def pid_alive(pid: int) -> bool:
    """True if a process with this pid runs on this machine (ours to see or not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temp_files(directory: Path) -> int:
    """Remove the temp files killed writers left under `directory`; returns how many.

    A temp file whose writer is still alive (or this process) is never touched, so a writer
    that does not hold the lock cannot lose its file mid-write.
    """
    removed = 0
    if not directory.is_dir():
        return 0
    me = os.getpid()
    for dirpath, _dirnames, filenames in os.walk(directory):
        for name in filenames:
            if not is_temp_name(name):
                continue
            pid = _writer_pid(name)
            if pid == me or pid_alive(pid):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(dirpath, name))
                removed += 1
    return removed
