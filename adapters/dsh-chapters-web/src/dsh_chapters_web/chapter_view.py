"""A chapter's markdown as the blocks a reader folds: turns, messages, tool calls, results.

The chapter is shown verbatim (§4: the archive is the transcript, not a summary): every line
of the file keeps its 1-based number, so a search anchor's `line` (and `?line=N`) names the
same line `chapters artifact read` pages through. The parser only recognizes the shapes the
core's renderer writes (`**User:**` + a fence, `→ tool`, `← result` + a fence or an artifact
stub); any other line is kept as prose, never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import attrs
import yaml
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.injections import OMISSION_PATTERN
from dsh_chapters_core.redact import MARKER_PATTERN
from markupsafe import Markup, escape

_LABEL = re.compile(r"^\*\*([A-Za-z][A-Za-z ]*):\*\*\s*$")
_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_TOOL = re.compile(r"^→ tool (\S+?)\((.*)\)\s*$")
_RESULT = re.compile(r"^← result (.+?):\s*(.*)$")
_ARTIFACT = re.compile(r"^(artifacts/[0-9a-f]{2}/[0-9a-f]{64}\.txt)\s*(\(.*\))?\s*$")
_TURN = re.compile(r"^## (.*)$")

ROLE_OF_LABEL = {"User": "user", "Assistant": "assistant", "Reasoning": "reasoning"}


@attrs.frozen
class Line:
    """One line of the chapter file, with its 1-based number in the whole file."""

    number: int  # 1-based, in the whole file (frontmatter included)
    text: str


@attrs.frozen
class Block:
    """One foldable unit. `role`: turn, user, assistant, reasoning, tool-call, tool-result,
    artifact, prose; `label` is what the fold's summary says."""

    role: str
    label: str
    lines: tuple[Line, ...]
    artifact: str = ""  # store-relative artifact path, for `artifact` blocks
    detail: str = ""  # a tool call's command or path, shown on its folded line

    @property
    def first(self) -> int:
        return self.lines[0].number if self.lines else 0

    @property
    def last(self) -> int:
        return self.lines[-1].number if self.lines else 0

    def holds(self, line: int) -> bool:
        return self.first <= line <= self.last


@attrs.frozen
class ChapterView:
    """A chapter as the viewer folds it: its frontmatter, how many lines that spans, its blocks."""

    frontmatter: dict[str, Any]
    frontmatter_lines: int
    blocks: tuple[Block, ...]


def parse_frontmatter(text: str) -> tuple[dict[str, Any], int]:
    """The frontmatter as data (yaml.safe_load at this edge) and how many lines it spans."""
    head, _ = split_frontmatter(text)
    if not head:
        return {}, 0
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError:
        data = None
    spans = head.count("\n") + (0 if head.endswith("\n") else 1) + 2  # the two `---` lines
    return (data if isinstance(data, dict) else {"unparsed": head}), spans


def _fenced(lines: list[str], start: int) -> tuple[list[Line], int]:
    """The content lines of the fence opening at `start` (0-based), and the index after it."""
    opener = _FENCE.match(lines[start])
    assert opener is not None
    marker = opener.group(1)
    content: list[Line] = []
    i = start + 1
    while i < len(lines):
        if lines[i].rstrip() == marker:
            return content, i + 1
        content.append(Line(i + 1, lines[i]))
        i += 1
    return content, i  # an unclosed fence runs to the end of the file


def _next_nonblank(lines: list[str], i: int) -> int:
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def parse_chapter(text: str) -> ChapterView:
    frontmatter, skip = parse_frontmatter(text)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    blocks: list[Block] = []
    prose: list[Line] = []

    def flush() -> None:
        if prose:
            blocks.append(Block("prose", "", tuple(prose)))
            prose.clear()

    i = skip
    while i < len(lines):
        line = lines[i]
        label = _LABEL.match(line)
        tool = _TOOL.match(line)
        result = _RESULT.match(line)
        turn = _TURN.match(line)
        if label:
            flush()
            j = _next_nonblank(lines, i + 1)
            role = ROLE_OF_LABEL.get(label.group(1), "prose")
            if j < len(lines) and _FENCE.match(lines[j]):
                content, after = _fenced(lines, j)
                blocks.append(Block(role, label.group(1), tuple(content) or (Line(i + 1, line),)))
                i = after
            else:
                blocks.append(Block(role, label.group(1), (Line(i + 1, line),)))
                i += 1
        elif tool:
            flush()
            blocks.append(Block("tool-call", tool.group(1), (Line(i + 1, line),),
                                detail=tool_detail(tool.group(2))))
            i += 1
        elif result:
            flush()
            name, rest = result.group(1), result.group(2)
            stub = _ARTIFACT.match(rest)
            if stub:
                blocks.append(Block("artifact", name, (Line(i + 1, line),),
                                    artifact=stub.group(1)))
                i += 1
                continue
            j = _next_nonblank(lines, i + 1)
            if not rest and j < len(lines) and _FENCE.match(lines[j]):
                content, after = _fenced(lines, j)
                blocks.append(Block("tool-result", name, tuple(content) or (Line(i + 1, line),)))
                i = after
            else:
                blocks.append(Block("tool-result", name, (Line(i + 1, line),)))
                i += 1
        elif turn:
            flush()
            blocks.append(Block("turn", turn.group(1), (Line(i + 1, line),)))
            i += 1
        else:
            if line.strip():
                prose.append(Line(i + 1, line))
            else:
                flush()
            i += 1
    flush()
    return ChapterView(frontmatter, skip, tuple(blocks))


