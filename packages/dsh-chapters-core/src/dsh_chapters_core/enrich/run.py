"""The enrich use cases: queue after an archive, drain the queue, report per chapter (§6).

The writer lock is held only for the short state and file writes, never across a model call:
an archive or a sync never waits on a model (§1 invariant 1). The one chapter write goes
through `ChapterStore.rewrite_frontmatter`, which re-checks the body hash on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.enrich.chapter import FIELD_CLASSES, parse_chapter_file, provenance_json
from dsh_chapters_core.enrich.ladder import (
    Candidate,
    ask_model,
    enriched_frontmatter,
    plan_chapter,
    vocabulary_key,
)
from dsh_chapters_core.enrich.outcome import ChapterOutcome, EnrichAction, EnrichReason
from dsh_chapters_core.enrich.queue import (
    DrainCause,
    DrainDecision,
    EnrichState,
    ModelRoute,
    RunSummary,
    drain_decision,
    effective_route,
    read_state,
    should_queue,
    write_state,
)
from dsh_chapters_core.errors import BodyChangedError, ChaptersError
from dsh_chapters_core.ports.clock import Clock
from dsh_chapters_core.ports.model import ModelDoor
from dsh_chapters_core.ports.store import ChapterStore, FileTree, WriterLock
from dsh_chapters_core.search.aliases import AliasMap
from dsh_chapters_core.search.index import read_curation

Progress = Callable[[int, int, ChapterOutcome], None]


def _lock_s(config: Config) -> float:
    return config.lock_timeout_ms / 1000


def session_owners(store: ChapterStore) -> dict[str, str]:
    """Session id -> the harnessId its record names (copy-in records foreign sessions)."""
    return {sid: str(meta.get("harnessId", "")) for sid, meta in store.session_meta().items()}


def _owner_of(path: str, owners: Mapping[str, str]) -> str:
    return owners.get(path.split("/", 1)[0], "")


def enqueue_archived(
    *, store_tree: FileTree, lock: WriterLock, clock: Clock, config: Config,
    paths: Iterable[str],
) -> int:
    """The archive path's only enrichment step: append the new chapters to the queue (no model,
    no network). Returns how many were queued; 0 when enrichment is off or has no model."""
    wanted = list(paths)
    if not wanted or not should_queue(config, effective_route(config, store_tree)):
        return 0
    with lock.hold(_lock_s(config)):
        state = read_state(store_tree)
        after = state.with_queued(wanted, clock.now())
        write_state(store_tree, after)
    return len(after.queued) - len(state.queued)


def enqueue_own_chapters(
    *, store: ChapterStore, store_tree: FileTree, lock: WriterLock, clock: Clock, config: Config,
    harness_id: str,
) -> int:
    """`chapters enrich run --all`: queue every chapter this machine authored (re-annotation
    with a newer model or vocabulary; current chapters are skipped without a model call)."""
    if not should_queue(config, effective_route(config, store_tree)):
        return 0
    owners = session_owners(store)
    paths = sorted(
        d.path for d in store.documents()
        if d.kind is DocumentKind.CHAPTER and d.harness_id in ("", harness_id)
        and _owner_of(d.path, owners) in ("", harness_id)
    )
    with lock.hold(_lock_s(config)):
        state = read_state(store_tree)
        after = state.with_queued(paths, clock.now())
        write_state(store_tree, after)
    return len(after.queued) - len(state.queued)


@dataclass(frozen=True, slots=True)
class DrainReport:
    """What one drain did: its decision, the model route, each chapter's outcome and the summary."""

    decision: DrainDecision
    route: ModelRoute
    outcomes: tuple[ChapterOutcome, ...] = ()
    summary: RunSummary | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ran": self.decision.run,
            "reason": self.decision.reason,
            "dueAt": self.decision.due_at,
            "model": self.route.route,
            "outcomes": [o.to_json() for o in self.outcomes],
            "summary": self.summary.to_json() if self.summary else None,
        }


def _read(store: ChapterStore, path: str) -> str | None:
    try:
        return store.read_text(path)
    except ChaptersError:
        return None


@dataclass(frozen=True, slots=True)
class _Context:
    """What enriching each chapter of one drain needs: the store, lock, clock, config, model route,
    vocabulary and the owners of the sessions."""

    store: ChapterStore
    lock: WriterLock
    clock: Clock
    config: Config
    route: str
    vocab_key: str
    aliases: AliasMap
    harness_id: str
    owners: Mapping[str, str]


def _plan(ctx: _Context, path: str, text: str | None) -> Candidate | ChapterOutcome:
    return plan_chapter(path, text, route=ctx.route, vocab_key=ctx.vocab_key,
                        harness_id=ctx.harness_id, session_owner=_owner_of(path, ctx.owners))


def enrich_chapter(ctx: _Context, door: ModelDoor, path: str) -> ChapterOutcome:
    """The ladder for one queued chapter, then its one guarded write."""
    planned = _plan(ctx, path, _read(ctx.store, path))
    if isinstance(planned, ChapterOutcome):
        return planned
    chapter = planned.chapter
    result = ask_model(chapter, door, config=ctx.config, aliases=ctx.aliases)
    at = ctx.clock.now()
    if result.proposal is None:
        failure = result.failure or EnrichReason.INVALID_TWICE
        return ChapterOutcome(path=path, action=EnrichAction.FALLBACK, reason=failure,
                              model=ctx.route, at=at, calls=result.calls, detail=result.detail)
    frontmatter = enriched_frontmatter(chapter, result.proposal, route=ctx.route,
                                       vocab_key=ctx.vocab_key, at=at)
    with ctx.lock.hold(_lock_s(ctx.config)):
        now_text = _read(ctx.store, path)
        if now_text != planned.text:
            again = _plan(ctx, path, now_text)
            if isinstance(again, ChapterOutcome):
                return again
            return ChapterOutcome(path=path, action=EnrichAction.REFUSED,
                                  reason=EnrichReason.CHANGED_DURING_CALL, model=ctx.route,
                                  at=at, calls=result.calls,
                                  detail="the file changed while the model answered")
        try:
            ctx.store.rewrite_frontmatter(path, frontmatter, chapter.body_sha256)
        except BodyChangedError as exc:
            return ChapterOutcome(path=path, action=EnrichAction.REFUSED,
                                  reason=EnrichReason.BODY_CHANGED, model=ctx.route, at=at,
                                  calls=result.calls, detail=exc.message)
    return ChapterOutcome(path=path, action=EnrichAction.ENRICHED, reason=planned.reason,
                          model=ctx.route, at=at, calls=result.calls)


