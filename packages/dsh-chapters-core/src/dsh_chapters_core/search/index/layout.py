"""Where the index finds its inputs (§10.2, §2.2, §3.1): a door's layout, which paths are
documents, a document's identity in both layouts, and the split tree that keeps a mirror's
derived files in the store's machine-local cache.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator, Mapping

from dsh_chapters_core.pool_layout import (
    LOCAL_STORE_DIRS,
    SHARED_STORE_DIRS,
    is_session_id,
)
from dsh_chapters_core.ports.search import DerivedTree
from dsh_chapters_core.ports.store import FileTree

INDEX_DIR = "index/"
# Tokens an update keeps besides its inputs': derived files and the edits files.
NOT_INPUT_TOKENS = (INDEX_DIR, "topics/", "edits/")
# Top-level store directories that never hold a chapter or a rule (pool_layout.py).
_NOT_DOCUMENT_DIRS = frozenset(d for d in (*SHARED_STORE_DIRS, *LOCAL_STORE_DIRS) if d != "rules")
_NUMBERED_MD = re.compile(r"^[0-9]{3,}-[^/]*\.md$")


class DoorLayout(enum.StrEnum):
    """Where documents live under a door's root (§2.2 pool, §3.1 store)."""

    STORE = "store"  # <sid>/chapters/NNN-x.md, rules/<h>/NNN-c-x.md
    MIRROR = "mirror"  # chapters/<pk>/<sid>/NNN-x.md, rules/<pk>/<h>/NNN-c-x.md


def is_document_path(layout: DoorLayout, path: str) -> bool:
    if not path.endswith(".md") or " | " in path:
        return False  # " | " could not be told apart from a shard line's separators
    parts = path.split("/")
    if layout is DoorLayout.STORE:
        if len(parts) == 3 and parts[0] == "rules":
            return parts[2].endswith(".md") and not parts[2].startswith(".")
        return (len(parts) == 3 and parts[1] == "chapters" and is_session_id(parts[0])
                and bool(_NUMBERED_MD.match(parts[2])))
    if len(parts) == 4 and parts[0] == "rules":
        return parts[3].endswith(".md") and not parts[3].startswith(".")
    return len(parts) == 4 and parts[0] == "chapters" and bool(_NUMBERED_MD.match(parts[3]))


def document_prefixes(layout: DoorLayout) -> tuple[str, ...]:
    return ("",) if layout is DoorLayout.STORE else ("chapters/", "rules/")


def path_project(layout: DoorLayout, path: str) -> str:
    """The projectKey a mirror path names (`chapters/<pk>/…`); "" in the store."""
    parts = path.split("/")
    return parts[1] if layout is DoorLayout.MIRROR and len(parts) >= 3 else ""


def path_session(layout: DoorLayout, path: str) -> str:
    parts = path.split("/")
    if parts[0] == "rules":
        return ""
    if layout is DoorLayout.STORE:
        return parts[0]
    return parts[2] if len(parts) >= 4 else ""


def document_identity(path: str) -> str:
    """The same chapter's name in both layouts: `<sid>/<file>`, or `<harnessId>/<file>` for rules.

    `topic-pin` facts travel through the pool, so a pin written against a store path must
    find the mirror copy too.
    """
    parts = path.split("/")
    if parts[0] == "rules" and len(parts) >= 3:
        return f"{parts[-2]}/{parts[-1]}"
    if len(parts) == 3 and parts[1] == "chapters":
        return f"{parts[0]}/{parts[2]}"
    if len(parts) == 4 and parts[0] == "chapters":
        return f"{parts[2]}/{parts[3]}"
    return path


def scan_documents(tree: DerivedTree, layout: DoorLayout) -> dict[str, str]:
    """Every document path with its change token, from one walk that skips what is not a
    document's directory (artifacts, caches, derived files)."""
    found: dict[str, str] = {}
    skip = _NOT_DOCUMENT_DIRS if layout is DoorLayout.STORE else frozenset()
    for prefix in document_prefixes(layout):
        for path, token in tree.fingerprints(prefix, skip=skip).items():
            if is_document_path(layout, path):
                found[path] = token
    return dict(sorted(found.items()))


def list_documents(tree: FileTree, layout: DoorLayout) -> list[str]:
    found: list[str] = []
    for prefix in document_prefixes(layout):
        found.extend(p for p in tree.list(prefix) if is_document_path(layout, p))
    return sorted(set(found))


class SplitTree:
    """Documents from one tree, derived files (`index/`, `topics/`) in another.

    The pool mirror is transport: a file the provider did not commit makes it dirty (it is
    then moved aside and rebuilt), so search never writes into it. Its derived index lives in
    a machine-local directory instead; sync stages the same bytes when it publishes them.
    """

    DERIVED = (INDEX_DIR, "topics/")

    def __init__(self, documents: DerivedTree, derived: DerivedTree) -> None:
        self.documents = documents
        self.derived = derived
        self.root = documents.root

    def _side(self, path: str) -> DerivedTree:
        return self.derived if path.startswith(self.DERIVED) else self.documents

    def list(self, prefix: str = "") -> Iterator[str]:
        if prefix.startswith(self.DERIVED):
            return self.derived.list(prefix)
        own = [p for p in self.documents.list(prefix) if not p.startswith(self.DERIVED)]
        derived = [p for d in self.DERIVED if d.startswith(prefix) for p in self.derived.list(d)]
        return iter(sorted(own + derived))

    def exists(self, path: str) -> bool:
        return self._side(path).exists(path)

    def read(self, path: str) -> bytes:
        return self._side(path).read(path)

    def digest(self, path: str) -> str:
        return self._side(path).digest(path)

    def write(self, path: str, data: bytes) -> None:
        if not path.startswith(self.DERIVED):
            raise ValueError(f"the index writes only derived files, not {path!r}")
        self.derived.write(path, data)

    def write_chunks(self, path: str, chunks: Iterable[bytes]) -> None:
        if not path.startswith(self.DERIVED):
            raise ValueError(f"the index writes only derived files, not {path!r}")
        self.derived.write_chunks(path, chunks)

    def remove(self, path: str) -> None:
        if path.startswith(self.DERIVED):
            self.derived.remove(path)

    def fingerprint(self, path: str) -> str:
        return self._side(path).fingerprint(path)

    def fingerprints(self, prefix: str = "", *, skip: Iterable[str] = ()) -> Mapping[str, str]:
        if prefix.startswith(self.DERIVED):
            return self.derived.fingerprints(prefix, skip=skip)
        skipped = (*skip, *(d.rstrip("/") for d in self.DERIVED))
        return self.documents.fingerprints(prefix, skip=skipped)


# ---------------------------------------------------------------------------------------------
# Layer 1 as the index reads it
