"""Tree objects in memory: walk, diff with pruning, and build from staged files (index-free).

Publishing builds only the trees on the paths that changed, from the parent commit's trees,
so a commit costs O(changed paths), never O(pool). Diffs skip any subtree whose sha is equal.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from dsh_chapters_core.pool_layout import name_problem
from dulwich.errors import ObjectMissing
from dulwich.objects import ObjectID, ShaFile, Tree

DIR_MODE = stat.S_IFDIR
FILE_MODE = stat.S_IFREG | 0o644
EXEC_MODE = stat.S_IFREG | 0o755
LINK_MODE = stat.S_IFLNK
GITLINK_MODE = 0o160000

_FORBIDDEN_NAMES = frozenset({b"", b".", b".."})


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One entry of a git tree: its mode and the id of the object it names."""

    mode: int
    sha: bytes  # hex object id


@dataclass(frozen=True, slots=True)
class Change:
    """One path's difference between two trees; `old`/`new` is None for an add/remove."""

    path: bytes
    old: TreeEntry | None
    new: TreeEntry | None


class ObjectReader(Protocol):
    """What walking trees and history needs of an object store."""

    def __getitem__(self, sha: ObjectID) -> ShaFile: ...

    def __contains__(self, sha: ObjectID) -> bool: ...


class Overlay:
    """Objects this process just made, in front of a store: a push right after a commit
    reads nothing back from disk."""

    def __init__(self, fresh: Mapping[bytes, ShaFile], store: ObjectReader) -> None:
        self._fresh = fresh
        self._store = store

    def __getitem__(self, sha: ObjectID) -> ShaFile:
        found = self._fresh.get(sha)
        return found if found is not None else self._store[sha]

    def __contains__(self, sha: ObjectID) -> bool:
        return sha in self._fresh or sha in self._store


class UnsafePathError(ValueError):
    """A tree entry or staged path that could escape the mirror (`..`, `.git`, `/`)."""


def safe_name(name: bytes) -> bool:
    """A single path element that is safe to create under the mirror: the pool's one rule for
    names (`pool_layout.name_problem`: UTF-8, at most 200 bytes so every writer's temp suffix
    fits NAME_MAX, no control character, not reserved). Anything else is never checked out;
    the entry is recorded and quarantined."""
    return name not in _FORBIDDEN_NAMES and not name_problem(name)


def check_path(path: str) -> bytes:
    """A pool-relative, forward-slash path as bytes; UnsafePathError if it could escape."""
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePathError(f"not a UTF-8 pool path: {path!r}") from None
    if raw.startswith(b"/") or not all(safe_name(part) for part in raw.split(b"/")):
        raise UnsafePathError(f"not a pool-relative path: {path!r}")
    return raw


def blob_id(data: bytes) -> bytes:
    """The git blob sha of `data`, without building a dulwich object."""
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest().encode("ascii")


def read_tree(store: ObjectReader, sha: bytes) -> Tree:
    """A tree from the object store; a missing or mistyped object is `ObjectMissing`."""
    try:
        obj = store[ObjectID(sha)]
    except KeyError:
        raise ObjectMissing(ObjectID(sha)) from None
    if not isinstance(obj, Tree):
        raise ObjectMissing(ObjectID(sha))
    return obj


def read_object(store: ObjectReader, sha: bytes) -> ShaFile:
    try:
        obj = store[ObjectID(sha)]
    except KeyError:
        raise ObjectMissing(ObjectID(sha)) from None
    return obj


_KEEP = "keep"  # carry unsafe entries over untouched (objects move; nothing is checked out)


def _entries(
    store: ObjectReader, sha: bytes | None, skipped: list[bytes] | str | None = None,
    prefix: bytes = b"",
) -> dict[bytes, TreeEntry]:
    """A tree's entries. An unsafe name (`..`, `.git`, a slash) raises, unless the caller
    collects it in `skipped` (checkout: it is never written) or keeps it (`_KEEP`: a commit
    or a push carries another machine's entry over as it is)."""
    if sha is None:
        return {}
    tree = read_tree(store, sha)
    out: dict[bytes, TreeEntry] = {}
    for name, mode, child in tree.iteritems():
        if not safe_name(name):
            if skipped is None:
                raise UnsafePathError(f"the pool holds an unsafe path element {name!r}")
            if isinstance(skipped, list):
                skipped.append(prefix + name)
                continue
        out[name] = TreeEntry(mode, child)
    return out


