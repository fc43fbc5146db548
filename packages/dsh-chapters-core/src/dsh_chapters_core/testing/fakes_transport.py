"""An in-memory pool and a provider over it, which can diverge or fail on demand.

`InMemoryPool` is the shared upstream (a list of snapshot commits, fast-forward only);
`FakeProvider` is one machine's mirror of it with the six verbs of `KnowledgeProvider`.
Failures are injected per verb as `FailureCode`s, and `before_push` lets a test make another
machine push first, so divergence is deterministic. Also a `MemoryTree` (FileTree), a
`FakeLock` that records when it is held, and a settable `FakeClock`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_core.ports.store import LockState
from dsh_chapters_core.ports.transport import (
    MirrorState,
    ProviderContext,
    PullResult,
    PushResult,
    StageResult,
)
from dsh_chapters_core.remote import parse_remote


class MemoryTree:
    """A FileTree in a dict: relative, forward-slash paths to bytes."""

    def __init__(self, root: str = "mem://tree", files: Mapping[str, bytes] | None = None) -> None:
        self.root = root
        self.files: dict[str, bytes] = dict(files or {})
        self.writes: list[str] = []

    def list(self, prefix: str = "") -> Iterator[str]:
        return iter(sorted(p for p in self.files if p.startswith(prefix)))

    def exists(self, path: str) -> bool:
        return path in self.files

    def read(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    def digest(self, path: str) -> str:
        return hashlib.sha256(self.read(path)).hexdigest()

    def write(self, path: str, data: bytes) -> None:
        self.files[path] = bytes(data)
        self.writes.append(path)

    def delete(self, path: str) -> None:
        self.files.pop(path, None)

    def snapshot(self) -> dict[str, bytes]:
        return dict(self.files)

    def replace_all(self, files: Mapping[str, bytes]) -> None:
        self.files = dict(files)


class FakeLock:
    """A writer lock that is not re-entrant (so a nested hold fails the test loudly)."""

    def __init__(self) -> None:
        self.held = False
        self.holds = 0

    @contextmanager
    def _hold(self) -> Iterator[None]:
        if self.held:
            raise AssertionError("the writer lock is not re-entrant: nested hold")
        self.held = True
        self.holds += 1
        try:
            yield
        finally:
            self.held = False

    def hold(self, timeout_s: float) -> AbstractContextManager[None]:
        return self._hold()

    def state(self) -> LockState:
        return LockState(held=self.held, path="mem://lock")


class FakeClock:
    """Wall time you set or advance; `now()` is ISO-8601 UTC with a `Z`."""

    def __init__(self, start: str = "2026-11-30T08:50:00Z") -> None:
        self.ms = int(datetime.fromisoformat(start).timestamp() * 1000)

    def advance(self, ms: int) -> None:
        self.ms += ms

    def now(self) -> str:
        return datetime.fromtimestamp(self.ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def monotonic(self) -> float:
        return self.ms / 1000


@dataclass(frozen=True, slots=True)
class PoolCommit:
    """One snapshot commit of the in-memory pool: its id, parent, author, message and every file."""

    id: str
    parent: str
    author: str
    message: str
    files: tuple[tuple[str, bytes], ...]


def _commit_id(parent: str, author: str, message: str, files: Mapping[str, bytes]) -> str:
    h = hashlib.sha1(usedforsecurity=False)
    for part in (parent, author, message):
        h.update(part.encode() + b"\0")
    for path in sorted(files):
        h.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return h.hexdigest()


@dataclass
class InMemoryPool:
    """The shared upstream: fast-forward only, so it can never lose a commit."""

    exists: bool = False  # a local-path pool is created by the first open
    reachable: bool = True  # False: every call fails with `network` (connection refused)
    commits: list[PoolCommit] = field(default_factory=list)

    @property
    def head(self) -> str:
        return self.commits[-1].id if self.commits else ""

    def files(self) -> dict[str, bytes]:
        return dict(self.commits[-1].files) if self.commits else {}

    def authors(self) -> list[str]:
        return [c.author for c in self.commits]

    def advance(self, parent: str, author: str, message: str, files: Mapping[str, bytes]) -> str:
        if parent != self.head:
            raise TransportError(FailureCode.DIVERGED, "push: the pool moved (not a fast-forward)")
        commit = PoolCommit(
            _commit_id(parent, author, message, files),
            parent,
            author,
            message,
            tuple(sorted(files.items())),
        )
        self.commits.append(commit)
        return commit.id


class FakeProvider:
    """One machine's mirror of an `InMemoryPool`, with failures injected per verb."""

    def __init__(
        self,
        pool: InMemoryPool,
        mirror: MemoryTree | None = None,
        *,
        name: str = "fake",
        refuse_over: int = 0,
    ) -> None:
        self.name = name
        self.pool = pool
        self.mirror = mirror if mirror is not None else MemoryTree("mem://mirror")
        self.mirror_root = self.mirror.root
        self.refuse_over = refuse_over  # stage refuses files larger than this (0: no limit)
        self.base: str | None = None  # the pool head the mirror is on; None: not materialized
        self.committed: dict[str, bytes] = {}
        self.unpushed = 0
        self.last_author = ""
        self.last_message = ""
        self.failures: dict[str, list[FailureCode]] = {}
        self.before_push: Callable[[], None] | None = None
        self.calls: list[str] = []
        self.closed = False
        self.lock_probe: Callable[[], bool] | None = None  # records if the writer lock is held
        self.unlocked_calls: list[str] = []

    # -- test controls
    def fail_next(self, verb: str, code: FailureCode, times: int = 1) -> None:
        self.failures.setdefault(verb, []).extend([code] * times)

    def _gate(self, verb: str, *, network: bool = True) -> None:
        self.calls.append(verb)
        if self.lock_probe is not None and not self.lock_probe():
            self.unlocked_calls.append(verb)
        queue = self.failures.get(verb)
        if queue:
            code = queue.pop(0)
            raise TransportError(code, f"{code} (injected at {verb})")
        if network and not self.pool.reachable:
            raise TransportError(FailureCode.NETWORK, "connection refused")

    def _materialize(self) -> None:
        files = self.pool.files()
        self.mirror.replace_all(files)
        self.committed = dict(files)
        self.base = self.pool.head
        self.unpushed = 0

    # -- the six verbs
    def open(self) -> MirrorState:
        self._gate("open")
        created = not self.pool.exists
        self.pool.exists = True
        if self.base is None:
            self._materialize()
            return MirrorState(
                self.mirror_root, head=self.base or "", cloned=True, created_pool=created
            )
        return MirrorState(self.mirror_root, head=self.base, created_pool=created)

    def pull(self) -> PullResult:
        self._gate("pull")
        before = self.base or ""
        if self.pool.head == before:
            return PullResult(before, before)
        if self.unpushed:
            raise TransportError(FailureCode.DIVERGED, "pull: local commits and the pool moved")
        files = self.pool.files()
        changed = tuple(
            sorted(
                p for p in set(files) | set(self.committed) if files.get(p) != self.committed.get(p)
            )
        )
        self._materialize()
        return PullResult(before, self.pool.head, changed_paths=changed)

    def stage(self, files: Mapping[str, bytes]) -> StageResult:
        self._gate("stage", network=False)
        new = changed = unchanged = 0
        refused: list[tuple[str, int]] = []
        for path, data in sorted(files.items()):
            if self.refuse_over and len(data) > self.refuse_over:
                refused.append((path, len(data)))
                continue
            if not self.mirror.exists(path):
                new += 1
            elif self.mirror.read(path) != data:
                changed += 1
            else:
                unchanged += 1
                continue
            self.mirror.write(path, data)
        return StageResult(new=new, changed=changed, unchanged=unchanged, refused=tuple(refused))

    def commit(self, message: str, author: str) -> str | None:
        self._gate("commit", network=False)
        snapshot = self.mirror.snapshot()
        if snapshot == self.committed:
            return None
        self.committed = snapshot
        self.unpushed += 1
        self.last_author, self.last_message = author, message
        return _commit_id(self.base or "", author, message, snapshot)

    def push(self) -> PushResult:
        self._gate("push")
        if not self.unpushed:
            return PushResult(self.base or "", pushed=False)
        if self.before_push is not None:
            hook, self.before_push = self.before_push, None
            hook()
        head = self.pool.advance(
            self.base or "", self.last_author, self.last_message, self.committed
        )
        self.base = head
        self.unpushed = 0
        return PushResult(head, pushed=True)

    def rebuild(self) -> MirrorState:
        self._gate("rebuild")
        self._materialize()
        return MirrorState(self.mirror_root, head=self.base or "", cloned=True)

    def close(self) -> None:
        self.closed = True


