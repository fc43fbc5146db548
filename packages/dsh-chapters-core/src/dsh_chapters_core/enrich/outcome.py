"""What enrichment did to one chapter, and why (§6.2): the queue's record of each attempt.

Apart from the ladder that decides it, so that reading the queue (`chapters status`, the check
after every push) loads neither the model door nor the redaction engine."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class EnrichAction(enum.StrEnum):
    ENRICHED = "enriched"
    FALLBACK = "fallback"  # the model gave nothing usable: the deterministic values stay
    SKIPPED = "skipped"  # nothing to do (current, another machine's, not a chapter, gone)
    REFUSED = "refused"  # the guard said no: the body changed, or the file is not ours to parse


class EnrichReason(enum.StrEnum):
    # enriched
    NEW = "new"
    NEWER_MODEL = "newer-model"
    NEWER_VOCABULARY = "newer-vocabulary"
    # fallback
    INVALID_TWICE = "invalid-twice"
    DOWN = "down"
    TIMEOUT = "timeout"
    AUTH = "auth"
    HTTP = "http"
    # skipped
    CURRENT = "current"
    NOT_OURS = "not-ours"
    NOT_A_CHAPTER = "not-a-chapter"
    MISSING = "missing"
    # refused
    BODY_CHANGED = "body-changed"
    NO_BODY_HASH = "no-body-hash"
    UNREADABLE = "frontmatter-unreadable"
    CHANGED_DURING_CALL = "changed-during-call"


# Failures of the server, not of the chapter: the chapter stays queued and the batch stops,
# so a down or slow single-slot server is asked once per drain, never once per chapter.
SERVER_FAILURES = frozenset({EnrichReason.DOWN, EnrichReason.TIMEOUT, EnrichReason.AUTH,
                             EnrichReason.HTTP})


@dataclass(frozen=True, slots=True)
class ChapterOutcome:
    """What enrichment did to one chapter, and why (the report's row)."""

    path: str
    action: EnrichAction
    reason: EnrichReason
    model: str = ""
    at: str = ""
    calls: int = 0  # model calls this attempt made (0, 1 or 2)
    detail: str = ""  # the invalid answer's problem, or the failure's message

    @property
    def server_failed(self) -> bool:
        return self.reason in SERVER_FAILURES

    def to_json(self) -> dict[str, Any]:
        # §9: a model's or a server's message can quote what it was sent. The redaction
        # engine is imported here, by the one caller that writes an outcome (a drain): reading
        # the queue (`chapters status`, every sync) never compiles it.
        from dsh_chapters_core.chokepoint import redact_for_store

        return {"path": self.path, "action": str(self.action), "reason": str(self.reason),
                "model": self.model, "at": self.at, "calls": self.calls,
                "detail": redact_for_store(self.detail)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChapterOutcome:
        return cls(path=str(data["path"]), action=EnrichAction(str(data["action"])),
                   reason=EnrichReason(str(data["reason"])), model=str(data.get("model", "")),
                   at=str(data.get("at", "")), calls=int(data.get("calls", 0)),
                   detail=str(data.get("detail", "")))
