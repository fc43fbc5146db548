"""`DirectoryTree`: a directory seen as relative, forward-slash paths (ports.store.FileTree).

Sync uses one over the store (`.dsh-chapters/`) and one over the provider's mirror
(`.dsh-knowledge/`). Temp files of an unfinished write and VCS internals are never listed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from dsh_chapters_core.errors import ChaptersError

from dsh_chapters_fs.atomic import is_temp_name, write_atomic

_SKIPPED_DIRS = frozenset({".git"})
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


class DirectoryTree:
    """A FileTree over a real directory. Writes are atomic (temp file, fsync, rename)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = str(Path(root).absolute())

    def _abs(self, path: str) -> Path:
        return Path(self.root, *checked_relpath(path).split("/"))

    def list(self, prefix: str = "") -> Iterator[str]:
        """Every file under the root whose relative path starts with `prefix`, sorted."""
        base = Path(self.root)
        start = base
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        if head:
            start = base / head
        if not start.is_dir():
            return iter(())
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
            rel_dir = Path(dirpath).relative_to(base).as_posix()
            for name in filenames:
                if is_temp_name(name):
                    continue
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if rel.startswith(prefix):
                    found.append(rel)
        return iter(sorted(found))

    def exists(self, path: str) -> bool:
        return self._abs(path).is_file()

    def read(self, path: str) -> bytes:
        return self._abs(path).read_bytes()

    def digest(self, path: str) -> str:
        sha = hashlib.sha256()
        with self._abs(path).open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                sha.update(chunk)
        return sha.hexdigest()

    def write(self, path: str, data: bytes) -> None:
        write_atomic(self._abs(path), data)
