"""`DirectoryTree`: a directory seen as relative, forward-slash paths (ports.store.FileTree).

Sync uses one over the store (`.dsh-chapters/`) and one over the provider's mirror
(`.dsh-knowledge/`). Temp files of an unfinished write and VCS internals are never listed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from dsh_chapters_fs.atomic import is_temp_name, write_atomic, write_atomic_many
from dsh_chapters_fs.containment import (
    checked_relpath,
    digest_contained,
    is_contained_file,
    read_contained,
)
from dsh_chapters_fs.filefacts import FileFacts

__all__ = ["DirectoryTree", "checked_relpath"]

_SKIPPED_DIRS = frozenset({".git"})
_DIGEST = {"sha256": str}  # the one fact a tree keeps of a file


class DirectoryTree:
    """A FileTree over a real directory. Writes are atomic (temp file, fsync, rename).

    With `facts`, a file's digest is kept by its stat: sync and `chapters status` compare every
    chapter of ours with the mirror's copy, and read only what changed since (filefacts)."""

    def __init__(self, root: str | os.PathLike[str], *, facts: FileFacts | None = None) -> None:
        self.root = str(Path(root).absolute())
        self._facts = facts

    def _abs(self, path: str) -> Path:
        return Path(self.root, *checked_relpath(path).split("/"))

    def list(self, prefix: str = "") -> Iterator[str]:
        """Every regular file under the root whose relative path starts with `prefix`, sorted.

        Symlinks (to files or directories) and FIFOs are never listed: containment (§11.2)."""
        base = self.root.rstrip("/") or "/"
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        found: list[str] = []
        if head and os.path.realpath(os.path.join(base, head)) != os.path.join(
            os.path.realpath(base), head
        ):
            return iter(())  # the prefix passes through a symlink: nothing under it is ours
        stack = [head]
        while stack:
            rel = stack.pop()
            try:
                entries = os.scandir(os.path.join(base, rel) if rel else base)
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue
            with entries:
                for entry in entries:
                    path = f"{rel}/{entry.name}" if rel else entry.name
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in _SKIPPED_DIRS:
                            stack.append(path)
                    elif (entry.is_file(follow_symlinks=False) and not is_temp_name(entry.name)
                          and path.startswith(prefix)):
                        found.append(path)
        return iter(sorted(found))

    def exists(self, path: str) -> bool:
        return is_contained_file(self.root, path)

    def read(self, path: str) -> bytes:
        """The file's bytes; UnsafePathError for a symlink or a non-regular file."""
        return read_contained(self.root, path)

    def digest(self, path: str) -> str:
        if self._facts is None:
            return digest_contained(self.root, path)
        relpath = checked_relpath(path)
        known = self._facts.recall(relpath, _DIGEST, lambda: {
            "sha256": digest_contained(self.root, relpath)})
        return str(known["sha256"])

    def size(self, path: str) -> int:
        """The file's size by `lstat` (-1 when absent or unreadable): a reader that refuses
        big files (copy-in's poolFileMaxBytes) never reads one to learn it is too big."""
        try:
            return os.lstat(self._abs(path)).st_size
        except OSError:
            return -1

    def write(self, path: str, data: bytes) -> None:
        write_atomic(self._abs(path), data)

    def write_many(self, files: Sequence[tuple[str, bytes]]) -> None:
        """Each (path, data) written as `write` writes one, their syncs made together
        (`write_atomic_many`): copy-in of a pool's thousands of files waits on the disk once a
        batch, not twice a file."""
        write_atomic_many([(self._abs(path), data) for path, data in files])
