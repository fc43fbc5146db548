"""The sync use case (§5): open → pull → copy-in → copy-out → commit → push, under the lock.

The store is the truth and the mirror is transport (§3.1), so every repair is a rebuild of
the mirror from the store (§5.2, r35): never a merge, never a force push. Any transport
failure degrades to local-only (§5.3): the archive is untouched, pending files are counted,
and the report says so with the failure code and the numbers.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Protocol

from dsh_chapters_core.config import Config
from dsh_chapters_core.errors import ChaptersError, FailureCode, TransportError, UsageError
from dsh_chapters_core.pool_layout import (
    PROJECT_FILE,
    SESSION_FILE,
    Ownership,
    PoolFileKind,
    frontmatter_value,
    is_session_id,
    pool_prefixes,
    project_manifest,
    session_record,
    to_pool,
    to_store,
)
from dsh_chapters_core.ports.clock import Clock
from dsh_chapters_core.ports.store import FileTree, WriterLock
from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderFactory
from dsh_chapters_core.projectkey import ProjectIdentity, project_slug

STATE_PATH = "state/sync.json"  # relative to the store root; machine-local, never published
DERIVED_POOL_PREFIXES = ("index/", "topics/")  # §10.2: the Layer-2 index sync derives, never merges


class SyncMode(enum.StrEnum):
    FULL = "full"  # pull → copy-in → copy-out → push (`chapters sync`, a fork-like archive)
    PULL = "pull"  # before an archive point, or a session start
    PUSH = "push"  # the (debounced) push after an archive


class ProjectIdentityView(Protocol):
    """What sync reads of the project's identity (§2.3)."""

    @property
    def project_key(self) -> str: ...

    @property
    def canonical(self) -> str: ...

    @property
    def derivation(self) -> str: ...


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What one sync did, in numbers; `line()` is what `chapters status` prints."""

    mode: str
    at: str
    harness_id: str
    remote: str = ""
    provider: str = ""
    ok: bool = True
    steps: tuple[str, ...] = ()
    failure_code: str = ""  # a FailureCode value when local-only
    failure_step: str = ""  # open | pull | rebuild | stage | commit | push
    failure_detail: str = ""  # the provider's message (built from codes, never a token)
    cloned: bool = False
    created_pool: bool = False
    moved_aside: str = ""
    pulled: int = 0
    copied_in_new: int = 0
    copied_in_changed: int = 0
    published_new: int = 0
    published_changed: int = 0
    already_mirrored: int = 0
    refused: tuple[tuple[str, int], ...] = ()
    commit: str = ""
    pushed: bool = False
    rebuilds: int = 0
    pending: int = 0
    head: str = ""
    arriving: int = 0  # pool files listed but not yet fully arrived (a synced folder pool)

    @property
    def local_only(self) -> bool:
        return not self.ok

    def line(self) -> str:
        """`cloned → published 12 new, 3 already mirrored → pushed`, or the local-only form."""
        if self.ok:
            return " → ".join(self.steps) if self.steps else "nothing to do"
        detail = f" ({self.failure_detail})" if self.failure_detail else ""
        cause = f"{self.failure_step}: {self.failure_code}{detail}"
        return f"local-only — {cause} · {self.pending} pending"

    def to_json(self) -> dict[str, Any]:
        """camelCase keys, like every `--json` answer of the CLI, plus the rendered `line`."""
        data = {_camel(k): v for k, v in asdict(self).items()}
        data["steps"] = list(self.steps)
        data["refused"] = [list(r) for r in self.refused]
        data["line"] = self.line()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SyncReport:
        known = {_camel(f.name): f.name for f in fields(cls)}
        kwargs = {known[k]: v for k, v in data.items() if k in known}
        kwargs["steps"] = tuple(str(s) for s in data.get("steps", ()))
        kwargs["refused"] = tuple((str(p), int(n)) for p, n in data.get("refused", ()))
        return cls(**kwargs)


def _failure_detail(exc: TransportError) -> str:
    """The provider's detail for the status line: `push: network (connection refused)` gives
    `connection refused`, so the line does not say the step and code twice. Display only:
    nothing branches on it (the code does that)."""
    first = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
    match = re.match(rf"^(?:[\w-]+: )?{re.escape(str(exc.code))}\s*\((.*)\)$", first)
    return match.group(1) if match else first


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass(frozen=True, slots=True)
class SyncState:
    """`.dsh-chapters/state/sync.json`: the last report, the push schedule, unpushed files."""

    report: SyncReport | None = None
    last_push_at: str = ""  # ISO time of the last successful push step
    push_due_at: str = ""  # a deferred (debounced) push waits until then
    unpushed: tuple[str, ...] = ()  # pool paths committed in the mirror but not yet pushed

    def to_bytes(self) -> bytes:
        data = {
            "report": self.report.to_json() if self.report else None,
            "lastPushAt": self.last_push_at,
            "pushDueAt": self.push_due_at,
            "unpushed": sorted(self.unpushed),
        }
        return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode(
            "utf-8"
        )


def read_sync_state(store_tree: FileTree) -> SyncState:
    """The persisted state; an absent or unreadable file is a fresh state (it is derived)."""
    if not store_tree.exists(STATE_PATH):
        return SyncState()
    try:
        data = json.loads(store_tree.read(STATE_PATH).decode("utf-8"))
        raw = data.get("report")
        return SyncState(
            report=SyncReport.from_json(raw) if isinstance(raw, dict) else None,
            last_push_at=str(data.get("lastPushAt", "")),
            push_due_at=str(data.get("pushDueAt", "")),
            unpushed=tuple(str(p) for p in data.get("unpushed", ())),
        )
    except (ValueError, TypeError, AttributeError):
        return SyncState()


def write_sync_state(store_tree: FileTree, state: SyncState) -> None:
    store_tree.write(STATE_PATH, state.to_bytes())


# ---------------------------------------------------------------------------------------------
# Provider selection (amendment 2026-09-21): by scheme, and the policy must agree.


def select_provider(
    factories: tuple[ProviderFactory, ...], remote: str, policy: str
) -> ProviderFactory:
    """The one factory for `remote`. An explicit `knowledgeProvider` that contradicts the
    remote's scheme refuses: nothing ever falls back into the wrong pool."""
    if not remote:
        raise ChaptersError(
            "no knowledge pool is linked (local-only)",
            hint="run `chapters link <path>` or `chapters link <https-url> <token>`",
        )
    matching = [f for f in factories if f.matches(remote)]
    installed = ", ".join(sorted(f.name for f in factories)) or "none"
    if policy != "auto":
        named = [f for f in factories if f.name == policy]
        if not named:
            raise UsageError(
                f"knowledgeProvider = {policy}, but no `{policy}` provider is installed "
                f"(installed: {installed})",
                hint=f"install dsh-chapters[{policy}] or set knowledgeProvider = auto",
            )
        if named[0] not in matching:
            others = ", ".join(sorted(f.name for f in matching)) or "no installed provider"
            raise UsageError(
                f"knowledgeProvider = {policy} contradicts the remote {remote!r} "
                f"(its scheme belongs to {others})",
                hint="link a remote of that scheme, or set knowledgeProvider = auto",
            )
        return named[0]
    if not matching:
        raise UsageError(
            f"no installed provider takes the remote {remote!r} (installed: {installed})",
            hint="use a local path, an https:// URL or treedx+<url>/<repo>",
        )
    if len(matching) > 1:
        names = ", ".join(sorted(f.name for f in matching))
        raise UsageError(
            f"{len(matching)} providers claim the remote {remote!r}: {names}",
            hint="set knowledgeProvider in .dsh-chapters/config.toml to choose one",
        )
    return matching[0]


