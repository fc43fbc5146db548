"""Rendering one chapter: verbatim markdown with deterministic frontmatter (§2.4).

This is the archive chokepoint. In order, for every text of the chapter:
1. host-injected context is screened to a countable marker (amendment 2026-09-21);
2. credentials are redacted (§9), in chapter text and artifacts alike;
3. a tool result at or above `toolResultDeferFloorTokens` moves to a content-addressed
   artifact (sha256 of the redacted text) and leaves a stub line naming its path and size.
Then the body is assembled, hashed, and given its frontmatter. No clock is read: every date
comes from event times, so the same turns give the same bytes on any machine.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from dsh_chapters_core.chokepoint import TextChokepoint
from dsh_chapters_core.config import Config
from dsh_chapters_core.events import (
    AssistantMessage,
    CompactionMarker,
    HostInjection,
    PullRequestLink,
    Reasoning,
    ToolCall,
    ToolResult,
    TurnEnd,
    UserMessage,
)
from dsh_chapters_core.fences import fence
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.injections import OMISSION_PATTERN, Screened
from dsh_chapters_core.redact import MARKER_PATTERN, merge_counts
from dsh_chapters_core.signature import Signature, last_deliveries
from dsh_chapters_core.turns import Turn

TEXT_INFO = "text"  # the fences' info string: verbatim text, never highlighted as code
ROLES: tuple[str, ...] = ("assistant", "tool", "user")
_SPACE = re.compile(r"\s+")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_FALLBACK_SLUG = "chapter"


@dataclass(frozen=True, slots=True)
class Artifact:
    """A tool result deferred out of a chapter: its redacted text, named by that text's sha256."""

    sha256: str  # of the redacted text's UTF-8 bytes; the store path is artifacts/<aa>/<sha>.txt
    text: str

    @property
    def path(self) -> str:
        return artifact_path(self.sha256)


@dataclass(frozen=True, slots=True)
class RenderedChapter:
    """One chapter as rendered: the file's exact text, its body and body hash, its frontmatter, the
    artifacts it defers to, and what was redacted or screened out."""

    slug: str
    text: str  # frontmatter + body: the file's exact content
    body: str
    sha256: str  # of the body
    title: str
    summary: str
    topics: tuple[str, ...]
    frontmatter: tuple[tuple[str, object], ...]  # sorted by key; values are JSON values
    artifacts: tuple[Artifact, ...]  # distinct, in order of first appearance
    redactions: tuple[tuple[str, int], ...]  # (family, count), sorted
    omissions: int  # host-injection markers in the body
    seq_range: tuple[int, int]
    messages: tuple[tuple[str, int], ...]  # (role, count) for ROLES, sorted by role
    omitted: tuple[tuple[str, int], ...] = ()  # (injection kind, count), sorted


def artifact_path(sha256: str) -> str:
    """Where an artifact lives, relative to the store (`.dsh-chapters/`)."""
    return f"artifacts/{sha256[:2]}/{sha256}.txt"


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # text read with surrogateescape keeps its original bytes
        return text.encode("utf-8", "surrogateescape")


def sha256_text(text: str) -> str:
    return hashlib.sha256(_utf8(text)).hexdigest()


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _collapse(text: str) -> str:
    """One line of plain words: markers and runs of whitespace removed."""
    text = OMISSION_PATTERN.sub(" ", text)
    return _SPACE.sub(" ", text).strip()


