"""Per-turn signatures (§4.1): computed when a turn ends, deterministic, model-free.

A signature holds the paths a turn touched (tool-call arguments and results, in order of first
touch, so `paths[0]` is the file the turn is about), its normalized commands, its top-N
stopword-filtered terms and its estimated size. One signature is one line of
`collections/<projectKey>/<sessionId>.jsonl`. Host injections are screened with the render
chokepoint's own predicate, and every text is redacted first, so no credential can leak into
the published collection through a term or a path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.events import AssistantMessage, Reasoning, ToolCall, ToolResult, UserMessage
from dsh_chapters_core.injections import OMISSION_PATTERN, screened_event
from dsh_chapters_core.redact import MARKER_PATTERN, redact
from dsh_chapters_core.text import (
    command_of,
    normalize_commands,
    parse_arguments,
    paths_in_arguments,
    paths_in_text,
    top_terms,
)
from dsh_chapters_core.turns import Turn


@dataclass(frozen=True, slots=True)
class Signature:
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
    seen: dict[str, None] = {}
    _collect(seen, items, limit)
    return tuple(seen)


def _collect(seen: dict[str, None], items: Iterable[str], limit: int) -> bool:
    """Add items in order until `limit`; True once full (later texts need no scan at all)."""
    for item in items:
        if len(seen) >= limit:
            return True
        if item not in seen and "⟦" not in item:
            seen[item] = None
    return len(seen) >= limit


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


def sign_turn(turn: Turn, config: Config) -> Signature:
    """The deterministic signature of one completed turn (§4.1)."""
    patterns = config.redaction_patterns
    floor_chars = config.tool_result_defer_floor_tokens * config.chars_per_token
    prose: list[str] = []
    paths: dict[str, None] = {}  # ordered: paths[0] is the file the turn is about (§4.2)
    path_limit = config.signature_max_paths
    commands: list[str] = []
    inline_chars = 0
    kept_results = last_deliveries(turn.events)
    for position, event in enumerate(turn.events):
        if isinstance(event, UserMessage):
            screened = screened_event(event)
            if screened is None or screened.only_injection:
                continue
            text = redact(OMISSION_PATTERN.sub(" ", screened.text), patterns).text
            prose.append(text)
            inline_chars += len(screened.text)
        elif isinstance(event, AssistantMessage | Reasoning):
            text = redact(event.text, patterns).text
            prose.append(text)
            inline_chars += len(event.text)
        elif isinstance(event, ToolCall):
            arguments = redact(event.arguments, patterns).text
            inline_chars += len(event.name) + len(arguments)
            parsed = parse_arguments(arguments)
            _collect(paths, paths_in_arguments(parsed), path_limit)
            script = command_of(event.name, parsed)
            if script:
                commands.extend(normalize_commands(script))
        elif isinstance(event, ToolResult) and position in kept_results:
            screened = screened_event(event)
            text = event.text if screened is None else screened.text
            if config.estimate_tokens(text) < config.tool_result_defer_floor_tokens:
                inline_chars += len(text)  # deferred results leave only a stub line behind
            if len(paths) < path_limit:
                window = redact(_scan_window(text, floor_chars), patterns).text
                _collect(paths, paths_in_text(window), path_limit)
    terms = top_terms(
        (MARKER_PATTERN.sub(" ", text) for text in prose),
        limit=config.signature_top_terms,
        min_chars=config.term_min_chars,
    )
    return Signature(
        seqs=turn.seqs,
        paths=tuple(paths),
        commands=_first_unique(commands, config.signature_max_commands),
        terms=terms,
        size=(inline_chars + config.chars_per_token - 1) // config.chars_per_token,
        at=turn.time,
    )
