"""The `folder+<path>` provider: the six transport verbs over a plain synced directory.

The mirror (`.dsh-knowledge/`) is a plain directory materialized from the pool, as in TreeDX
mode (§3.1 holds: the store is truth, the mirror is transport). Pool and mirror state:

- the pool head is a digest of the writers' manifests (`manifest.PoolView.head`);
- the mirror keeps `.folder-mirror.json`: the head it last synced to (`base`), files staged
  and committed but not yet pushed, and a stat cache of pool files already hashed.

Push and pull are fast-forward only (§5.2): a push whose base is not the pool's head is
DIVERGED, and the core rebuilds the mirror and re-publishes from the store; never a merge. On
one host the push holds an flock, so two pushes at the same moment cannot both land; across
hosts, the per-machine write namespaces of §3.3 are what keeps the folder conflict-free.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_core.ports.transport import (
    KnowledgeProvider,
    MirrorState,
    ProviderContext,
    PullResult,
    PushResult,
    StageResult,
)

from dsh_chapters_folder.manifest import (
    LOCK_FILE,
    Claim,
    Manifest,
    PoolView,
    parse_manifest,
    read_pool,
    safe_pool_path,
    sha256_file,
    walk_files,
    write_atomic,
    writer_file,
)

SCHEME = "folder+"
STATE_FILE = ".folder-mirror.json"  # top-level dot entry: not part of the mirror's content


def pool_root_of(remote: str) -> str:
    """`folder+~/Sync/pool` → the absolute directory."""
    return os.path.abspath(os.path.expanduser(remote[len(SCHEME):]))


class FolderProviderFactory:
    """What the `folder` entry point hands the composition root."""

    name = "folder"
    # `folder+<path>`: the core's `parse_remote` names its scheme `folder`.
    schemes = ("folder",)

    @staticmethod
    def matches(remote: str) -> bool:
        return remote.startswith(SCHEME) and len(remote) > len(SCHEME)

    @staticmethod
    def create(context: ProviderContext) -> KnowledgeProvider:
        return FolderProvider(pool_root_of(context.remote), context.mirror_root,
                              context.harness_id)


class FolderProvider:
    name = "folder"

    def __init__(self, pool_root: str, mirror_root: str, writer: str) -> None:
        self.pool_root = pool_root
        self.mirror_root = mirror_root
        self.writer = writer
        self._state: dict[str, Any] = {}

    # ---- the six verbs ----------------------------------------------------------------
    def open(self) -> MirrorState:
        created = self._ensure_pool()
        if os.path.isdir(self.mirror_root):
            state = self._load_state()
            if state is not None:
                self._state = state
                return MirrorState(root=self.mirror_root, head=str(state["base"]),
                                   created_pool=created, arriving=tuple(state["arriving"]))
            moved = self._move_aside()
            return self._clone(created_pool=created, moved_aside=moved)
        return self._clone(created_pool=created)

    def pull(self) -> PullResult:
        self._require_open()
        before = str(self._state["base"])
        view = self._view()
        if self._state["committed"] and view.head != before:
            raise TransportError(
                FailureCode.DIVERGED,
                f"pull: diverged ({len(self._state['committed'])} unpushed files, "
                "and the pool moved since the last sync)",
            )
        changed, arriving = self._materialize(view)
        self._state["base"] = view.head
        self._save_state()
        return PullResult(head_before=before, head_after=view.head, changed_paths=changed,
                          arriving=arriving)

    def stage(self, files: Mapping[str, bytes]) -> StageResult:
        self._require_open()
        new = changed = unchanged = 0
        for path, data in sorted(files.items()):
            if not safe_pool_path(path):
                raise TransportError(FailureCode.REFUSED,
                                     f"stage: {path!r} is not a relative pool path")
            target = os.path.join(self.mirror_root, path)
            sha = hashlib.sha256(data).hexdigest()
            if os.path.isfile(target):
                if sha256_file(target)[1] == sha:
                    unchanged += 1
                    continue
                changed += 1
            else:
                new += 1
            write_atomic(target, data)
            self._state["staged"][path] = sha
        self._save_state()
        return StageResult(new=new, changed=changed, unchanged=unchanged)

    def commit(self, message: str, author: str) -> str | None:
        self._require_open()
        staged: dict[str, str] = self._state["staged"]
        if not staged:
            return None
        self._state["committed"].update(staged)
        self._state["staged"] = {}
        record = json.dumps([self._state["base"], sorted(self._state["committed"].items()),
                             message, author])
        commit = hashlib.sha256(record.encode("utf-8")).hexdigest()[:40]
        self._state["commit"] = commit
        self._save_state()
        return commit

    def push(self) -> PushResult:
        self._require_open()
        committed: dict[str, str] = self._state["committed"]
        if not committed:
            return PushResult(head=str(self._state["base"]), pushed=False)
        with self._push_lock():
            view = self._view()
            if view.head != self._state["base"]:
                raise TransportError(FailureCode.DIVERGED,
                                     "push: diverged (another machine published since the last "
                                     "sync)")
            mine = self._own_manifest(view)
            files = dict(mine.files) if mine else {}
            for path in sorted(committed):
                source = os.path.join(self.mirror_root, path)
                with open(source, "rb") as handle:
                    data = handle.read()
                self._write_pool(path, data)
                files[path] = Claim(len(data), hashlib.sha256(data).hexdigest())
            manifest = Manifest(self.writer, (mine.generation if mine else 0) + 1, files, "")
            self._write_pool(writer_file(self.writer), manifest.to_bytes())
            head = self._view().head
        self._state["base"] = head
        self._state["committed"] = {}
        self._save_state()
        return PushResult(head=head, pushed=True)

    def rebuild(self) -> MirrorState:
        # §5.2: the mirror is transport; remove it and materialize it fresh, never merge.
        if os.path.isdir(self.mirror_root):
            shutil.rmtree(self.mirror_root)
        return self._clone(created_pool=self._ensure_pool())

    def close(self) -> None:
        self._state = {}

    # ---- the pool ------------------------------------------------------------------------
    def _ensure_pool(self) -> bool:
        """True when this open created the pool directory. A missing parent (an unmounted
        share) is NOT_FOUND: creating a pool on the wrong disk would fork it silently."""
        if os.path.isdir(self.pool_root):
            return False
        parent = os.path.dirname(self.pool_root)
        if not os.path.isdir(parent):
            raise TransportError(
                FailureCode.NOT_FOUND,
                f"open: not_found (the folder pool's parent {parent} does not exist)",
                hint="mount or create the synced folder, then run `chapters sync`",
            )
        try:
            os.makedirs(self.pool_root)
        except OSError as exc:
            raise TransportError(FailureCode.REFUSED,
                                 f"open: refused ({exc.strerror})") from None
        return True

    def _view(self) -> PoolView:
        try:
            return read_pool(self.pool_root)
        except OSError as exc:
            raise TransportError(FailureCode.NOT_FOUND,
                                 f"pull: not_found ({exc.strerror})") from None

    def _own_manifest(self, view: PoolView) -> Manifest | None:
        path = os.path.join(self.pool_root, writer_file(self.writer))
        if not os.path.exists(path):
            return None
        with open(path, "rb") as handle:
            mine = parse_manifest(handle.read())
        if mine is None:
            raise TransportError(
                FailureCode.CORRUPT,
                f"push: corrupt (this machine's manifest {writer_file(self.writer)} does not "
                "parse)",
                hint="restore it from the synced folder's history, or link a fresh pool",
            )
        return mine

    def _write_pool(self, path: str, data: bytes) -> None:
        try:
            write_atomic(os.path.join(self.pool_root, path), data)
        except OSError as exc:
            raise TransportError(FailureCode.REFUSED,
                                 f"push: refused ({exc.strerror} writing {path})") from None

    @contextmanager
    def _push_lock(self) -> Iterator[None]:
        path = os.path.join(self.pool_root, LOCK_FILE)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    # ---- the mirror ----------------------------------------------------------------------
    def _clone(self, *, created_pool: bool, moved_aside: str = "") -> MirrorState:
        os.makedirs(self.mirror_root, exist_ok=True)
        self._state = _fresh_state()
        view = self._view()
        _, arriving = self._materialize(view)
        self._state["base"] = view.head
        self._save_state()
        return MirrorState(root=self.mirror_root, head=view.head, cloned=True,
                           created_pool=created_pool, moved_aside=moved_aside,
                           arriving=arriving)

    def _materialize(self, view: PoolView) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Copy into the mirror every listed file whose bytes have arrived whole. Returns
        (changed paths, arriving paths); arriving ones are retried by the next pull."""
        changed: list[str] = []
        arriving: list[str] = [f".folder-pool/manifests/{w}.json" for w in
                               view.arriving_manifests]
        seen: dict[str, list[Any]] = self._state["seen"]
        local: dict[str, str] = self._state["mirror"]
        for path in sorted(view.claims):
            claims = view.claims[path]
            if not safe_pool_path(path) or path in self._state["committed"]:
                continue  # our own unpushed bytes stay until the push lands
            if any(local.get(path) == claim.sha256 for claim in claims):
                continue
            source = os.path.join(self.pool_root, path)
            try:
                stat = os.stat(source)
            except FileNotFoundError:
                arriving.append(path)
                continue
            cached = seen.get(path)
            if cached and cached[0] == stat.st_size and cached[1] == stat.st_mtime_ns:
                size, sha = stat.st_size, str(cached[2])
            else:
                size, sha = sha256_file(source)
                seen[path] = [size, stat.st_mtime_ns, sha]
            if Claim(size, sha) not in claims:
                arriving.append(path)  # still copying, or its manifest ran ahead of it
                continue
            with open(source, "rb") as handle:
                data = handle.read()
            if hashlib.sha256(data).hexdigest() != sha:  # changed under us: next pull
                arriving.append(path)
                continue
            write_atomic(os.path.join(self.mirror_root, path), data)
            local[path] = sha
            changed.append(path)
        self._state["arriving"] = sorted(arriving)
        return tuple(changed), tuple(sorted(arriving))

    def _move_aside(self) -> str:
        target = f"{self.mirror_root}.stale-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        os.replace(self.mirror_root, target)
        return target

    def _load_state(self) -> dict[str, Any] | None:
        try:
            with open(os.path.join(self.mirror_root, STATE_FILE), "rb") as handle:
                state = json.loads(handle.read().decode("utf-8"))
            fresh = _fresh_state()
            if not isinstance(state, dict) or set(state) != set(fresh):
                return None
            if not all(isinstance(state[k], type(v)) for k, v in fresh.items()):
                return None
        except (OSError, ValueError):
            return None
        # The mirror's own files must be what the state says; anything else is stale.
        listed = set(walk_files(self.mirror_root))
        known = set(state["mirror"]) | set(state["staged"]) | set(state["committed"])
        if listed - known:
            return None
        return state

    def _save_state(self) -> None:
        for path, sha in self._state["staged"].items():
            self._state["mirror"][path] = sha
        data = json.dumps(self._state, sort_keys=True).encode("utf-8")
        write_atomic(os.path.join(self.mirror_root, STATE_FILE), data)

    def _require_open(self) -> None:
        if not self._state:
            raise TransportError(FailureCode.CORRUPT, "the folder mirror is not open",
                                 hint="call open() first")


def _fresh_state() -> dict[str, Any]:
    return {"base": "", "staged": {}, "committed": {}, "commit": "", "mirror": {},
            "seen": {}, "arriving": []}