# ---------------------------------------------------------------------------------------------
# Copy-in and copy-out (§3.1).


def store_ownership(store_tree: FileTree, harness_id: str) -> Ownership:
    """Who owns each session in the store, from its `session.json` (§3.3)."""
    owners: list[tuple[str, str]] = []
    for path in store_tree.list():
        parts = path.split("/")
        if len(parts) == 2 and parts[1] == SESSION_FILE and is_session_id(parts[0]):
            try:
                meta = json.loads(store_tree.read(path).decode("utf-8"))
                owner = str(meta.get("harnessId", "")) if isinstance(meta, dict) else ""
            except ValueError:
                continue  # unreadable: treat as written here, like a session without one
            owners.append((parts[0], owner))
    return Ownership(harness_id=harness_id, session_owners=tuple(sorted(owners)))


@dataclass(frozen=True, slots=True)
class Outgoing:
    """What copy-out would publish now, and how much is already in the mirror."""

    files: tuple[str, ...]  # store paths, sorted
    pool_paths: tuple[str, ...]
    new: int
    changed: int
    unchanged: int


def outgoing(
    store_tree: FileTree, mirror_tree: FileTree, project_key: str, ownership: Ownership
) -> Outgoing:
    """Our store files that the mirror lacks or holds with other bytes (chapters are
    append-only; the only changed chapter bytes are the enrichment frontmatter write)."""
    files: list[str] = []
    pool_paths: list[str] = []
    new = changed = unchanged = 0
    for store_path in sorted(store_tree.list()):
        entry = to_pool(store_path, project_key)
        if entry is None or not ownership.is_ours(entry):
            continue
        if mirror_tree.exists(entry.pool_path):
            if entry.kind is PoolFileKind.ARTIFACT or (
                mirror_tree.digest(entry.pool_path) == store_tree.digest(store_path)
            ):
                unchanged += 1
                continue
            changed += 1
        else:
            new += 1
        files.append(store_path)
        pool_paths.append(entry.pool_path)
    return Outgoing(tuple(files), tuple(pool_paths), new, changed, unchanged)


