"""The enrichment queue (§6.2): machine-local, idle-batched, never per turn.

The archive path only appends paths here (a small state write under the writer lock it already
uses); it never calls or waits for a model (§1 invariant 1). A drain happens:
- `manual`: `chapters enrich run`, the whole queue, now;
- `after-push`: after an archive's push completed (`enrichmentTrigger` both | afterPush);
- `idle`: once nothing was queued for `enrichmentIdleMs` (`enrichmentTrigger` both | idle).
Automatic drains take at most `enrichmentBatchCap` chapters. `enrichmentEnabled = false` makes
all of it a pure no-op: nothing is queued, nothing is drained.

State lives in `.dsh-chapters/state/` (never published): `enrich.json` (queue, the last outcome
per chapter, the last run) and `enrich-model.json` (the durable `chapters enrich model` route).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.enrich.outcome import ChapterOutcome, EnrichReason
from dsh_chapters_core.ports.store import FileTree

STATE_PATH = "state/enrich.json"
MODEL_STATE_PATH = "state/enrich-model.json"


class DrainCause(enum.StrEnum):
    MANUAL = "manual"
    AFTER_PUSH = "after-push"
    IDLE = "idle"


_TRIGGERS: Mapping[DrainCause, frozenset[str]] = {
    DrainCause.AFTER_PUSH: frozenset({"both", "afterPush"}),
    DrainCause.IDLE: frozenset({"both", "idle"}),
}


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One drain, in numbers (`chapters status` prints the last one)."""

    at: str
    cause: str
    model: str
    enriched: int = 0
    fallback: int = 0
    skipped: int = 0
    refused: int = 0
    deferred: int = 0  # left queued because the server failed mid-batch
    calls: int = 0
    left: int = 0  # still queued after the drain

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "cause": self.cause, "model": self.model,
                "enriched": self.enriched, "fallback": self.fallback, "skipped": self.skipped,
                "refused": self.refused, "deferred": self.deferred, "calls": self.calls,
                "left": self.left}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        return cls(at=str(data.get("at", "")), cause=str(data.get("cause", "")),
                   model=str(data.get("model", "")),
                   **{k: int(data.get(k, 0)) for k in ("enriched", "fallback", "skipped",
                                                      "refused", "deferred", "calls", "left")})

    def line(self) -> str:
        text = (f"{self.at} ({self.cause}, {self.model or 'no model'}): {self.enriched} enriched, "
                f"{self.fallback} fallback, {self.skipped} skipped, {self.refused} refused")
        if self.deferred:
            text += f", {self.deferred} deferred"
        return text


@dataclass(frozen=True, slots=True)
class EnrichState:
    """The machine-local enrichment state (`enrich.json`): the queued chapters, the last outcome per
    chapter and the last run."""

    queued: tuple[str, ...] = ()  # store paths, in order of arrival
    last_enqueued_at: str = ""
    outcomes: tuple[tuple[str, ChapterOutcome], ...] = ()  # the last outcome per path, sorted
    last_run: RunSummary | None = None

    def outcome(self, path: str) -> ChapterOutcome | None:
        return dict(self.outcomes).get(path)

    def with_queued(self, paths: Iterable[str], now: str) -> EnrichState:
        have = set(self.queued)
        fresh = [p for p in dict.fromkeys(paths) if p not in have]
        if not fresh:
            return self
        return replace(self, queued=(*self.queued, *fresh), last_enqueued_at=now)

    def settled(self, outcome: ChapterOutcome) -> EnrichState:
        """Record an outcome; the chapter leaves the queue unless the server failed."""
        outcomes = dict(self.outcomes)
        if outcome.reason is not EnrichReason.CURRENT or outcome.path not in outcomes:
            outcomes[outcome.path] = outcome  # "already current" keeps the outcome that made it
        queued = self.queued if outcome.server_failed else tuple(
            p for p in self.queued if p != outcome.path)
        return replace(self, queued=queued, outcomes=tuple(sorted(outcomes.items())))

    def to_bytes(self) -> bytes:
        data = {
            "version": 1,
            "queued": list(self.queued),
            "lastEnqueuedAt": self.last_enqueued_at,
            "outcomes": {p: o.to_json() for p, o in self.outcomes},
            "lastRun": self.last_run.to_json() if self.last_run else None,
        }
        return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode()


