"""The mirror as a plain directory of pool files (§3.1: transport, never the truth).

TreeDX has no clone: the provider materializes the pool's files here and keeps its own
bookkeeping in `.treedx-state.json`. Which files differ from the pool is decided by the git blob
id computed from the mirror's own bytes, the same id `paths/list` reports as `objectId`.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from dsh_chapters_core.pool_layout import name_problem

STATE_FILE = ".treedx-state.json"
KEEP_FILE = ".treedxkeep"  # CONTRACT.md: a new repo's initial commit adds it; ignore it
_TEMP_SUFFIX = ".tmp"


def git_blob_id(data: bytes) -> str:
    """The git blob sha-1 of `data`: what TreeDX reports as a file's `objectId`."""
    header = b"blob %d\0" % len(data)
    return hashlib.sha1(header + data, usedforsecurity=False).hexdigest()


def is_pool_path(path: str) -> bool:
    """A relative, forward-slash path the mirror may hold (no `..`, not our bookkeeping)."""
    if not path or "\\" in path or "\0" in path:
        return False
    parts = path.split("/")  # plain string work: this runs for every file of every walk
    if any(name_problem(part) for part in parts):
        return False
    name = parts[-1]
    return name not in (STATE_FILE, KEEP_FILE) and not _is_temp(name)


def unsafe_element(path: str) -> str | None:
    """The pool path up to its first element no machine can hold (`pool_layout.name_problem`:
    `..`, `.git`, a reserved or control-character name, one over 200 bytes, not UTF-8), as the
    git provider reports an unsafe tree entry; None when every element is safe to create."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if name_problem(part):
            return "/".join(parts[: i + 1])
    return None


def is_bookkeeping(path: str) -> bool:
    """Our own files and temp names: never pool content, never reported."""
    name = path.rsplit("/", 1)[-1]
    return name in (STATE_FILE, KEEP_FILE) or _is_temp(name)


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(_TEMP_SUFFIX)


def list_files(root: Path) -> Iterator[str]:
    """Every pool file in the mirror, as a relative path, in sorted order."""
    if not root.is_dir():
        return
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if is_pool_path(rel):
                found.append(rel)
    yield from sorted(found)


def read_file(root: Path, path: str) -> bytes | None:
    try:
        with open(os.path.join(root, path), "rb") as handle:
            return handle.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def write_file(root: Path, path: str, data: bytes, *, durable: bool = False) -> None:
    """Atomic (temp file in the same directory, then rename); fsync'd only when `durable`.

    Pool files skip the fsync (4 ms each here, the whole cost of a first open): the mirror is
    transport, and a file a crash left short has another blob id, so the next walk refetches
    it. The state file is durable, because it vouches for the files.
    """
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{_TEMP_SUFFIX}"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_file(root: Path, path: str) -> None:
    """Remove a file and the directories it leaves empty (up to, never including, root)."""
    target = root / path
    target.unlink(missing_ok=True)
    parent = target.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def move_aside(root: Path) -> Path:
    """A mirror that is not ours (or whose state is unreadable) goes to `<root>.stale-<utc>`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = root.with_name(f"{root.name}.stale-{stamp}")
    serial = 1
    while target.exists():
        serial += 1
        target = root.with_name(f"{root.name}.stale-{stamp}-{serial}")
    os.replace(root, target)
    return target


def has_entries(root: Path) -> bool:
    return root.is_dir() and any(root.iterdir())
