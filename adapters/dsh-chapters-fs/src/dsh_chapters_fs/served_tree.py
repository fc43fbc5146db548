"""What a search door may list and read: its tree, minus what must never be served.

Quarantine means never served (§3.3, §11): a pool file copy-in set aside (a forged writer, an
impossible date, an oversized body) stays in the mirror, which is transport, so the mirror
door's tree withholds it here, from every listing, change token and read. The index, the
search cache and every answer then never see it, and its bytes are never read into the cache.
A name no machine can hold (`pool_layout.name_problem`: not UTF-8, over 200 bytes, reserved)
is withheld from either door the same way, so one hostile name stops nothing, and a file over
`max_bytes` is never read whole.

Writes go through unchanged: a door writes only its derived files (`index/`, `topics/`). A
derived file that does not read (unreadable, a FIFO, a directory in its place) is absent to
the index, which then builds it again over whatever stands there.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping

from dsh_chapters_core.errors import UnsafePathError
from dsh_chapters_core.pool_layout import WITHHOLD_ALL, path_problem

from dsh_chapters_fs.search_tree import DERIVED_PREFIXES, SearchTree

__all__ = ["WITHHOLD_ALL", "ServedTree"]


class ServedTree:
    """A DerivedTree and ContainedTree over `inner` that withholds (see the module docstring).

    `withheld` maps a root-relative path (or a directory path ending in `/`) to the reason it
    is withheld; `max_bytes` (0: none) withholds files larger than it by their size."""

    def __init__(self, inner: SearchTree, withheld: Mapping[str, str] | None = None, *,
                 max_bytes: int = 0) -> None:
        self.inner = inner
        self.root = inner.root
        self._withheld = {p.rstrip("/") or WITHHOLD_ALL: why
                          for p, why in (withheld or {}).items()}
        self._max = max_bytes

    def reason(self, path: str) -> str:
        """Why `path` is withheld ("" when it is served): O(its depth), whatever the list."""
        held = self._withheld
        if held:
            if WITHHOLD_ALL in held:
                return held[WITHHOLD_ALL]
            at = path.find("/")
            while at != -1:  # a withheld directory withholds everything under it
                why = held.get(path[:at])
                if why is not None:
                    return why or "quarantined"
                at = path.find("/", at + 1)
            why = held.get(path)
            if why is not None:
                return why or "quarantined"
        return path_problem(path)

    def _too_big(self, token: str) -> bool:
        if not self._max or not token:
            return False
        size = token.split(":", 1)[0]
        return size.isdigit() and int(size) > self._max

    def _served(self, path: str) -> bool:
        if path.startswith(DERIVED_PREFIXES):
            return self._readable_derived(path)
        return not self.reason(path) and not self._too_big(self.inner.fingerprint(path))

    def _readable_derived(self, path: str) -> bool:
        full = os.path.join(self.root, *path.split("/"))
        try:
            return stat.S_ISREG(os.lstat(full).st_mode) and os.access(full, os.R_OK)
        except OSError:
            return False

    def _refuse(self, path: str) -> None:
        if path.startswith(DERIVED_PREFIXES):
            raise FileNotFoundError(path)  # a derived file that does not read: absent, rebuilt
        why = self.reason(path) or f"over {self._max} bytes"
        raise UnsafePathError(path, f"is withheld ({why})")

    # -- FileTree -------------------------------------------------------------------------
    def list(self, prefix: str = "") -> Iterator[str]:
        return iter([p for p in self.inner.list(prefix) if self._served(p)])

    def exists(self, path: str) -> bool:
        return self._served(path) and self.inner.exists(path)

    def read(self, path: str) -> bytes:
        if not self._served(path):
            self._refuse(path)
        return self.inner.read(path)

    def digest(self, path: str) -> str:
        if not self._served(path):
            self._refuse(path)
        return self.inner.digest(path)

    def write(self, path: str, data: bytes) -> None:
        if path.startswith(DERIVED_PREFIXES):
            self.write_chunks(path, (data,))
            return
        self.inner.write(path, data)

    # -- DerivedTree ----------------------------------------------------------------------
    def write_chunks(self, path: str, chunks: Iterable[bytes]) -> None:
        full = os.path.join(self.root, *path.split("/"))
        if os.path.isdir(full) and not os.path.islink(full):
            import shutil  # on the damage path only (shutil brings bz2 and lzma)

            shutil.rmtree(full)  # derived: a directory where the file goes is cleared
        self.inner.write_chunks(path, chunks)

    def remove(self, path: str) -> None:
        self.inner.remove(path)

    def fingerprint(self, path: str) -> str:
        if path.startswith(DERIVED_PREFIXES) and not self._readable_derived(path):
            return ""  # absent to the index, which builds it again
        token = self.inner.fingerprint(path)
        return "" if self.reason(path) or self._too_big(token) else token

    def fingerprints(self, prefix: str = "", *, skip: Iterable[str] = ()) -> Mapping[str, str]:
        return {path: token for path, token in self.inner.fingerprints(prefix, skip=skip).items()
                if not self.reason(path) and not self._too_big(token)
                and (not path.startswith(DERIVED_PREFIXES) or self._readable_derived(path))}

    # -- ContainedTree --------------------------------------------------------------------
    def contains(self, path: str) -> bool:
        return self.inner.contains(path)