def cap_text(text: str, limit: int) -> str:
    """Deterministically shorten to at most `limit` characters, at a word if one is near."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def slugify(title: str, limit: int) -> str:
    """ascii, lowercase, hyphens, at most `limit` characters, never empty."""
    # Accents fold away (é → e); any other non-ascii character separates words like a space.
    ascii_text = "".join(
        ch if ord(ch) < 128 else ("" if unicodedata.category(ch) == "Mn" else " ")
        for ch in unicodedata.normalize("NFKD", title)
    )
    slug = _NOT_SLUG.sub("-", ascii_text.lower()).strip("-")
    if len(slug) > limit:
        slug = slug[:limit]
        hyphen = slug.rfind("-")
        if hyphen >= limit // 2:
            slug = slug[:hyphen]
        slug = slug.strip("-")
    return slug or _FALLBACK_SLUG


def _one_line_arguments(arguments: str) -> str:
    stripped = arguments.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.dumps(json.loads(stripped), ensure_ascii=False)
        except ValueError:
            pass
    return stripped.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def chapter_topics(signatures: Sequence[Signature], limit: int) -> tuple[str, ...]:
    """Topics at archive time: terms shared by most turns, then best ranked, then by name."""
    turns: dict[str, int] = {}
    ranks: dict[str, int] = {}
    for signature in signatures:
        for rank, term in enumerate(signature.terms):
            turns[term] = turns.get(term, 0) + 1
            ranks[term] = ranks.get(term, 0) + rank
    ordered = sorted(turns, key=lambda term: (-turns[term], ranks[term], term))
    return tuple(ordered[:limit])


@dataclass(slots=True)
class _Chokepoint:
    """Accumulates what the chapter's texts went through: redactions, omissions, artifacts."""

    config: Config
    texts: TextChokepoint
    redactions: tuple[tuple[str, int], ...] = ()
    omitted: tuple[tuple[str, int], ...] = ()

    def screen(self, screened: Screened) -> None:
        kinds = tuple((kind.value, 1) for kind, _ in screened.omissions)
        self.omitted = merge_counts(self.omitted, kinds)

    def redact(self, text: str) -> str:
        result = self.texts.redact(text)
        if result.counts:
            self.redactions = merge_counts(self.redactions, result.counts)
        return result.text


def _block(label: str, text: str) -> str:
    return f"**{label}:**\n\n{fence(text, TEXT_INFO)}"