_SAMPLE = {":": "pool", "/": "pool", "+": "https://host/pool"}


class FakeProviderFactory:
    """A `dsh_chapters.providers` plugin over in-memory pools, chosen by a remote prefix."""

    def __init__(
        self,
        name: str = "fake",
        prefix: str = "fake:",
        pools: dict[str, InMemoryPool] | None = None,
        schemes: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.prefix = prefix
        # The schemes it declares: given, or the one its prefix starts (`fake:` → `fake`,
        # `/` → `file`, `treedx+` → `treedx+https`), as `parse_remote` names them.
        self.schemes = schemes or (parse_remote(prefix + _SAMPLE.get(prefix[-1:], "")).scheme,)
        self.pools = pools if pools is not None else {}
        self.created: list[ProviderContext] = []
        self.providers: dict[tuple[str, str], FakeProvider] = {}

    def matches(self, remote: str) -> bool:
        return remote.startswith(self.prefix)

    def create(self, context: ProviderContext) -> FakeProvider:
        """One provider per (pool, mirror): a machine's mirror outlives one sync, as on disk."""
        self.created.append(context)
        key = (context.remote, context.mirror_root)
        if key not in self.providers:
            pool = self.pools.setdefault(context.remote, InMemoryPool())
            self.providers[key] = FakeProvider(
                pool, MemoryTree(context.mirror_root), name=self.name
            )
        return self.providers[key]
