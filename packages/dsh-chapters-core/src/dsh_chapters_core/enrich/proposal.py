"""Validating a model's answer (§6.1) and canonicalizing its topics (§6.3).

The answer must be `{"title": one sentence, "summary": short, "topics": up to N}`. Thinking
models may wrap it (`<think>…</think>`, a ```json fence, a sentence before it): the object is
taken from between the first `{` and the last `}`. Anything else is invalid, with a reason the
retry tells the model.

Topics are proposals: each label goes through the canonicalizer (the alias table derived from
`topic-alias` facts). A label the vocabulary does not know still enters the chapter, listed in
`unvetted` (§6.3: "unknown labels pass as unvetted").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from dsh_chapters_core.chokepoint import redact_for_store
from dsh_chapters_core.config import Config
from dsh_chapters_core.render import cap_text
from dsh_chapters_core.search.aliases import AliasMap

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_SPACE = re.compile(r"\s+")
# A sentence ends at . ! or ? followed by space and a capital: `Fix retry. Add tests.` is two.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True, slots=True)
class Proposal:
    """A valid answer, already shaped for the frontmatter."""

    title: str
    summary: str
    topics: tuple[str, ...]  # canonical labels, distinct, in the model's order
    unvetted: tuple[str, ...]  # those the vocabulary does not know


@dataclass(frozen=True, slots=True)
class Invalid:
    """A model answer that failed validation, with the problem the retry tells the model."""

    problem: str  # said back to the model on the retry, and kept in the report


def _json_object(answer: str) -> object:
    text = _THINK.sub("", answer)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return Invalid("there is no JSON object in it")
    try:
        return json.loads(text[start : end + 1])
    except ValueError as exc:
        return Invalid(f"it is not valid JSON ({exc})")


def _text_field(data: dict[str, object], key: str, config: Config) -> str | Invalid:
    value = data.get(key)
    if not isinstance(value, str):
        kind = "missing" if value is None else f"a {type(value).__name__}, not a string"
        return Invalid(f'"{key}" is {kind}')
    # §9: what a model writes into a chapter's frontmatter passes the chokepoint too, before
    # it is capped (a cut could split a key the rules would still have known whole).
    value = redact_for_store(value, config.redaction_patterns)
    collapsed = _SPACE.sub(" ", value).strip()
    if not collapsed:
        return Invalid(f'"{key}" is empty')
    return collapsed


def vocabulary_labels(aliases: AliasMap) -> frozenset[str]:
    """The labels the canonical vocabulary knows: every alias and every canonical target."""
    return frozenset(label for pair in aliases.pairs for label in pair)


def validate_answer(answer: str, *, config: Config, aliases: AliasMap) -> Proposal | Invalid:
    """The answer as a Proposal, or why it is not one."""
    data = _json_object(answer)
    if isinstance(data, Invalid):
        return data
    if not isinstance(data, dict):
        return Invalid(f"the JSON is a {type(data).__name__}, not an object")
    title = _text_field(data, "title", config)
    if isinstance(title, Invalid):
        return title
    sentences = len(_SENTENCE_BREAK.split(title))
    if sentences > 1:
        return Invalid(f'"title" is {sentences} sentences, not one')
    summary = _text_field(data, "summary", config)
    if isinstance(summary, Invalid):
        return summary
    raw_topics = data.get("topics")
    if not isinstance(raw_topics, list) or not all(isinstance(t, str) for t in raw_topics):
        return Invalid('"topics" is not a list of strings')
    if len(raw_topics) > config.enrichment_max_topics:
        return Invalid(f'"topics" has {len(raw_topics)} labels, at most '
                       f"{config.enrichment_max_topics}")
    # A topic label is redacted before it is canonicalized: the canonical slug's lower case
    # would hide a key from the rules.
    topics = tuple(dict.fromkeys(
        c for c in (aliases.canonical(redact_for_store(t, config.redaction_patterns))
                    for t in raw_topics) if c))
    if not topics:
        return Invalid('"topics" has no label with a word in it')
    known = vocabulary_labels(aliases)
    return Proposal(
        title=cap_text(title, config.title_max_chars),
        summary=cap_text(summary, config.summary_max_chars),
        topics=topics,
        unvetted=tuple(t for t in topics if t not in known),
    )
