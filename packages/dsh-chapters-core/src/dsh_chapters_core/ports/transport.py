"""The transport seam (amendment 2026-09-21): git is one provider, TreeDX another.

Providers materialize a mirror directory (`.dsh-knowledge/`) and move it to and from the pool.
The core's sync use case decides *what* to publish (copy-out) and what to bring in (copy-in);
providers only know files. Failures are `TransportError` with a `FailureCode`, never prose.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.store import CredentialStore


@dataclass(frozen=True, slots=True)
class MirrorState:
    """What `open()` found or did: `cloned` on a first materialization, `moved_aside` if stale."""

    root: str
    head: str = ""  # the pool head the mirror was last synced to ("" for an empty pool)
    cloned: bool = False
    created_pool: bool = False  # a local-path pool was created by this open
    moved_aside: str = ""  # path of a `.stale-<timestamp>` mirror, if one was moved aside
    # Pool paths the pool lists but whose bytes have not fully arrived (a synced folder still
    # copying them): left out of the mirror, never read as corrupt, retried by the next pull.
    arriving: tuple[str, ...] = ()
    unsafe_paths: tuple[str, ...] = ()  # pool entries never materialized (`..`, `.git`, …)


@dataclass(frozen=True, slots=True)
class PullResult:
    """What a pull did: the pool head before and after, the paths it changed, and the pool paths
    still arriving or never materialized."""

    head_before: str
    head_after: str
    changed_paths: tuple[str, ...] = ()
    requests: int = 0  # network round trips, for request-count tests (0 where not counted)
    arriving: tuple[str, ...] = ()  # as in MirrorState: listed, not yet fully arrived
    unsafe_paths: tuple[str, ...] | None = None  # as in MirrorState; None = unchanged by pull


@dataclass(frozen=True, slots=True)
class StageResult:
    """What staging files into the mirror did: new, changed and unchanged counts, and the files the
    transport refused."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0
    refused: tuple[tuple[str, int], ...] = ()  # (path, size) the transport cannot carry


@dataclass(frozen=True, slots=True)
class PushResult:
    """What a push did: the pool head after it, and whether there was anything to push."""

    head: str
    pushed: bool  # false when there was nothing to push


class KnowledgeProvider(Protocol):
    """Six verbs. Every call has a hard timeout and can never prompt on a TTY.

    - `open` materializes or opens the mirror (clone if absent; a dirty or corrupt mirror is
      moved aside as `.stale-<timestamp>` and rebuilt).
    - `pull` is fast-forward only; `TransportError(DIVERGED)` if it cannot be.
    - `stage` writes files into the mirror (pool-relative paths), reporting new/changed.
    - `commit` records staged files authored by the harness id; None if nothing changed.
    - `push` is fast-forward only; `TransportError(DIVERGED)` when the pool moved.
    - `rebuild` removes the mirror and materializes it fresh (§5.2: rebuild, never merge).
    """

    name: str
    mirror_root: str

    def open(self) -> MirrorState: ...

    def pull(self) -> PullResult: ...

    def stage(self, files: Mapping[str, bytes]) -> StageResult: ...

    def commit(self, message: str, author: str) -> str | None: ...

    def push(self) -> PushResult: ...

    def rebuild(self) -> MirrorState: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ProviderContext:
    """Everything a provider factory may use. The token is read through `credentials` only."""

    remote: str
    workspace: str
    mirror_root: str
    project_key: str
    harness_id: str
    config: Config
    credentials: CredentialStore
    credential_name: str  # the key under which this pool's token is stored


@runtime_checkable
class ProviderFactory(Protocol):
    """What a `dsh_chapters.providers` entry point returns (plugin-facing, so runtime-checked).

    `schemes` declares the remote schemes the provider owns, as `remote.parse_remote` names
    them (fsspec's registry is the model): `("file", "http", "https")` for git, a compound
    `("treedx+https", "treedx+http")`, `("folder",)` for `folder+<path>`. The composition root
    resolves a remote's scheme to the one provider declaring it; `matches` then checks the
    rest of the remote's shape (a TreeDX remote names a repository).

    Two optional class attributes, read with a False default:
    - `token_always_required`: `chapters link` refuses without a token, loopback included;
    - `link_resolves_pool`: `chapters link` opens the pool once (resolve-or-create), so a bad
      token or an absent service fails the link rather than a later sync.
    """

    name: str
    schemes: tuple[str, ...]

    def matches(self, remote: str) -> bool: ...

    def create(self, context: ProviderContext) -> KnowledgeProvider: ...


@dataclass(frozen=True, slots=True)
class HealthFinding:
    """One thing `chapters doctor` found wrong with a provider's mirror or pool."""

    code: str  # stable: "mirror-corrupt", "pool-lock-stale", …
    path: str  # the file or directory concerned
    detail: str  # what is wrong, with numbers
    repair: str = ""  # what `--repair` would do ("" when nothing is automatic)


@runtime_checkable
class ProviderDoctor(Protocol):
    """What a provider may add for `chapters doctor`: checks of its mirror, plus bounded
    requests (within the provider's own timeouts) only where the pool keeps no local trace
    (TreeDX: reachability, the token, a lease a killed push left); and the repair of what it
    found (§5.2: a corrupt mirror is rebuilt, never patched)."""

    def diagnose(self) -> tuple[HealthFinding, ...]: ...

    def repair(self, finding: HealthFinding) -> str:
        """Do `finding.repair`; return what was done, in words."""
        ...


@dataclass(frozen=True, slots=True)
class HistoryFile:
    """One version of a file in the pool's history: its path (pool-relative; "" for an
    object no commit names), the commit it was first met at walking back from the heads
    ("" for such an object), where it was read, and its bytes."""

    path: str
    commit: str
    where: str  # "mirror" (this machine's copy of the history) or "pool" (a local-path pool)
    data: bytes


@runtime_checkable
class PoolHistory(Protocol):
    """What a provider may add for `chapters scan` (§9): every version of every file the
    pool's history holds, as far as this machine can read it without the network (git: the
    mirror's objects, and a local-path pool's own), each distinct content once. A provider
    that keeps no history here (TreeDX) does not implement it."""

    def history_files(self) -> Iterator[HistoryFile]: ...
