"""Model enrichment (§6): async, provenance-tagged, re-runnable, never on the critical path."""

from dsh_chapters_core.enrich.chapter import ChapterFile, parse_chapter_file, provenance_chain
from dsh_chapters_core.enrich.ladder import (
    ChapterOutcome,
    EnrichAction,
    EnrichReason,
    ask_model,
    enriched_frontmatter,
    plan_chapter,
    stale_reason,
    vocabulary_key,
)
from dsh_chapters_core.enrich.proposal import Invalid, Proposal, validate_answer
from dsh_chapters_core.enrich.queue import (
    DrainCause,
    DrainDecision,
    EnrichState,
    ModelRoute,
    RunSummary,
    drain_decision,
    effective_route,
    launch_after_archive,
    read_state,
    should_queue,
)
from dsh_chapters_core.enrich.run import (
    DrainReport,
    ReportRow,
    drain,
    enqueue_archived,
    enqueue_own_chapters,
    enrichment_report,
)
from dsh_chapters_core.enrich.slice import ChapterSlice, cheap_slice, first_call, retry_call

__all__ = [
    "ChapterFile",
    "ChapterOutcome",
    "ChapterSlice",
    "DrainCause",
    "DrainDecision",
    "DrainReport",
    "EnrichAction",
    "EnrichReason",
    "EnrichState",
    "Invalid",
    "ModelRoute",
    "Proposal",
    "ReportRow",
    "RunSummary",
    "ask_model",
    "cheap_slice",
    "drain",
    "drain_decision",
    "effective_route",
    "enqueue_archived",
    "enqueue_own_chapters",
    "enriched_frontmatter",
    "enrichment_report",
    "first_call",
    "launch_after_archive",
    "parse_chapter_file",
    "plan_chapter",
    "provenance_chain",
    "read_state",
    "retry_call",
    "should_queue",
    "stale_reason",
    "validate_answer",
    "vocabulary_key",
]