def pending_paths(
    store_tree: FileTree,
    mirror_tree: FileTree,
    project_key: str,
    harness_id: str,
    unpushed: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """Pool paths of store files not yet in the pool: unmirrored, or mirrored but unpushed."""
    out = outgoing(store_tree, mirror_tree, project_key, store_ownership(store_tree, harness_id))
    return tuple(sorted(set(out.pool_paths) | set(unpushed)))


def _first_chapter(mirror_tree: FileTree, project_key: str, session_id: str) -> bytes | None:
    names = sorted(mirror_tree.list(f"chapters/{project_key}/{session_id}/"))
    return mirror_tree.read(names[0]) if names else None


def _name_writers(
    store_tree: FileTree,
    mirror_tree: FileTree,
    project_key: str,
    owners: dict[str, str],
    session_ids: set[str],
) -> None:
    """Write `session.json` for sessions first seen in the pool (or whose writer was unknown),
    naming the writer from their chapters' frontmatter, so we never publish them as ours."""
    for sid in sorted(session_ids):
        if owners.get(sid):
            continue  # a known writer, ours or theirs
        if sid not in owners and any(True for _ in store_tree.list(f"{sid}/")):
            continue  # archived here before any session.json: ours
        first = _first_chapter(mirror_tree, project_key, sid)
        writer = frontmatter_value(first, "harnessId") if first is not None else ""
        if sid in owners and not writer:
            continue  # still unknown; nothing better to record
        harness = frontmatter_value(first, "harness") if first is not None else ""
        store_tree.write(
            f"{sid}/{SESSION_FILE}",
            session_record(
                session_id=sid, harness_id=writer, harness=harness, project_key=project_key
            ),
        )
        owners[sid] = writer


def copy_in(
    store_tree: FileTree, mirror_tree: FileTree, project_key: str, harness_id: str
) -> tuple[int, int]:
    """Bring other machines' files into the store: new files, and changed foreign files (their
    edits grow, their chapters get enriched). Our own files are never overwritten from the pool.
    Returns (new, changed)."""
    entries = []
    for prefix in pool_prefixes(project_key):
        for pool_path in sorted(mirror_tree.list(prefix)):
            entry = to_store(pool_path, project_key)
            if entry is not None:
                entries.append(entry)
    owners = dict(store_ownership(store_tree, harness_id).session_owners)
    _name_writers(
        store_tree,
        mirror_tree,
        project_key,
        owners,
        {e.session_id for e in entries if e.session_id},
    )
    ownership = Ownership(harness_id, tuple(sorted(owners.items())))
    new = changed = 0
    for entry in entries:
        if not store_tree.exists(entry.store_path):
            new += 1
        elif (
            entry.kind is not PoolFileKind.ARTIFACT
            and not ownership.is_ours(entry)
            and store_tree.digest(entry.store_path) != mirror_tree.digest(entry.pool_path)
        ):
            changed += 1
        else:
            continue
        store_tree.write(entry.store_path, mirror_tree.read(entry.pool_path))
    return new, changed


@dataclass(frozen=True, slots=True)
class PoolChapter:
    """A chapter in the mirror, as `chapters list --pool` shows it."""

    path: str  # pool-relative
    session_id: str
    harness_id: str
    title: str
    date: str


def pool_chapters(mirror_tree: FileTree, project_key: str) -> tuple[PoolChapter, ...]:
    """Every chapter of this project in the mirror, across machines, sorted by path."""
    out: list[PoolChapter] = []
    for path in sorted(mirror_tree.list(f"chapters/{project_key}/")):
        entry = to_store(path, project_key)
        if entry is None or entry.kind is not PoolFileKind.CHAPTER:
            continue
        text = mirror_tree.read(path)
        out.append(
            PoolChapter(
                path=path,
                session_id=entry.session_id,
                harness_id=frontmatter_value(text, "harnessId"),
                title=frontmatter_value(text, "title"),
                date=frontmatter_value(text, "date"),
            )
        )
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The loop.


@dataclass
class _Run:
    """Mutable bookkeeping of one sync; frozen into a SyncReport at the end."""

    store_tree: FileTree
    provider: KnowledgeProvider
    mirror_tree: FileTree
    clock: Clock
    config: Config
    identity: ProjectIdentityView
    harness_id: str
    mode: SyncMode
    prior: SyncState
    steps: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    committed_paths: set[str] = field(default_factory=set)
    step: str = "open"
    pushed_ok: bool = False
    derive: Callable[[], Mapping[str, bytes]] | None = None

    @property
    def key(self) -> str:
        return self.identity.project_key

    def execute(self) -> None:
        self.step = "open"
        state = self.provider.open()
        self.counts.update(
            cloned=state.cloned,
            created_pool=state.created_pool,
            moved_aside=state.moved_aside,
            head=state.head,
        )
        if state.moved_aside:
            self.steps.append("moved a stale mirror aside")
        if state.created_pool:
            self.steps.append("created the pool")
        self.steps.append("cloned" if state.cloned else "opened")
        self._note_arriving(state.arriving)
        if self.mode is not SyncMode.PUSH and not state.cloned:
            self._pull()
        if self.mode is not SyncMode.PUSH:
            self._copy_in()
        if self.mode is SyncMode.PULL:
            return
        self._publish()

    def _pull(self) -> None:
        self.step = "pull"
        try:
            result = self.provider.pull()
        except TransportError as exc:
            if exc.code is not FailureCode.DIVERGED:
                raise
            self.steps.append("pull diverged")
            self._rebuild()
            return
        self.counts["pulled"] = len(result.changed_paths)
        self.counts["head"] = result.head_after
        self.steps.append(
            f"pulled {len(result.changed_paths)} changed" if result.changed_paths else "up to date"
        )
        self._note_arriving(result.arriving)

    def _note_arriving(self, arriving: tuple[str, ...]) -> None:
        """A half-synced pool file is pending, not corrupt: the next pull retries it."""
        self.counts["arriving"] = len(arriving)
        if arriving:
            self.steps.append(f"{len(arriving)} pending (not yet arrived)")

    def _rebuild(self) -> None:
        # §5.2 (r35): the mirror is transport, so rebuild it from the pool; never merge.
        self.step = "rebuild"
        state = self.provider.rebuild()
        self.counts["rebuilds"] = self.counts.get("rebuilds", 0) + 1
        self.counts["head"] = state.head
        self.committed_paths.clear()  # the rebuild dropped unpushed commits; the store re-publishes
        self.steps.append("rebuilt")
        self._note_arriving(state.arriving)

    def _copy_in(self) -> None:
        self.step = "copy-in"
        new, changed = copy_in(self.store_tree, self.mirror_tree, self.key, self.harness_id)
        self.counts["copied_in_new"] = self.counts.get("copied_in_new", 0) + new
        self.counts["copied_in_changed"] = self.counts.get("copied_in_changed", 0) + changed
        if new or changed:
            self.steps.append(f"copied in {new} new" + (f", {changed} changed" if changed else ""))

    def _stage(self) -> bool:
        """Copy-out: stage our new and changed files (and `project.yml` once). True if any."""
        self.step = "stage"
        ownership = store_ownership(self.store_tree, self.harness_id)
        out = outgoing(self.store_tree, self.mirror_tree, self.key, ownership)
        files = {
            pool: self.store_tree.read(store)
            for store, pool in zip(out.files, out.pool_paths, strict=True)
        }
        wrote_manifest = not self.mirror_tree.exists(PROJECT_FILE)
        if wrote_manifest:
            files[PROJECT_FILE] = project_manifest(
                project_key=self.key,
                slug=project_slug(
                    ProjectIdentity(self.key, self.identity.canonical, self.identity.derivation)
                ),
                derivation=self.identity.derivation,
                created_by=self.harness_id,
                created_at=self.clock.now(),
            )
        refused: tuple[tuple[str, int], ...] = ()
        if files:
            refused = self.provider.stage(files).refused
        refused_paths = {p for p, _ in refused}
        self.committed_paths |= set(files) - refused_paths - {PROJECT_FILE}
        self.counts.update(
            published_new=out.new,
            published_changed=out.changed,
            already_mirrored=out.unchanged,
            refused=refused,
        )
        text = f"published {out.new} new"
        if out.changed:
            text += f", {out.changed} changed"
        text += f", {out.unchanged} already mirrored"
        if refused:
            text += f", {len(refused)} refused by the transport"
        self.steps.append(text)
        if wrote_manifest:
            self.steps.append(f"wrote {PROJECT_FILE}")
        return bool(files)

    def _stage_derived(self) -> None:
        """§10.2, §3.3: stage the derived index, rebuilt from the mirror as it stands after
        pull, copy-in and our staging, so a divergent derived file is replaced, never merged."""
        if self.derive is None:
            return
        self.step = "stage"
        files = {
            path: data
            for path, data in self.derive().items()
            if path.startswith(DERIVED_POOL_PREFIXES) and ".." not in path.split("/")
        }
        if files:
            self.provider.stage(files)

    def _publish(self) -> None:
        attempt = 0
        while True:
            self._stage()
            self._stage_derived()
            self.step = "commit"
            # Committed even when only curation facts changed: fact-only passes must travel.
            sha = self.provider.commit(self._message(), self.harness_id)
            if sha:
                self.counts["commit"] = sha
            self.step = "push"
            try:
                result = self.provider.push()
            except TransportError as exc:
                if (
                    exc.code is not FailureCode.DIVERGED
                    or attempt >= self.config.sync_rebuild_retries
                ):
                    raise
                attempt += 1
                self.steps.append("push diverged")
                self._rebuild()
                if self.mode is SyncMode.FULL:
                    self._copy_in()
                continue
            self.counts.update(pushed=result.pushed, head=result.head)
            self.steps.append("pushed" if result.pushed else "nothing to push")
            self.pushed_ok = True
            self.committed_paths.clear()
            return

    def _message(self) -> str:
        new, changed = self.counts.get("published_new", 0), self.counts.get("published_changed", 0)
        return f"chapters: {self.harness_id} publishes {new} new, {changed} changed"

    def report(self, failure: TransportError | None) -> tuple[SyncReport, SyncState]:
        unpushed: set[str] = (
            set() if self.pushed_ok else set(self.prior.unpushed) | self.committed_paths
        )
        if self.pushed_ok:
            # Nothing wrote the store under the lock since staging: only refusals stay behind.
            refused = self.counts.get("refused", ())
            pending: tuple[str, ...] = tuple(p for p, _ in refused if p != PROJECT_FILE)
        else:
            pending = pending_paths(
                self.store_tree, self.mirror_tree, self.key, self.harness_id, tuple(unpushed)
            )
        c = self.counts
        report = SyncReport(
            mode=str(self.mode),
            at=self.clock.now(),
            harness_id=self.harness_id,
            remote=self.config.knowledge_remote,
            provider=self.provider.name,
            ok=failure is None,
            steps=tuple(self.steps),
            failure_code=str(failure.code) if failure else "",
            failure_step=self.step if failure else "",
            failure_detail=_failure_detail(failure) if failure else "",
            cloned=bool(c.get("cloned", False)),
            created_pool=bool(c.get("created_pool", False)),
            moved_aside=str(c.get("moved_aside", "")),
            pulled=int(c.get("pulled", 0)),
            copied_in_new=int(c.get("copied_in_new", 0)),
            copied_in_changed=int(c.get("copied_in_changed", 0)),
            published_new=int(c.get("published_new", 0)),
            published_changed=int(c.get("published_changed", 0)),
            already_mirrored=int(c.get("already_mirrored", 0)),
            refused=tuple(c.get("refused", ())),
            commit=str(c.get("commit", "")),
            pushed=bool(c.get("pushed", False)),
            rebuilds=int(c.get("rebuilds", 0)),
            pending=len(pending),
            head=str(c.get("head", "")),
            arriving=int(c.get("arriving", 0)),
        )
        now = report.at
        state = SyncState(
            report=report,
            last_push_at=now if self.pushed_ok else self.prior.last_push_at,
            push_due_at="" if self.pushed_ok else self.prior.push_due_at,
            unpushed=tuple(sorted(unpushed)),
        )
        return report, state


def sync(
    *,
    store_tree: FileTree,
    provider: KnowledgeProvider,
    mirror_tree: FileTree,
    lock: WriterLock,
    clock: Clock,
    config: Config,
    identity: ProjectIdentityView,
    harness_id: str,
    mode: str | SyncMode = SyncMode.FULL,
    derive: Callable[[], Mapping[str, bytes]] | None = None,
) -> SyncReport:
    """One sync under the writer lock (§5.2), shared with the archive so a pull never lands
    mid-write and a push never ships a half-written store. Transport failures never raise:
    they come back as a local-only report (§5.3). The report is persisted for `status`.

    `derive` returns the derived index (pool paths under `index/` and `topics/`, anything else
    is dropped); it is called after copy-in and our staging, again after every rebuild, and its
    bytes land in the same commit (§10.2)."""
    run_mode = SyncMode(mode)
    with lock.hold(config.sync_timeout_ms / 1000):
        run = _Run(
            store_tree=store_tree,
            provider=provider,
            mirror_tree=mirror_tree,
            clock=clock,
            config=config,
            identity=identity,
            harness_id=harness_id,
            mode=run_mode,
            prior=read_sync_state(store_tree),
            derive=derive,
        )
        failure: TransportError | None = None
        try:
            run.execute()
        except TransportError as exc:
            failure = exc
        report, state = run.report(failure)
        write_sync_state(store_tree, state)
    return report


# ---------------------------------------------------------------------------------------------
# The debounced push after an archive (§5.1, §5.2: consecutive archives coalesce).


@dataclass(frozen=True, slots=True)
class PushDecision:
    push_now: bool
    due_at: str = ""  # ISO time of the deferred push ("" when pushing now)
    reason: str = ""


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000) if iso else 0


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decide_push(*, now: str, last_push_at: str, push_due_at: str, debounce_ms: int) -> PushDecision:
    """Push now when no push went out within the window (or a deferred one is due); else
    defer to the end of the window, where `chapters sync` or the next archive delivers."""
    now_ms = _ms(now)
    if debounce_ms <= 0:
        return PushDecision(True, reason="syncDebounceMs is 0")
    if push_due_at and now_ms >= _ms(push_due_at):
        return PushDecision(True, reason="a deferred push is due")
    last_ms = _ms(last_push_at)
    if not last_push_at or now_ms - last_ms >= debounce_ms:
        return PushDecision(True, reason=f"no push in the last {debounce_ms} ms")
    due = push_due_at or _iso(last_ms + debounce_ms)
    return PushDecision(
        False,
        due_at=due,
        reason=f"a push went out {now_ms - last_ms} ms ago; coalescing until {due}",
    )