def render_chapter(
    turns: Sequence[Turn],
    signatures: Sequence[Signature],
    *,
    session_id: str,
    project_key: str,
    harness_id: str,
    config: Config,
    extra_patterns: tuple[str, ...] = (),
    chokepoint: TextChokepoint | None = None,
    continues: str = "",
    session_title: str = "",
    cwd: str = "",
    git_branch: str = "",
) -> RenderedChapter:
    """One chapter of consecutive complete turns, rendered verbatim (§2.4, §9).

    Pass the archive's `chokepoint` to reuse what signing the turns already screened and
    redacted. A turn a finished session never ended (`Turn.ended`) marks its heading and the
    chapter's `ended`, so the TOC shows it; `continues` names the final chapter a resumed
    session goes on from; `prLinks` lists the pull requests the harness linked, in order of
    first appearance. `session_title` (a name the harness gave the session) is the chapter's
    title when set; `cwd` and `gitBranch` record where the session ran, when the harness says.
    """
    if not turns:
        raise ValueError("a chapter holds at least one turn")
    texts = chokepoint if chokepoint is not None else TextChokepoint(extra_patterns)
    point = _Chokepoint(config=config, texts=texts)
    blocks: list[str] = []
    artifacts: dict[str, Artifact] = {}
    counts = dict.fromkeys(ROLES, 0)
    first_user = first_assistant = ""
    everything = [event for turn in turns for event in turn.events]
    names = {e.call_id: e.name for e in everything if isinstance(e, ToolCall)}
    kept = last_deliveries(everything)  # a repeated delivery of one callId keeps the last
    position = -1
    pr_links: dict[str, None] = {}
    for turn in turns:
        heading = f"## Turn · seq {turn.start_seq}–{turn.end_seq}"
        heading = f"{heading} · {turn.time}" if turn.time else heading
        blocks.append(f"{heading} · ended: {turn.ended}" if turn.ended else heading)
        for event in turn.events:
            position += 1
            if isinstance(event, HostInjection):
                screened = texts.screened(event)
                if screened is not None:
                    point.screen(screened)
                    blocks.append(screened.text)
            elif isinstance(event, UserMessage):
                screened = texts.screened(event)
                if screened is None:
                    continue
                point.screen(screened)
                if screened.only_injection:
                    blocks.append(screened.text)
                    continue
                text = point.redact(screened.text)
                counts["user"] += 1
                first_user = first_user or _collapse(text)
                blocks.append(_block("User", text))
            elif isinstance(event, AssistantMessage):
                if not event.text.strip():
                    continue  # an empty text block (a reply that was only tool calls) says nothing
                text = point.redact(event.text)
                counts["assistant"] += 1
                first_assistant = first_assistant or _collapse(text)
                blocks.append(_block("Assistant", text))
            elif isinstance(event, Reasoning):
                blocks.append(_block("Reasoning", point.redact(event.text)))
            elif isinstance(event, ToolCall):
                line = f"→ tool {event.name}({_one_line_arguments(event.arguments)})"
                blocks.append(point.redact(line))
            elif isinstance(event, ToolResult) and position in kept:
                screened = texts.screened(event)
                raw = event.text if screened is None else screened.text
                if screened is not None:
                    point.screen(screened)
                text = point.redact(raw)
                counts["tool"] += 1
                label = f"← result {point.redact(names.get(event.call_id, event.call_id))}"
                label += " (error)" if event.is_error else ""
                if config.estimate_tokens(text) >= config.tool_result_defer_floor_tokens:
                    artifact = Artifact(sha256=sha256_text(text), text=text)
                    artifacts.setdefault(artifact.sha256, artifact)
                    blocks.append(
                        f"{label}: {artifact.path} ({len(text)} chars, {_line_count(text)} lines)"
                    )
                else:
                    blocks.append(f"{label}:\n\n{fence(text, TEXT_INFO)}")
            elif isinstance(event, CompactionMarker):
                blocks.append(f"— {event.kind} at seq {event.seq} —")
            elif isinstance(event, TurnEnd) and event.reason:
                # §4.3: the turn is complete either way; the chapter says it did not finish
                blocks.append(f"— turn ended: {event.reason} —")
            elif isinstance(event, PullRequestLink) and event.url:
                pr_links.setdefault(point.redact(event.url), None)
    body = "\n\n".join(blocks) + "\n"
    # §9, once more on the rendered body: pieces redacted one by one can join into a credential
    # (a tool input rendered as JSON, a label beside its text). Idempotent: markers never match.
    body = point.redact(body)
    body_sha = sha256_text(body)
    start = min(turn.start_seq for turn in turns)
    end = max(turn.end_seq for turn in turns)
    title_source = first_user or first_assistant
    if first_user and first_assistant and len(first_user) < config.title_min_prompt_chars:
        # A menu choice (`c`, `2`) names nothing: the reply it got says what the turn was.
        title_source = f"{first_user} → {first_assistant}"
    title = cap_text(title_source, config.title_max_chars) if title_source else (
        f"Chapter seq {start}–{end}"
    )
    if _collapse(session_title):
        title = cap_text(_collapse(point.redact(session_title)), config.title_max_chars)
    summary = cap_text(title_source, config.summary_max_chars) if title_source else title
    topics = chapter_topics(signatures, config.chapter_topics)
    messages = tuple(sorted(counts.items()))
    omissions = sum(n for _, n in point.omitted)
    provenance = {"by": "deterministic"}
    fields: dict[str, object] = {
        "title": title,
        "summary": summary,
        "kind": "chapter",
        "projectKey": project_key,
        "harnessId": harness_id,
        "sessionId": session_id,
        "seqRange": [start, end],
        "date": turns[-1].time,
        "messages": dict(messages),
        "tokens": config.estimate_tokens(body),
        "topics": list(topics),
        "sha256": body_sha,
        "generated": {"title": provenance, "summary": provenance, "topics": provenance},
    }
    ended = next((turn.ended for turn in reversed(turns) if turn.ended), "")
    if ended:
        fields["ended"] = ended
    if continues:
        fields["continues"] = continues
    if pr_links:
        fields["prLinks"] = list(pr_links)
    if cwd:
        fields["cwd"] = point.redact(cwd)
    if git_branch:
        fields["gitBranch"] = point.redact(git_branch)
    frontmatter = tuple(sorted(fields.items()))
    return RenderedChapter(
        slug=slugify(title, config.slug_max_chars),
        text=dump_frontmatter(fields) + body,
        body=body,
        sha256=body_sha,
        title=title,
        summary=summary,
        topics=topics,
        frontmatter=frontmatter,
        artifacts=tuple(artifacts.values()),
        redactions=point.redactions,
        omissions=omissions,
        seq_range=(start, end),
        messages=messages,
        omitted=point.omitted,
    )


def redaction_markers(text: str) -> int:
    """How many credential markers a rendered text carries."""
    return len(MARKER_PATTERN.findall(text))
