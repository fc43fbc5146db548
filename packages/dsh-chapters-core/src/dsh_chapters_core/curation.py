"""Layer 1 of the index (§10.1): per-machine, append-only curation facts.

One JSON object per line of `edits/<harnessId>/curation.jsonl`; one writer per file, ever
(§3.3). Malformed lines are skipped and counted, never fatal. Rule approval is a fact here too
(amendment 2026-09-20), so approving never rewrites another machine's bytes.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.pool_layout import CURATION_FILE
from dsh_chapters_core.ports.store import FileTree


class FactType(enum.StrEnum):
    TOPIC_ALIAS = "topic-alias"  # {from, to}: merge or rename a topic
    TOPIC_PIN = "topic-pin"  # {topic, path}: pin a document under a topic
    TOPIC_WEIGHT = "topic-weight"  # {topic, weight}
    GROUP = "group"  # {chapters: [...], label}
    NOTE = "note"  # {path, text}
    RULE_STATUS = "rule-status"  # {rule: "<harnessId>/<NNN>", status: "core" | "proposed"}


@dataclass(frozen=True, slots=True)
class CurationFact:
    """One appended curation fact: its type, its own fields, who wrote it and when."""

    type: FactType
    fields: tuple[tuple[str, Any], ...]  # the type's own keys, sorted; values are JSON values
    author: str = "user"  # "user" | "plugin"
    at: str = ""
    harness_id: str = ""  # whose edits file it came from (not serialized: it is the file's name)
    line: int = 0  # 1-based line in that file (not serialized)

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.fields:
            if k == key:
                return v
        return default

    def to_line(self) -> str:
        """Deterministic JSON: the same fact gives the same bytes on every machine."""
        data: dict[str, Any] = {"type": str(self.type), **dict(self.fields), "author": self.author}
        if self.at:
            data["at"] = self.at
        return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def make_fact(
    type_: FactType, *, author: str = "user", at: str = "", **fields: Any
) -> CurationFact:
    return CurationFact(type=type_, fields=tuple(sorted(fields.items())), author=author, at=at)


@dataclass(frozen=True, slots=True)
class FactLog:
    """Facts read from one or more edits files, with the malformed lines counted."""

    facts: tuple[CurationFact, ...]
    malformed: int = 0
    malformed_lines: tuple[tuple[str, int], ...] = ()  # (harness id, line number)


_RESERVED = {"type", "author", "at"}


def parse_facts(harness_id: str, text: str) -> FactLog:
    facts: list[CurationFact] = []
    bad: list[tuple[str, int]] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise ValueError("not an object")
            kind = FactType(str(obj.get("type", "")))
        except (ValueError, TypeError, RecursionError):  # a line nested past the stack
            bad.append((harness_id, n))
            continue
        fields = tuple(sorted((k, v) for k, v in obj.items() if k not in _RESERVED))
        facts.append(CurationFact(type=kind, fields=fields, author=str(obj.get("author", "user")),
                                  at=str(obj.get("at", "")), harness_id=harness_id, line=n))
    return FactLog(facts=tuple(facts), malformed=len(bad), malformed_lines=tuple(bad))


def merge_logs(logs: Mapping[str, str] | Iterable[tuple[str, str]]) -> FactLog:
    """Parse every machine's edits file; order is by harness id, then line (deterministic)."""
    items = sorted(logs.items() if isinstance(logs, Mapping) else logs)
    facts: list[CurationFact] = []
    bad: list[tuple[str, int]] = []
    for harness_id, text in items:
        log = parse_facts(harness_id, text)
        facts.extend(log.facts)
        bad.extend(log.malformed_lines)
    return FactLog(facts=tuple(facts), malformed=len(bad), malformed_lines=tuple(bad))


def edits_path(harness_id: str) -> str:
    """This machine's own Layer 1 file, relative to the store (or pool) root."""
    return f"edits/{harness_id}/{CURATION_FILE}"


def append_facts(tree: FileTree, harness_id: str, facts: Iterable[CurationFact],
                 patterns: tuple[str, ...] = ()) -> str:
    """Append facts to this machine's own edits file: the one appender (one writer per file,
    ever, §3.3). Call under the writer lock. The file is rewritten atomically with the new lines
    at the end, so existing bytes never change; a torn last line stays a malformed line of its
    own, never glued to ours. Every string of a fact is redacted first (§9: a note, a label or
    a topic name reaches the pool like a chapter does)."""
    if not harness_id:
        raise UsageError("no harnessId: curation facts need this machine's writer id",
                         hint="set harnessId in config or DSH_CHAPTERS_HARNESS_ID")
    path = edits_path(harness_id)
    old = tree.read(path) if tree.exists(path) else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    lines = "".join(_redacted(f, patterns).to_line() + "\n" for f in facts)
    tree.write(path, old + lines.encode("utf-8"))
    return path


def _redacted(fact: CurationFact, patterns: tuple[str, ...]) -> CurationFact:
    # Imported here: reading facts (every search) must not load the chokepoint's stack.
    from dsh_chapters_core.chokepoint import redact_json

    fields = tuple((k, redact_json(v, patterns)) for k, v in fact.fields)
    return fact if fields == fact.fields else CurationFact(
        type=fact.type, fields=fields, author=fact.author, at=fact.at,
        harness_id=fact.harness_id, line=fact.line)
