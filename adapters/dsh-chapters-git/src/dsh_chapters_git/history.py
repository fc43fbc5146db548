"""Commit history: fast-forward checks and the reachability closure a transfer must carry.

§3.2: transfer packs exactly what an explicitly computed closure holds (commits -> trees ->
blobs), never "everything", and refs only move fast-forward.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dulwich.errors import ObjectMissing
from dulwich.objects import Commit, ObjectID, ShaFile, Tree

from dsh_chapters_git.trees import GITLINK_MODE, ObjectReader, changed_objects, read_object


def read_commit(store: ObjectReader, sha: bytes) -> Commit:
    obj = read_object(store, sha)
    if not isinstance(obj, Commit):
        raise ObjectMissing(ObjectID(sha))
    return obj


def is_ancestor(store: ObjectReader, ancestor: bytes, descendant: bytes) -> bool:
    """True if `ancestor` is `descendant` or in its history (all of which `store` holds).

    The pool's history is linear (pushes are ff-only), so the walk is usually the few
    commits between the two; a non-ancestor costs one walk of the history.
    """
    if ancestor == descendant:
        return True
    if ObjectID(ancestor) not in store:
        return False
    seen: set[bytes] = {descendant}
    todo: deque[bytes] = deque([descendant])
    while todo:
        for parent in read_commit(store, todo.popleft()).parents:
            if parent == ancestor:
                return True
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return False


def new_commits(store: ObjectReader, head: bytes, known: Callable[[bytes], bool]) -> list[Commit]:
    """Commits reachable from `head` that the destination does not know, newest first."""
    out: list[Commit] = []
    seen: set[bytes] = set()
    todo: deque[bytes] = deque([head])
    while todo:
        sha = todo.popleft()
        if sha in seen or known(sha):
            continue
        seen.add(sha)
        commit = read_commit(store, sha)
        out.append(commit)
        todo.extend(commit.parents)
    return out


def closure(store: ObjectReader, head: bytes, known: Callable[[bytes], bool]) -> list[ShaFile]:
    """Every object the destination needs to hold `head`, given the commits it `known`s,
    children first: oldest commit first, and each commit after its blobs and trees (a tree
    after its subtrees). Written in this order, a destination killed mid-way holds a commit
    only when it holds everything under it.

    Each new commit contributes itself and the trees and blobs that differ from its first
    parent's tree; anything equal to the parent's is reachable from the parent, which the
    destination holds or which is itself new (so its own delta carries it). `known` must only
    vouch for commits whose whole closure the destination holds (a ref's history, never a
    commit object that merely exists: a killed writer may have left it without its tree).
    """
    seen: set[bytes] = set()
    ordered: list[bytes] = []
    commits = new_commits(store, head, known)
    for commit in reversed(commits):  # oldest first
        parent_tree = read_commit(store, commit.parents[0]).tree if commit.parents else None
        delta = [sha for sha in changed_objects(store, parent_tree, commit.tree)]
        for sha in reversed(delta):  # changed_objects yields a tree before its children
            if sha not in seen:
                seen.add(sha)
                ordered.append(sha)
        seen.add(bytes(commit.id))
        ordered.append(bytes(commit.id))
    by_id: dict[bytes, Commit] = {bytes(c.id): c for c in commits}
    return [by_id[sha] if sha in by_id else read_object(store, sha) for sha in ordered]


def known_in(stores: Iterable[ObjectReader]) -> Callable[[bytes], bool]:
    """A `known` predicate: the object is already in one of these stores. Only for a store
    whose every commit is whole (a mirror's own commits are written children first under the
    writer lock); a pool a killed writer may have written to is vouched for by its refs
    (`known_heads`)."""
    targets = tuple(stores)

    def known(sha: bytes) -> bool:
        return any(ObjectID(sha) in target for target in targets)

    return known


def known_heads(*heads: bytes | None) -> Callable[[bytes], bool]:
    """A `known` predicate for commits a destination's refs name: the walk of new commits stops
    at the first of them. The pool's history is linear (pushes are fast-forward only), so a
    new head's walk meets the old head; a commit object that merely exists is never trusted."""
    trusted = frozenset(h for h in heads if h is not None)
    return lambda sha: sha in trusted


@dataclass(frozen=True, slots=True)
class Missing:
    """What a store lacks of a head's closure, children first, and whether a helper store
    holds all of it."""

    objects: tuple[ShaFile, ...]
    restorable: bool


def missing_in(store: ObjectReader, helper: ObjectReader | None, head: bytes) -> Missing:
    """Walk `head`'s closure in `store`, reading what it lacks from `helper`; the lacking
    objects come back children first (blobs and subtrees before their tree, a commit after its
    tree and parents), the order a killed writer can never leave half-done."""
    out: list[ShaFile] = []
    done: set[bytes] = set()
    restorable = True

    def get(sha: bytes) -> tuple[ShaFile | None, bool]:
        try:
            return store[ObjectID(sha)], False
        except KeyError:
            pass
        if helper is not None:
            try:
                return helper[ObjectID(sha)], True
            except KeyError:
                pass
        return None, True

    # Iterative post-order: (sha, expanded?) on a stack.
    stack: list[tuple[bytes, bool]] = [(head, False)]
    fetched: dict[bytes, tuple[ShaFile, bool]] = {}
    while stack:
        sha, expanded = stack.pop()
        if sha in done:
            continue
        if expanded:
            done.add(sha)
            whole, lacking = fetched.pop(sha)
            if lacking:
                out.append(whole)
            continue
        found, lacking = get(sha)
        if found is None:
            restorable = False
            done.add(sha)
            continue
        obj = found
        fetched[sha] = (obj, lacking)
        stack.append((sha, True))
        if isinstance(obj, Commit):
            stack.extend((bytes(p), False) for p in obj.parents)
            stack.append((bytes(obj.tree), False))
        elif isinstance(obj, Tree):
            for _name, mode, child in obj.iteritems():
                if mode != GITLINK_MODE:
                    stack.append((bytes(child), False))
    return Missing(tuple(out), restorable)
