"""Every file version a git object store holds, for `chapters scan` (§9).

A credential an older version archived stays in the pool's history after the file that held
it is gone from the head: this walk reads every commit reachable from every ref, each tree
once (a subtree met before holds nothing new), each blob once, with the path it was first met
at; then every other blob of the store (loose or packed), which no ref reaches any more but
which a clone or a backup still copies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from dsh_chapters_core.ports.transport import HistoryFile
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.repo import Repo

_TREE = 0o040000
_GITLINK = 0o160000


def history_files(repo: Repo, where: str, seen: set[bytes]) -> Iterator[HistoryFile]:
    """Each blob of `repo` not in `seen` (which it fills), newest commits first."""
    store = repo.object_store
    commits: deque[bytes] = deque()
    for name, sha in sorted(repo.get_refs().items()):
        if name != b"HEAD" and sha in store:
            commits.append(sha)
    walked: set[bytes] = set()
    trees: set[bytes] = set()
    while commits:
        sha = ObjectID(commits.popleft())
        if sha in walked:
            continue
        walked.add(sha)
        commit = store[sha]
        if not isinstance(commit, Commit):
            continue
        commits.extend(commit.parents)
        yield from _tree_files(repo, commit.tree, b"", commit.id.decode(), where, trees, seen)
    for sha in store:  # what no ref reaches: still in the store, still copied by a clone
        if sha in seen:
            continue
        type_num, data = store.get_raw(sha)
        if type_num == Blob.type_num:
            seen.add(sha)
            yield HistoryFile(path="", commit="", where=where, data=data)


def _tree_files(repo: Repo, tree_id: bytes, prefix: bytes, commit: str, where: str,
                trees: set[bytes], seen: set[bytes]) -> Iterator[HistoryFile]:
    tree_sha = ObjectID(tree_id)
    if tree_sha in trees or tree_sha not in repo.object_store:
        return
    trees.add(tree_sha)
    tree = repo.object_store[tree_sha]
    if not isinstance(tree, Tree):
        return
    for entry in tree.iteritems():
        path = prefix + entry.path
        if entry.mode == _GITLINK:
            continue
        if entry.mode & _TREE == _TREE and not entry.mode & 0o100000:
            yield from _tree_files(repo, entry.sha, path + b"/", commit, where, trees, seen)
            continue
        blob_sha = ObjectID(entry.sha)
        if blob_sha in seen or blob_sha not in repo.object_store:
            continue
        seen.add(blob_sha)
        blob = repo.object_store[blob_sha]
        if isinstance(blob, Blob):
            yield HistoryFile(path=path.decode("utf-8", "replace"), commit=commit, where=where,
                              data=blob.as_raw_string())
