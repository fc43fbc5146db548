"""Per-turn signatures (§4.1): computed when a turn ends, deterministic, model-free.

A signature holds the paths a turn touched (tool-call arguments and results, in order of first
touch, project files ahead of directories and outside paths, so `paths[0]` is the file the turn
is about; spelled relative to the transcript's cwd, tooling noise dropped), its normalized
commands, its top-N stopword-filtered terms and its estimated size. One signature is one line of
`collections/<projectKey>/<sessionId>.jsonl`. Host injections are screened with the render
chokepoint's own predicate, and every text is redacted first, so no credential can leak into
the published collection through a term or a path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.chokepoint import TextChokepoint
from dsh_chapters_core.config import Config
from dsh_chapters_core.events import AssistantMessage, Reasoning, ToolCall, ToolResult, UserMessage
from dsh_chapters_core.injections import OMISSION_PATTERN
from dsh_chapters_core.redact import MARKER_PATTERN, redact
from dsh_chapters_core.text import (
    FILE,
    NOISE,
    command_of,
    normalize_commands,
    parse_arguments,
    path_kind,
    paths_in_arguments,
    paths_in_text,
    project_relative,
    top_terms,
)
from dsh_chapters_core.turns import Turn


@dataclass(frozen=True, slots=True)
class Signature:
    """One turn's signature: its event seqs, the paths it touched, its commands, its top terms and
    its estimated size (one line of the session's collection)."""

    seqs: tuple[int, ...]
    paths: tuple[str, ...]
    commands: tuple[str, ...]
    terms: tuple[str, ...]
    size: int  # estimated tokens (cross-machine heuristic, never shown as a count)
    by: str = "deterministic"
    at: str = ""  # the turn's end time

    def to_json_line(self) -> str:
        """The record's one-line JSON (§4.1), keys in the record's order, no newline."""
        record = {
            "seqs": list(self.seqs),
            "paths": list(self.paths),
            "commands": list(self.commands),
            "terms": list(self.terms),
            "size": self.size,
            "by": self.by,
            "at": self.at,
        }
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json_line(cls, line: str) -> Signature:
        """Parse one collection line; raises ValueError naming what is wrong."""
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError("a signature line must be a JSON object")
        return cls(
            seqs=_ints(record, "seqs"),
            paths=_strings(record, "paths"),
            commands=_strings(record, "commands"),
            terms=_strings(record, "terms"),
            size=_int(record.get("size"), "size"),
            by=_str(record.get("by", "deterministic"), "by"),
            at=_str(record.get("at", ""), "at"),
        )


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"signature field {key!r} must be an integer")
    return value


def _str(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"signature field {key!r} must be a string")
    return value


def _ints(record: dict[str, Any], key: str) -> tuple[int, ...]:
    value = record.get(key)
    if not isinstance(value, list):
        raise ValueError(f"signature field {key!r} must be a list")
    return tuple(_int(v, key) for v in value)


def _strings(record: dict[str, Any], key: str) -> tuple[str, ...]:
    value = record.get(key)
    if not isinstance(value, list):
        raise ValueError(f"signature field {key!r} must be a list")
    return tuple(_str(v, key) for v in value)


def _first_unique(items: Iterable[str], limit: int) -> tuple[str, ...]:
    """Items in order of first appearance, at most `limit`, no redaction marker among them."""
    seen: dict[str, None] = {}
    for item in items:
        if len(seen) >= limit:
            break
        if item not in seen and "⟦" not in item:
            seen[item] = None
    return tuple(seen)


