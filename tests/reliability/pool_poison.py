"""A third "machine" that commits poison straight into a local-path pool (bare git), the way
any process with write access to the pool could: objects and a ref, no dsh-chapters code.

Tree entries are built with dulwich so a name git's porcelain would refuse (`..`) and
symlink blobs can be planted too.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

FILE = 0o100644
LINK = 0o120000
DIR = 0o040000
MAIN = b"refs/heads/main"


def _copy(tree: Tree) -> Tree:
    out = Tree()
    for name, mode, sha in tree.iteritems():
        out.add(name, mode, sha)
    return out


def plant(pool: Path, files: dict[str, tuple[int, bytes]] | dict[bytes, tuple[int, bytes]],
          message: str = "mallory") -> str:
    """Commit `files` (path -> (mode, bytes)) on top of the pool's main; returns the commit.
    Paths split on "/" only, so a segment may be `..` or a reserved name; a bytes path may
    hold a name that is not UTF-8."""
    repo = Repo(str(pool))
    try:
        store = repo.object_store
        head = repo.refs[MAIN]
        parent = repo[head]
        assert isinstance(parent, Commit)
        root_obj = repo[parent.tree]
        assert isinstance(root_obj, Tree)

        def insert(tree: Tree, parts: list[bytes], mode: int, data: bytes) -> Tree:
            out = _copy(tree)
            name = parts[0]
            if len(parts) == 1:
                blob = Blob.from_string(data)
                store.add_object(blob)
                out.add(name, mode, blob.id)
                return out
            sub = Tree()
            if name in out:
                _, sha = out[name]
                existing = repo[sha]
                if isinstance(existing, Tree):
                    sub = existing
            child = insert(sub, parts[1:], mode, data)
            store.add_object(child)
            out.add(name, DIR, child.id)
            return out

        root = root_obj
        for path, (mode, data) in sorted(files.items()):
            raw = path if isinstance(path, bytes) else path.encode()
            root = insert(root, raw.split(b"/"), mode, data)
        store.add_object(root)
        commit = Commit()
        commit.tree = root.id
        commit.parents = [head]
        commit.author = commit.committer = b"mallory <mallory@dsh-chapters.invalid>"
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = message.encode() + b"\n"
        store.add_object(commit)
        assert repo.refs.set_if_equals(MAIN, head, commit.id)
        return commit.id.decode()
    finally:
        repo.close()


def chapter(harness_id: str, session_id: str, title: str, body: str = "body\n",
            extra: str = "", date: str = '"2026-11-20T09:00:00Z"') -> bytes:
    """A chapter as the core writes it (one `key: <JSON>` line a key), plus `extra` raw YAML."""
    digest = hashlib.sha256(body.encode()).hexdigest()
    lines = [
        "---",
        f"date: {date}",
        f'harnessId: "{harness_id}"',
        'kind: "chapter"',
        f'sessionId: "{session_id}"',
        f'sha256: "{digest}"',
        f'title: "{title}"',
    ]
    if extra:
        lines.append(extra.rstrip("\n"))
    return ("\n".join(lines) + "\n---\n" + body).encode()


def alias_bomb() -> str:
    """Nine levels of nine aliases: ~387 million nodes if a loader expanded it."""
    rows = ['a0: &a0 ["lol"]']
    for level in range(1, 10):
        refs = ", ".join(f"*a{level - 1}" for _ in range(9))
        rows.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(rows)
