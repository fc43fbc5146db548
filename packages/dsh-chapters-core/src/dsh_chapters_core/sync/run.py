"""The sync loop (§5): open → pull → copy-in → copy-out → commit → push, under the lock.

The store is the truth and the mirror is transport (§3.1), so every repair is a rebuild of
the mirror from the store (§5.2, r35): never a merge, never a force push. Any transport
failure degrades to local-only (§5.3): the archive is untouched, pending files are counted,
and the report says so with the failure code and the numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.errors import (
    ChaptersError,
    FailureCode,
    NextStep,
    TransportError,
    UsageError,
)
from dsh_chapters_core.pool_layout import PROJECT_FILE, path_problem, project_manifest
from dsh_chapters_core.ports.clock import Clock
from dsh_chapters_core.ports.store import FileTree, WriterLock
from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderFactory
from dsh_chapters_core.projectkey import ProjectIdentity, project_slug
from dsh_chapters_core.remote import parse_remote
from dsh_chapters_core.sync.copy import (
    CopyLimits,
    DocumentCheck,
    copy_in,
    outgoing,
    pending_paths,
)
from dsh_chapters_core.sync.state import (
    ProjectIdentityView,
    SyncMode,
    SyncReport,
    SyncState,
    _failure_detail,
    read_quarantine,
    read_sync_state,
    write_quarantine,
    write_sync_state,
)

DERIVED_POOL_PREFIXES = ("index/", "topics/")  # §10.2: the Layer-2 index sync derives, never merges


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
            step=NextStep.LINK_POOL,
        )
    # Resolve the scheme once, from what the providers declare (STYLE.md, after fsspec).
    scheme = parse_remote(remote).scheme
    matching = [f for f in factories if scheme in f.schemes and f.matches(remote)]
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
            step=NextStep.USE_PROVIDER_SCHEME,
            data={"schemes": ", ".join(s for f in factories for s in f.schemes)},
        )
    if len(matching) > 1:
        names = ", ".join(sorted(f.name for f in matching))
        raise UsageError(
            f"{len(matching)} providers claim the remote {remote!r}: {names}",
            hint="set knowledgeProvider in .dsh-chapters/config.toml to choose one",
        )
    return matching[0]



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
    check: DocumentCheck | None = None

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
            unsafe_paths=state.unsafe_paths,
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
        if result.unsafe_paths is not None:
            self.counts["unsafe_paths"] = result.unsafe_paths
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
        self.counts["unsafe_paths"] = state.unsafe_paths
        self.committed_paths.clear()  # the rebuild dropped unpushed commits; the store re-publishes
        self.steps.append("rebuilt")
        self._note_arriving(state.arriving)

    def _copy_in(self) -> None:
        self.step = "copy-in"
        result = copy_in(
            self.store_tree, self.mirror_tree, self.key, self.harness_id,
            check=self.check, limits=CopyLimits.of(self.config),
            commit=str(self.counts.get("head", "")),
            unsafe=tuple(self.counts.get("unsafe_paths", ())),
        )
        new, changed = result.new, result.changed
        # A file stays quarantined under the pool head that first brought it (the commit a
        # person looks for), not under whichever head a later sync saw.
        first_seen = {r.get("path", ""): r.get("commit", "") for r in read_quarantine(
            self.store_tree)}
        rows = [q.to_json() for q in result.quarantined]
        for row in rows:
            row["commit"] = first_seen.get(row["path"]) or row["commit"]
        write_quarantine(self.store_tree, rows)
        self.counts["quarantined"] = len(result.quarantined)
        self.counts["copied_in_new"] = self.counts.get("copied_in_new", 0) + new
        self.counts["copied_in_changed"] = self.counts.get("copied_in_changed", 0) + changed
        if new or changed:
            self.steps.append(f"copied in {new} new" + (f", {changed} changed" if changed else ""))
        if result.quarantined:
            self.steps.append(f"quarantined {len(result.quarantined)} pool file(s)")

    def _stage(self) -> bool:
        """Copy-out: stage our new and changed files (and `project.yml` once). True if any."""
        self.step = "stage"
        out = outgoing(self.store_tree, self.mirror_tree, self.key, self.harness_id)
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
        if out.held_back:
            text += f", {len(out.held_back)} damaged held back (see the doctor)"
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
            if path.startswith(DERIVED_POOL_PREFIXES) and not path_problem(path)
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
            quarantined=int(c.get("quarantined", 0)),
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
    check: DocumentCheck | None = None,
) -> SyncReport:
    """One sync under the writer lock (§5.2), shared with the archive so a pull never lands
    mid-write and a push never ships a half-written store. Transport failures never raise:
    they come back as a local-only report (§5.3). The report is persisted for `status`.

    `derive` returns the derived index (pool paths under `index/` and `topics/`, anything else
    is dropped); it is called after copy-in and our staging, again after every rebuild, and its
    bytes land in the same commit (§10.2). `check` names why a chapter or rule cannot be read
    (the edge's frontmatter parser): copy-in quarantines such a pool file instead of copying."""
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
            check=check,
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
    """Whether the push after an archive runs now or waits out the debounce, until when, and why."""

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