class _TouchedPaths:
    """Paths in order of first touch, project files ahead of the rest (§4.2: `paths[0]` is
    the file a turn is about, so a directory, a tool's binary or the root never leads).

    Under `root` (the transcript's cwd) a path is spelled relative to it; noise (tooling
    directories, devices, the root itself) is dropped and never counts toward the limit.
    """

    __slots__ = ("files", "limit", "others", "root", "seen")

    def __init__(self, root: str, limit: int) -> None:
        self.root = root.rstrip("/") if root.strip("/") else ""
        self.limit = limit
        self.seen: set[str] = set()  # every spelling met, kept or not: judged once
        self.files: dict[str, None] = {}
        self.others: dict[str, None] = {}

    @property
    def full(self) -> bool:
        return len(self.files) >= self.limit

    def add(self, items: Iterable[str]) -> None:
        root, seen, files, others, limit = self.root, self.seen, self.files, self.others, self.limit
        for item in items:
            if len(files) >= limit:
                return
            if item in seen:
                continue
            seen.add(item)
            path = project_relative(item, root) if root and item.startswith(root) else item
            if path in files or path in others or "⟦" in path:
                continue
            kind = path_kind(path)
            if kind == FILE and not (root and (path[0] in "/~" or path.startswith("../"))):
                files[path] = None
            elif kind != NOISE and len(others) < limit:
                others[path] = None

    def ordered(self) -> tuple[str, ...]:
        rest = self.limit - len(self.files)
        return (*self.files, *list(self.others)[:rest])


def last_deliveries(events: Iterable[object]) -> set[int]:
    """Positions of the tool results to keep: a repeated delivery of a callId keeps the last."""
    last: dict[str, int] = {}
    for position, event in enumerate(events):
        if isinstance(event, ToolResult):
            last[event.call_id] = position
    return set(last.values())


def _scan_window(text: str, limit: int) -> str:
    """The head of a large tool result, cut at whitespace so no secret is split in two."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    cut = max(cut, text.rfind("\n", 0, limit))
    return text[: cut if cut > 0 else limit]


def sign_turn(turn: Turn, config: Config, *, cwd: str = "",
              chokepoint: TextChokepoint | None = None) -> Signature:
    """The deterministic signature of one completed turn (§4.1).

    `cwd` is the transcript's project root: paths under it are spelled relative to it, so
    the same file is one path whether a tool named it absolutely or not.
    """
    patterns = config.redaction_patterns
    point = chokepoint if chokepoint is not None else TextChokepoint(patterns)
    # §4.1 asks for milliseconds per turn: a tool result's paths come from its head only, and
    # the head is redacted before anything is taken from it (§9), which is most of the cost.
    scan_chars = config.signature_scan_chars
    prose: list[str] = []
    paths = _TouchedPaths(cwd, config.signature_max_paths)
    commands: list[str] = []
    inline_chars = 0
    kept_results = last_deliveries(turn.events)
    for position, event in enumerate(turn.events):
        if isinstance(event, UserMessage):
            screened = point.screened(event)
            if screened is None or screened.only_injection:
                continue
            # The chapter renders the same redacted text; markers are not terms.
            text = OMISSION_PATTERN.sub(" ", point.redact(screened.text).text)
            prose.append(text)
            inline_chars += len(screened.text)
        elif isinstance(event, AssistantMessage | Reasoning):
            text = point.redact(event.text).text
            prose.append(text)
            inline_chars += len(event.text)
        elif isinstance(event, ToolCall):
            arguments = point.redact(event.arguments).text
            inline_chars += len(event.name) + len(arguments)
            parsed = parse_arguments(arguments)
            paths.add(paths_in_arguments(parsed))
            script = command_of(event.name, parsed)
            if script:
                commands.extend(normalize_commands(script))
        elif isinstance(event, ToolResult) and position in kept_results:
            screened = point.screened(event)
            text = event.text if screened is None else screened.text
            if config.estimate_tokens(text) < config.tool_result_defer_floor_tokens:
                inline_chars += len(text)  # deferred results leave only a stub line behind
            if not paths.full:
                window = redact(_scan_window(text, scan_chars), patterns).text
                paths.add(paths_in_text(window))
    terms = top_terms(
        (MARKER_PATTERN.sub(" ", text) for text in prose),
        limit=config.signature_top_terms,
        min_chars=config.term_min_chars,
    )
    return Signature(
        seqs=turn.seqs,
        paths=paths.ordered(),
        commands=_first_unique(commands, config.signature_max_commands),
        terms=terms,
        size=(inline_chars + config.chars_per_token - 1) // config.chars_per_token,
        at=turn.time,
    )
