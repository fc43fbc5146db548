"""The cheap slice (§6.1) and the one structured call built from it.

Input per chapter: the user request(s), the first and the last assistant message, each part
capped at `enrichmentSliceChars`, plus the first `enrichmentBodyTokens` of the body for
grounding. The slice is read from the rendered body, which is already redacted and screened
at the archive chokepoint (§9), so no credential ever reaches a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.model import ChatMessage, ModelCall
from dsh_chapters_core.render import cap_text

_LABEL = re.compile(r"^\*\*(?P<label>User|Assistant):\*\*$")
_OPENING = re.compile(r"^(?P<ticks>`{3,})[^`]*$")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class ChapterSlice:
    """The cheap slice of one chapter a model sees: the user requests, the first and last assistant
    messages, and the start of the body."""

    user_requests: str
    first_assistant: str
    last_assistant: str
    body_head: str

    def text(self) -> str:
        parts = [("User request(s)", self.user_requests),
                 ("First assistant message", self.first_assistant),
                 ("Last assistant message", self.last_assistant),
                 ("Start of the chapter", self.body_head)]
        return "\n\n".join(f"{label}:\n{value}" for label, value in parts if value)


def labelled_blocks(body: str) -> list[tuple[str, str]]:
    """(`User` | `Assistant`, text) for every message block of a rendered body, in order."""
    lines = body.split("\n")
    out: list[tuple[str, str]] = []
    index = 0
    while index < len(lines):
        label = _LABEL.match(lines[index])
        if label is None:
            index += 1
            continue
        start = index + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        opening = _OPENING.match(lines[start]) if start < len(lines) else None
        if opening is None:
            index += 1
            continue
        closing = re.compile(rf"^`{{{len(opening.group('ticks'))},}}[ \t]*$")
        end = start + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        out.append((label.group("label"), "\n".join(lines[start + 1 : end])))
        index = end + 1
    return out


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def cheap_slice(body: str, config: Config) -> ChapterSlice:
    """The slice of one chapter body; every part is bounded, whatever the chapter's size."""
    cap = config.enrichment_slice_chars
    blocks = labelled_blocks(body)
    users = [_one_line(t) for label, t in blocks if label == "User" and t.strip()]
    assistants = [_one_line(t) for label, t in blocks if label == "Assistant" and t.strip()]
    first = cap_text(assistants[0], cap) if assistants else ""
    last = cap_text(assistants[-1], cap) if len(assistants) > 1 else ""
    head_chars = config.enrichment_body_tokens * config.chars_per_token
    head = cap_text(body.strip(), head_chars) if head_chars else ""
    return ChapterSlice(
        user_requests=cap_text("\n".join(users), cap) if users else "",
        first_assistant=first,
        last_assistant=last,
        body_head=head,
    )


def _schema(config: Config) -> str:
    return (
        '{"title": "<one sentence, at most ' + str(config.title_max_chars) + ' characters>", '
        '"summary": "<at most ' + str(config.summary_max_chars) + ' characters>", '
        '"topics": ["<up to ' + str(config.enrichment_max_topics)
        + ' short lowercase topic labels>"]}'
    )


def system_prompt(config: Config) -> str:
    return (
        "You label one archived chapter of a conversation between a user and a coding agent. "
        "Answer with exactly one JSON object and nothing else: " + _schema(config) + ". "
        "The title says what the chapter did; the summary says what was done and found; "
        "topics name the subjects someone would search for later."
    )


def first_call(piece: ChapterSlice, config: Config) -> ModelCall:
    """The one structured call (§6.1): low max_tokens, a hard deadline."""
    return ModelCall(
        messages=(ChatMessage("system", system_prompt(config)),
                  ChatMessage("user", piece.text())),
        max_tokens=config.enrichment_max_tokens,
        timeout_s=config.enrichment_timeout_ms / 1000,
    )


def retry_call(first: ModelCall, answer: str, problem: str, config: Config) -> ModelCall:
    """The one retry: the same call, the invalid answer, and what was wrong with it."""
    correction = (
        f"That answer is not valid: {problem}. Answer again with only the JSON object "
        + _schema(config) + "."
    )
    shown = cap_text(answer.strip(), config.enrichment_slice_chars) or "(empty)"
    return ModelCall(
        messages=(*first.messages, ChatMessage("assistant", shown),
                  ChatMessage("user", correction)),
        max_tokens=first.max_tokens,
        timeout_s=first.timeout_s,
    )