def iter_files(
    store: ObjectReader, tree_sha: bytes, prefix: bytes = b"",
    skipped: list[bytes] | None = None,
) -> Iterator[tuple[bytes, TreeEntry]]:
    """Every non-directory entry under a tree, depth first, with its full path. With
    `skipped`, unsafe entries are left out and their paths collected instead of raising."""
    for name, entry in _entries(store, tree_sha, skipped, prefix).items():
        path = prefix + name
        if entry.mode == DIR_MODE:
            yield from iter_files(store, entry.sha, path + b"/", skipped)
        else:
            yield path, entry


def diff_trees(
    store: ObjectReader, old: bytes | None, new: bytes | None, prefix: bytes = b"",
    skipped: list[bytes] | None = None,
) -> Iterator[Change]:
    """File-level changes from `old` to `new` (either may be None); equal subtrees are skipped.
    With `skipped`, unsafe entries of `new` are collected, never yielded."""
    if old == new:
        return
    before = _entries(store, old, [] if skipped is not None else None, prefix)
    after = _entries(store, new, skipped, prefix)
    for name in sorted(before.keys() | after.keys()):
        a = before.get(name)
        b = after.get(name)
        if a == b:
            continue
        path = prefix + name
        a_dir = a is not None and a.mode == DIR_MODE
        b_dir = b is not None and b.mode == DIR_MODE
        if a_dir or b_dir:
            yield from diff_trees(
                store, a.sha if a_dir and a else None, b.sha if b_dir and b else None, path + b"/",
                skipped,
            )
        if not a_dir and not b_dir:
            yield Change(path, a, b)
        elif not a_dir and a is not None:
            yield Change(path, a, None)  # a file became a directory
        elif not b_dir and b is not None:
            yield Change(path, None, b)  # a directory became a file


def changed_objects(store: ObjectReader, old: bytes | None, new: bytes) -> Iterator[bytes]:
    """Ids of the trees and blobs under `new` that differ from `old` (the closure's delta)."""
    if old == new:
        return
    yield new
    before = _entries(store, old, _KEEP)
    for name, entry in _entries(store, new, _KEEP).items():
        prior = before.get(name)
        if prior is not None and prior.sha == entry.sha:
            continue
        if entry.mode == DIR_MODE:
            yield from changed_objects(
                store,
                prior.sha if prior is not None and prior.mode == DIR_MODE else None,
                entry.sha,
            )
        elif entry.mode != GITLINK_MODE:
            yield entry.sha


def build_tree(
    store: ObjectReader, base: bytes | None, changes: Mapping[bytes, TreeEntry]
) -> tuple[bytes, list[Tree]]:
    """The root tree id after applying `changes` (path -> entry) to `base`, and new trees.

    Only directories on a changed path are read and rebuilt; the rest keep their ids.
    """
    new_trees: list[Tree] = []

    def build(base_sha: bytes | None, here: Mapping[bytes, TreeEntry]) -> bytes:
        entries = _entries(store, base_sha, _KEEP)
        groups: dict[bytes, dict[bytes, TreeEntry]] = {}
        for path, entry in here.items():
            head, sep, rest = path.partition(b"/")
            if sep:
                groups.setdefault(head, {})[rest] = entry
            else:
                entries[head] = entry
        for name, sub in groups.items():
            prior = entries.get(name)
            sub_base = prior.sha if prior is not None and prior.mode == DIR_MODE else None
            entries[name] = TreeEntry(DIR_MODE, build(sub_base, sub))
        tree = Tree()
        for name, entry in entries.items():
            tree.add(name, entry.mode, ObjectID(entry.sha))
        if tree.id != base_sha:
            new_trees.append(tree)
        return bytes(tree.id)

    return build(base, changes), new_trees