# The argument that says what a call did, in the order the tools' own inputs name it: a shell
# command (Claude Code's Bash, Codex's shell, DSH's exec), a file (Read, Edit, Write), a search.
_DETAIL_KEYS = ("command", "cmd", "file_path", "path", "notebook_path", "pattern", "url",
                "query", "description", "prompt")
DETAIL_CHARS = 160  # the folded line's share of the page; the whole call is one click away


def tool_detail(arguments: str) -> str:
    """A tool call's command or path, from its rendered arguments (the core writes them as one
    JSON object); "" when none is recognized. Only the folded line uses it: the verbatim line
    stays under the fold."""
    try:
        data = json.loads(arguments)
    except ValueError:
        return _cut(arguments.strip())
    if not isinstance(data, dict):
        return ""
    for key in _DETAIL_KEYS:
        value = data.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = " ".join(value)  # Codex's shell command is an argv
        if isinstance(value, str) and value.strip():
            return _cut(" ".join(value.split()))
    return ""


def _cut(text: str) -> str:
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 1].rstrip() + "…"


def frontmatter_fields(frontmatter: dict[str, Any]) -> list[tuple[str, str]]:
    """The frontmatter as (name, value) fields a person reads: counts as `7 user · 3 tool`, a
    range as `31–48`, lists joined; the fields the page shows on their own are left out."""
    fields: list[tuple[str, str]] = []
    for key, value in frontmatter.items():
        if key in _OWN_FIELDS:
            continue
        fields.append((key, field_text(key, value)))
    return fields


_ROLE_ORDER = {"user": 0, "assistant": 1, "tool": 2}
_OWN_FIELDS = frozenset({"topics", "generated", "ended", "prLinks", "title", "summary"})


def field_text(key: str, value: Any) -> str:
    if key == "seqRange" and isinstance(value, list) and len(value) == 2:
        return f"{value[0]}–{value[1]}"
    if isinstance(value, dict):
        if all(isinstance(v, int) for v in value.values()):  # counts: people first, as `list`
            order = sorted(value, key=lambda k: (_ROLE_ORDER.get(str(k), len(_ROLE_ORDER)), k))
            return " · ".join(f"{value[k]} {k}" for k in order)
        return " · ".join(f"{k}: {field_text(str(k), v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(field_text(key, v) for v in value)
    return str(value)


def plain_lines(text: str) -> tuple[Line, ...]:
    """An artifact (or any non-chapter file): every line, numbered, nothing recognized."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(Line(n, t) for n, t in enumerate(lines, start=1))


def mark_line(text: str) -> Markup:
    """Escape one verbatim line and make redaction and screened-injection markers visible as
    such (§9): they are the archive saying "something was here", not transcript text."""
    escaped = str(escape(text))
    escaped = MARKER_PATTERN.sub(
        lambda m: f'<mark class="redaction" title="a credential was redacted here">'
                  f"{m.group(0)}</mark>", escaped)
    escaped = OMISSION_PATTERN.sub(
        lambda m: f'<mark class="screened" title="context the agent host injected, left out">'
                  f"{m.group(0)}</mark>", escaped)
    return Markup(escaped)


def iter_markers(view: ChapterView) -> Iterator[tuple[str, int]]:
    """(kind, line) of every redaction and screened marker, for the side panel's counts."""
    for block in view.blocks:
        for line in block.lines:
            for _ in MARKER_PATTERN.finditer(line.text):
                yield "redaction", line.number
            for _ in OMISSION_PATTERN.finditer(line.text):
                yield "screened", line.number