def drain(
    *, store: ChapterStore, store_tree: FileTree, lock: WriterLock, clock: Clock, config: Config,
    open_door: Callable[[ModelRoute], ModelDoor], harness_id: str, cause: DrainCause,
    progress: Progress | None = None,
) -> DrainReport:
    """Drain the queue as the trigger allows: at most one batch for an automatic cause, all
    of it for `manual`. A server failure stops the batch; the rest stays queued (deferred)."""
    route = effective_route(config, store_tree)
    with lock.hold(_lock_s(config)):
        state = read_state(store_tree)
    decision = drain_decision(cause, config=config, route=route, state=state, now=clock.now())
    if not decision.run:
        return DrainReport(decision, route)
    batch = state.queued if decision.limit is None else state.queued[: decision.limit]
    aliases = read_curation(store_tree).aliases
    ctx = _Context(store=store, lock=lock, clock=clock, config=config, route=route.route,
                   vocab_key=vocabulary_key(aliases), aliases=aliases, harness_id=harness_id,
                   owners=session_owners(store))
    outcomes: list[ChapterOutcome] = []
    door = open_door(route)
    try:
        for index, path in enumerate(batch, start=1):
            outcome = enrich_chapter(ctx, door, path)
            outcomes.append(outcome)
            with lock.hold(_lock_s(config)):
                write_state(store_tree, read_state(store_tree).settled(outcome))
            if progress is not None:
                progress(index, len(batch), outcome)
            if outcome.server_failed:
                break  # §6.2: a down or slow single-slot server is not asked again this drain
    finally:
        door.close()
    deferred = len(batch) - len(outcomes)
    with lock.hold(_lock_s(config)):
        state = read_state(store_tree)
        count = {a: sum(1 for o in outcomes if o.action is a) for a in EnrichAction}
        summary = RunSummary(
            at=clock.now(), cause=str(cause), model=route.route,
            enriched=count[EnrichAction.ENRICHED], fallback=count[EnrichAction.FALLBACK],
            skipped=count[EnrichAction.SKIPPED], refused=count[EnrichAction.REFUSED],
            deferred=deferred, calls=sum(o.calls for o in outcomes), left=len(state.queued),
        )
        write_state(store_tree, EnrichState(queued=state.queued,
                                            last_enqueued_at=state.last_enqueued_at,
                                            outcomes=state.outcomes, last_run=summary))
    return DrainReport(decision, route, tuple(outcomes), summary)


# ---------------------------------------------------------------------------------------------
# `chapters enrich report`


@dataclass(frozen=True, slots=True)
class ReportRow:
    """One chapter's row in `chapters enrich report`: its status, whether it is queued, its last
    outcome and the provenance of its fields."""

    path: str
    harness_id: str
    title: str
    status: str  # the last action (enriched|fallback|skipped|refused), else queued|not-enriched
    queued: bool
    outcome: ChapterOutcome | None
    provenance: Mapping[str, list[dict[str, Any]]]  # per field class, newest first

    @property
    def values_by(self) -> str:
        """Who produced the current values: `model <route>` or `deterministic`."""
        heads = [links[0] for links in self.provenance.values() if links]
        models = sorted({str(h.get("model", "")) for h in heads if h.get("by") == "model"})
        return f"model {', '.join(models)}" if models else "deterministic"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "harnessId": self.harness_id, "title": self.title,
                "status": self.status, "queued": self.queued, "valuesBy": self.values_by,
                "lastOutcome": self.outcome.to_json() if self.outcome else None,
                "generated": dict(self.provenance)}


def enrichment_report(
    *, store: ChapterStore, store_tree: FileTree, harness_id: str
) -> tuple[ReportRow, ...]:
    """Every chapter of the store: its last enrichment outcome and its provenance chains."""
    state = read_state(store_tree)
    queued = set(state.queued)
    owners = session_owners(store)
    rows: list[ReportRow] = []
    for doc in store.documents():
        if doc.kind is not DocumentKind.CHAPTER:
            continue
        text = _read(store, doc.path)
        chapter = parse_chapter_file(doc.path, text) if text is not None else None
        provenance = (provenance_json(chapter) if chapter is not None
                      else {fc: [] for fc in FIELD_CLASSES})
        outcome = state.outcome(doc.path)
        ours = doc.harness_id in ("", harness_id) and _owner_of(doc.path, owners) in (
            "", harness_id)
        if outcome is not None:
            status = str(outcome.action)
        elif doc.path in queued:
            status = "queued"
        elif not ours:
            status = "not-ours"
        else:
            status = "not-enriched"
        rows.append(ReportRow(path=doc.path, harness_id=doc.harness_id, title=doc.title,
                              status=status, queued=doc.path in queued, outcome=outcome,
                              provenance=provenance))
    return tuple(sorted(rows, key=lambda r: r.path))