def push_after_archive(
    *,
    store_tree: FileTree,
    lock: WriterLock,
    clock: Clock,
    config: Config,
    run_push: Callable[[], SyncReport],
) -> SyncReport | PushDecision:
    """The archive's sync point: push now (through `run_push`, which takes the lock itself) or
    record the due time in the sync state and return the decision."""
    prior = read_sync_state(store_tree)
    decision = decide_push(
        now=clock.now(),
        last_push_at=prior.last_push_at,
        push_due_at=prior.push_due_at,
        debounce_ms=config.sync_debounce_ms,
    )
    if decision.push_now:
        return run_push()
    with lock.hold(config.sync_timeout_ms / 1000):
        current = read_sync_state(store_tree)
        if not current.push_due_at:
            write_sync_state(
                store_tree,
                SyncState(
                    report=current.report,
                    last_push_at=current.last_push_at,
                    push_due_at=decision.due_at,
                    unpushed=current.unpushed,
                ),
            )
    return decision


STATUS_LABEL_WIDTH = 11  # `chapters status` aligns its values after an 11-column label


def iter_pool_lines(report: SyncReport | None, pending: int, state: SyncState) -> Iterator[str]:
    """The sync lines of `chapters status` (no I/O)."""
    label, more = "sync".ljust(STATUS_LABEL_WIDTH), " " * STATUS_LABEL_WIDTH
    if report is None:
        yield f"{label}never synced · {pending} pending"
    elif report.ok:
        yield f"{label}{report.at} {report.line()} · {pending} pending"
    else:
        yield f"{label}{report.at} {report.line()}"
        if pending != report.pending:
            yield f"{more}now {pending} pending"
    if state.push_due_at:
        yield (
            f"{more}push deferred until {state.push_due_at} (syncDebounceMs); "
            "`chapters sync` delivers it now"
        )