def read_state(tree: FileTree) -> EnrichState:
    """The queue state; absent or unreadable is an empty queue (nothing is lost but labels)."""
    if not tree.exists(STATE_PATH):
        return EnrichState()
    try:
        data = json.loads(tree.read(STATE_PATH).decode("utf-8"))
        outcomes = data.get("outcomes") or {}
        run = data.get("lastRun")
        return EnrichState(
            queued=tuple(str(p) for p in data.get("queued", ())),
            last_enqueued_at=str(data.get("lastEnqueuedAt", "")),
            outcomes=tuple(sorted((str(p), ChapterOutcome.from_json(o))
                                  for p, o in outcomes.items())),
            last_run=RunSummary.from_json(run) if isinstance(run, dict) else None,
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return EnrichState()


def write_state(tree: FileTree, state: EnrichState) -> None:
    data = state.to_bytes()
    if not tree.exists(STATE_PATH) or tree.read(STATE_PATH) != data:
        tree.write(STATE_PATH, data)


# ---------------------------------------------------------------------------------------------
# The route: `chapters enrich model` (durable, machine-local) wins over `enrichmentModel`.


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """The model enrichment calls: its `provider/model` route, its base URL and where it was set."""

    route: str  # `provider/model`, as provenance records it; "" = no model configured
    base_url: str = ""
    origin: str = ""  # "override" | "config" | ""

    @property
    def configured(self) -> bool:
        return bool(self.route)

    @property
    def provider(self) -> str:
        return self.route.split("/", 1)[0] if "/" in self.route else ""


def read_model_override(tree: FileTree) -> dict[str, str]:
    if not tree.exists(MODEL_STATE_PATH):
        return {}
    try:
        data = json.loads(tree.read(MODEL_STATE_PATH).decode("utf-8"))
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def write_model_override(tree: FileTree, route: str, base_url: str) -> None:
    data = {"model": route, "baseUrl": base_url}
    tree.write(MODEL_STATE_PATH, (json.dumps(data, sort_keys=True, indent=2) + "\n").encode())


def effective_route(config: Config, tree: FileTree) -> ModelRoute:
    override = read_model_override(tree)
    if override.get("model"):
        return ModelRoute(override["model"], override.get("baseUrl") or config.enrichment_base_url,
                          "override")
    if config.enrichment_model:
        return ModelRoute(config.enrichment_model, config.enrichment_base_url, "config")
    return ModelRoute("")


# ---------------------------------------------------------------------------------------------
# Decisions (no I/O)


@dataclass(frozen=True, slots=True)
class DrainDecision:
    """Whether a drain of the enrichment queue runs now, how many chapters it may take, and why."""

    run: bool
    limit: int | None = None  # chapters this drain may take (None = the whole queue)
    reason: str = ""
    due_at: str = ""  # idle: when the quiet window ends


def _parse(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def should_queue(config: Config, route: ModelRoute) -> bool:
    """The archive path queues only when enrichment is on and a model is configured."""
    return config.enrichment_enabled and route.configured


def drain_decision(
    cause: DrainCause, *, config: Config, route: ModelRoute, state: EnrichState, now: str
) -> DrainDecision:
    if not config.enrichment_enabled:
        return DrainDecision(False, reason="enrichmentEnabled is false: enrichment is off")
    if not route.configured:
        return DrainDecision(False, reason="no model is configured (enrichmentModel)")
    if not state.queued:
        return DrainDecision(False, reason="the queue is empty")
    if cause is DrainCause.MANUAL:
        # The caller words a drain it was asked for (the CLI: its command), so the code here.
        return DrainDecision(True, None, reason=str(DrainCause.MANUAL))
    if config.enrichment_trigger not in _TRIGGERS[cause]:
        return DrainDecision(False, reason=f"enrichmentTrigger is {config.enrichment_trigger}")
    if cause is DrainCause.AFTER_PUSH:
        return DrainDecision(True, config.enrichment_batch_cap, reason="a push completed")
    due = _parse(state.last_enqueued_at or now) + timedelta(milliseconds=config.enrichment_idle_ms)
    if _parse(now) < due:
        return DrainDecision(False, reason=f"idle until {_iso(due)} (enrichmentIdleMs)",
                             due_at=_iso(due))
    return DrainDecision(True, config.enrichment_batch_cap,
                         reason=f"nothing queued for {config.enrichment_idle_ms} ms")


def launch_after_archive(*, config: Config, route: ModelRoute, pushed: bool) -> DrainCause | None:
    """Which background drain an archive starts (it never drains itself): after a push the
    push-triggered one; otherwise the idle one, which waits out `enrichmentIdleMs` first."""
    if not should_queue(config, route):
        return None
    if pushed and config.enrichment_trigger in _TRIGGERS[DrainCause.AFTER_PUSH]:
        return DrainCause.AFTER_PUSH
    if config.enrichment_trigger in _TRIGGERS[DrainCause.IDLE]:
        return DrainCause.IDLE
    return None
