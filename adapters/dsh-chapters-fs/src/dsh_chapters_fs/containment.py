"""One containment check for every read and publish of a store or mirror file (§11.2).

A store is written by this machine, a mirror by every machine of the pool: either may hold a
symlink (a chapter replaced by a link to `/etc/passwd`), a FIFO or a device. Such a file is
refused, never followed: each component under the root is `lstat`ed, the file is opened with
`O_NOFOLLOW | O_NONBLOCK` (a FIFO cannot block the open) and `fstat`ed before one byte is read.
`chapters artifact` refuses the same files through `ContainedTree.contains`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from dsh_chapters_core.errors import ChaptersError, UnsafePathError

_CHUNK = 1 << 20


def checked_relpath(path: str) -> str:
    """A relative forward-slash path that cannot leave its root."""
    parts = path.replace("\\", "/").split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ChaptersError(
            f"path {path!r} is not a plain relative path inside the tree",
            hint="use forward slashes, no '..', no leading '/'",
        )
    return "/".join(parts)


def _refuse_links_below(root: str, relpath: str) -> str:
    """The absolute path of `relpath`, after refusing a symlink in any directory above it."""
    checked = checked_relpath(relpath)
    parts = checked.split("/")
    current = root
    for part in parts[:-1]:
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            raise
        except NotADirectoryError:
            raise FileNotFoundError(current) from None
        except OSError as exc:  # a directory above it cannot be searched
            raise UnsafePathError(relpath, f"cannot be reached ({exc.strerror})") from None
        if stat.S_ISLNK(mode):
            raise UnsafePathError(relpath, f"passes through a symlink ({part}/)")
        if not stat.S_ISDIR(mode):
            raise FileNotFoundError(current)
    return os.path.join(current, parts[-1])


def open_contained(root: str, relpath: str) -> int:
    """A read-only descriptor of a regular file under `root`; UnsafePathError otherwise.

    FileNotFoundError when there is nothing there (callers treat that as absent, as before)."""
    target = _refuse_links_below(root, relpath)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(target):
            raise UnsafePathError(relpath, "is a symlink") from None
        if isinstance(exc, FileNotFoundError | NotADirectoryError):
            raise FileNotFoundError(target) from None
        if isinstance(exc, IsADirectoryError):
            raise UnsafePathError(relpath, "is a directory, not a file") from None
        # Unreadable (mode 000, EIO): set aside and named like any file that cannot be read,
        # never a traceback of every command that lists it.
        raise UnsafePathError(relpath, f"cannot be read ({exc.strerror or type(exc).__name__})"
                              ) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise UnsafePathError(relpath, f"is {kind}")
    return fd


def read_contained(root: str, relpath: str, limit: int | None = None) -> bytes:
    """The bytes of a contained regular file (at most `limit` when given)."""
    fd = open_contained(root, relpath)
    with os.fdopen(fd, "rb") as handle:
        try:
            return handle.read() if limit is None else handle.read(limit)
        except OSError as exc:  # EIO and the like: the file does not read
            raise UnsafePathError(relpath, f"cannot be read ({exc.strerror})") from None


def digest_contained(root: str, relpath: str) -> str:
    sha = hashlib.sha256()
    fd = open_contained(root, relpath)
    with os.fdopen(fd, "rb") as handle:
        try:
            while chunk := handle.read(_CHUNK):
                sha.update(chunk)
        except OSError as exc:
            raise UnsafePathError(relpath, f"cannot be read ({exc.strerror})") from None
    return sha.hexdigest()


def contained_stat(root: str, relpath: str) -> os.stat_result | None:
    """The `lstat` of a regular file reached without a symlink, or None: what a stat-keyed
    cache (filefacts) may key a read of it by. Opening and reading still go through
    `open_contained`."""
    try:
        st = os.lstat(_refuse_links_below(root, relpath))
    except (OSError, UnsafePathError):
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def is_contained_file(root: str, relpath: str) -> bool:
    """A regular file, reached without a symlink: what `exists` means for a contained tree."""
    try:
        target = _refuse_links_below(root, relpath)
        return stat.S_ISREG(os.lstat(target).st_mode)
    except (OSError, UnsafePathError):
        return False


def contains(root: str, relpath: str) -> bool:
    """True when the path, symlinks resolved, stays inside the root."""
    base = Path(os.path.realpath(root))
    target = Path(os.path.realpath(os.path.join(root, relpath)))
    return target == base or base in target.parents


def read_small_file(path: str | os.PathLike[str], limit: int) -> bytes | None:
    """The bytes of a small machine-local file (a session record, a reservation): None when
    it is absent, not a regular file (a FIFO never blocks the open), unreadable, or larger
    than `limit` (then it is damage, not a record)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        try:
            data = handle.read(limit + 1)
        except OSError:
            return None
    return data if len(data) <= limit else None
