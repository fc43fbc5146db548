"""The enrichment ladder for one chapter (§6.1): slice → call → validate → retry once → keep.

1. Only this machine's chapters, in the form the core wrote, whose body still hashes to the
   frontmatter's `sha256`, and that are not already current for this model and vocabulary.
2. One structured call on the cheap slice; an invalid answer gets exactly one retry that says
   what was wrong. A second invalid answer, a timeout or a server that is down keeps the
   deterministic values: a chapter is never blanked and never waits on a model.
3. The new frontmatter overwrites only the model-owned fields and prepends one provenance link
   per field class. The caller writes it through the store's body-hash-guarded rewrite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dsh_chapters_core.config import Config
from dsh_chapters_core.enrich.chapter import (
    BY_DETERMINISTIC,
    BY_MODEL,
    FIELD_CLASSES,
    ChapterFile,
    parse_chapter_file,
    prepend_links,
)
from dsh_chapters_core.enrich.outcome import (
    ChapterOutcome,
    EnrichAction,
    EnrichReason,
)
from dsh_chapters_core.enrich.proposal import Invalid, Proposal, validate_answer
from dsh_chapters_core.enrich.slice import cheap_slice, first_call, retry_call
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.ports.model import ModelDoor, ModelError, ModelFailure
from dsh_chapters_core.search.aliases import AliasMap

VOCABULARY_KEY_CHARS = 12  # a digest prefix naming the alias table in provenance, not a tunable
_FAILURE_REASON: Mapping[ModelFailure, EnrichReason] = {
    ModelFailure.DOWN: EnrichReason.DOWN,
    ModelFailure.TIMEOUT: EnrichReason.TIMEOUT,
    ModelFailure.AUTH: EnrichReason.AUTH,
    ModelFailure.HTTP: EnrichReason.HTTP,
}


def vocabulary_key(aliases: AliasMap) -> str:
    """Names the alias table a topics link was canonicalized under (§6.2: re-runnable)."""
    return aliases.key[:VOCABULARY_KEY_CHARS]


def is_ours(chapter: ChapterFile, harness_id: str, session_owner: str) -> bool:
    """§3.3: a machine enriches only the chapters it authored. `session_owner` is the harnessId
    of the session's record ("" = no record: written here, as sync counts it)."""
    return session_owner in ("", harness_id) and chapter.harness_id in ("", harness_id)


def stale_reason(chapter: ChapterFile, route: str, vocab_key: str) -> EnrichReason | None:
    """Why the chapter needs this model's pass, or None when it is current (idempotence)."""
    heads = {fc: chapter.head_link(fc) for fc in FIELD_CLASSES}
    by_model = [h for h in heads.values() if h.get("by") == BY_MODEL]
    if not by_model:
        return EnrichReason.NEW
    if len(by_model) < len(heads) or any(h.get("model") != route for h in by_model):
        return EnrichReason.NEWER_MODEL
    if heads["topics"].get("vocabulary") != vocab_key:
        return EnrichReason.NEWER_VOCABULARY
    return None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A chapter the ladder may call the model for."""

    chapter: ChapterFile
    text: str  # the file as read: the write re-checks it
    reason: EnrichReason


def plan_chapter(
    path: str, text: str | None, *, route: str, vocab_key: str, harness_id: str,
    session_owner: str,
) -> Candidate | ChapterOutcome:
    """Every check that needs no model, in order; the outcome when one says no."""
    def no(action: EnrichAction, reason: EnrichReason, detail: str = "") -> ChapterOutcome:
        return ChapterOutcome(path=path, action=action, reason=reason, model=route,
                              detail=detail)

    if text is None:
        return no(EnrichAction.SKIPPED, EnrichReason.MISSING, "the file is not in the store")
    chapter = parse_chapter_file(path, text)
    if chapter is None:
        return no(EnrichAction.REFUSED, EnrichReason.UNREADABLE,
                  "the frontmatter is not in the form the archive writes")
    if chapter.kind != "chapter":
        return no(EnrichAction.SKIPPED, EnrichReason.NOT_A_CHAPTER, f"kind {chapter.kind!r}")
    if not is_ours(chapter, harness_id, session_owner):
        owner = chapter.harness_id or session_owner
        return no(EnrichAction.SKIPPED, EnrichReason.NOT_OURS, f"written by {owner}")
    if not chapter.claimed_sha256:
        return no(EnrichAction.REFUSED, EnrichReason.NO_BODY_HASH,
                  "the frontmatter has no sha256 to guard the body with")
    if chapter.claimed_sha256 != chapter.body_sha256:
        return no(EnrichAction.REFUSED, EnrichReason.BODY_CHANGED,
                  f"the body hashes to {chapter.body_sha256[:12]}…, the frontmatter says "
                  f"{chapter.claimed_sha256[:12]}…")
    reason = stale_reason(chapter, route, vocab_key)
    if reason is None:
        return no(EnrichAction.SKIPPED, EnrichReason.CURRENT)
    return Candidate(chapter=chapter, text=text, reason=reason)


@dataclass(frozen=True, slots=True)
class LadderResult:
    """How the ladder ended for one chapter: the valid proposal or None, the model calls it made,
    and why no proposal came back."""

    proposal: Proposal | None
    calls: int
    failure: EnrichReason | None = None
    detail: str = ""


def ask_model(
    chapter: ChapterFile, door: ModelDoor, *, config: Config, aliases: AliasMap
) -> LadderResult:
    """One call, one retry on an invalid answer; a server failure ends the ladder at once."""
    call = first_call(cheap_slice(chapter.body, config), config)
    calls = 0
    problem = ""
    for attempt in range(2):
        calls += 1
        checked: Proposal | Invalid
        try:
            answer = door.complete(call)
        except ModelError as exc:
            reason = _FAILURE_REASON.get(exc.code)
            if reason is not None:
                return LadderResult(None, calls, reason, exc.message)
            answer, checked = "", Invalid(exc.message)  # MALFORMED: like an invalid answer
        else:
            checked = validate_answer(answer, config=config, aliases=aliases)
        if isinstance(checked, Proposal):
            return LadderResult(checked, calls)
        problem = checked.problem
        if attempt == 0:
            call = retry_call(call, answer, problem, config)
    return LadderResult(None, calls, EnrichReason.INVALID_TWICE, problem)


def enriched_frontmatter(
    chapter: ChapterFile, proposal: Proposal, *, route: str, vocab_key: str, at: str
) -> str:
    """The new frontmatter block: model-owned fields replaced, provenance prepended (§2.4)."""
    link = {"at": at, "by": BY_MODEL, "model": route}
    fields = dict(chapter.fields)
    fields["title"] = proposal.title
    fields["summary"] = proposal.summary
    fields["topics"] = list(proposal.topics)
    fields["unvetted"] = list(proposal.unvetted)
    fields["generated"] = prepend_links(
        chapter.fields.get("generated"),
        {"title": link, "summary": link, "topics": {**link, "vocabulary": vocab_key}},
    )
    return dump_frontmatter(fields)


def deterministic_values(chapter: ChapterFile) -> bool:
    """True when every field class's newest link is the deterministic pass."""
    return all((chapter.head_link(fc).get("by") or BY_DETERMINISTIC) == BY_DETERMINISTIC
               for fc in FIELD_CLASSES)
