"""Census of the Gemini CLI, OpenCode and pi readers on real published sessions.

The files are `/work/shared/eval/other_agents.tsv`'s (fetched with `fetch_haystack.py` into a
directory holding `index.tsv` and `<kind>/<nnnnn>.jsonl`): sessions people committed to public
repositories, most of them as Entire (entireio/cli) checkpoints store them (`full.jsonl`, the
agent's own file copied, or for OpenCode `opencode export`'s JSON). Each file is read by its
reader as `chapters import --final` reads it, archived into an in-memory store, and checked
against its raw records by rules of this script that share no code with the readers:

- **shape**: what the file is (Gemini's session document or JSON lines, OpenCode's export, a
  pi or Oh My Pi session, or not this agent's file at all: a DSH log among the pi rows);
- **lines**: imported, skipped (by rule), unknown (by record type), malformed;
- **prompts and replies**: every prompt the user typed and every reply the model wrote, as
  this script finds them in the raw records, must be one message event's text, byte for
  byte, and must appear in the archived chapters (one that holds a credential appears there
  with the credential redacted: counted apart, as `redactedInChapters`);
- **zero-chapter files**: files that archive no chapter, with the reason (no prompt or reply
  in them).

    python benchmarks/census_gemini_opencode_pi.py [DATA] [--kind gemini-cli opencode pi]

DATA defaults to `$DSH_OTHER_AGENTS`, else `/work/data/others`. Writes
`benchmarks/results/census_gemini_opencode_pi.json`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_chapters_core.archive import archive_transcript
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import AssistantMessage, Transcript, UserMessage
from dsh_chapters_core.projectkey import derive_project_key
from dsh_chapters_core.redact import redact
from dsh_chapters_core.testing.fakes_store import FakeChapterStore, FakeWriterLock, FixedClock
from dsh_chapters_harness.dsh import DshReader
from dsh_chapters_harness.gemini_cli import GeminiCliReader
from dsh_chapters_harness.opencode import OpenCodeReader
from dsh_chapters_harness.pi import PiReader

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "census_gemini_opencode_pi.json"
KINDS = {"gemini-cli": GeminiCliReader(), "opencode": OpenCodeReader(),
         "pi-coding-agent": PiReader()}
IDENTITY = derive_project_key(remote="https://example.org/census/other-agents.git")

# Host context by the census's own rules (what the agents' code writes as a user message).
_GEMINI_HOST = re.compile(r"\s*(System: )?Please continue\.\s*\Z|\s*<(session|hook)_context>")
_GEMINI_FILES = "\n--- Content from referenced files ---"


@dataclass
class FileResult:
    kind: str
    shape: str
    lines: Counter[str] = field(default_factory=Counter)
    skip_rules: Counter[str] = field(default_factory=Counter)
    unknown_types: Counter[str] = field(default_factory=Counter)
    prompts: int = 0
    prompts_in_events: int = 0
    prompts_in_chapters: int = 0
    replies: int = 0
    replies_in_events: int = 0
    replies_in_chapters: int = 0
    redacted: int = 0
    chapters: int = 0
    turns: int = 0
    missing: list[str] = field(default_factory=list)
    other_reader: Counter[str] = field(default_factory=Counter)  # another agent's file
    error: str = ""
    seconds: float = 0.0


# ---- what the raw records say the user typed and the model answered ------------------------
def _gemini_parts(content: Any) -> str:
    if isinstance(content, str):
        return content
    items = content if isinstance(content, list) else [content]
    return "".join(p["text"] for p in items
                   if isinstance(p, dict) and isinstance(p.get("text"), str)
                   and not p.get("thought"))


def gemini_said(data: bytes) -> tuple[list[str], list[str]]:
    text = data.decode("utf-8", "replace")
    messages: dict[str, dict[str, Any]] = {}
    if text.lstrip().startswith("{") and '"messages"' in text[:2000] and "\n" in text.strip():
        try:
            records = json.loads(text).get("messages", [])
        except ValueError:
            records = []
    else:
        records = []
    if not records:
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                records.append(record)
    for record in records:
        messages[record["id"]] = record  # the last version of each message
    prompts, replies = [], []
    for message in messages.values():
        content = message.get("content")
        if message.get("type") == "user":
            items = content if isinstance(content, list) else [content]
            if items and all(isinstance(p, dict) and "functionResponse" in p for p in items):
                continue
            said = _gemini_parts(message.get("displayContent") or content)
            if _GEMINI_HOST.match(said):
                continue
            said = said.split(_GEMINI_FILES, 1)[0]
            if said.strip():
                prompts.append(said)
        elif message.get("type") == "gemini":
            said = _gemini_parts(content)
            if said.strip():
                replies.append(said)
    return prompts, replies


def opencode_said(data: bytes) -> tuple[list[str], list[str]]:
    document = json.loads(data)
    prompts, replies = [], []
    for message in document.get("messages", []):
        info, parts = message.get("info", {}), message.get("parts", [])
        if info.get("role") == "user":
            typed = [p["text"] for p in parts if p.get("type") == "text"
                     and not p.get("synthetic") and not p.get("ignored") and p["text"].strip()]
            if not typed:
                typed = [p["prompt"] for p in parts if p.get("type") == "subtask"
                         and p.get("prompt", "").strip()]
            prompts.extend(typed)
        elif info.get("role") == "assistant" and not info.get("summary"):
            replies.extend(p["text"] for p in parts
                           if p.get("type") == "text" and p.get("text", "").strip())
    return prompts, replies


def pi_said(data: bytes) -> tuple[list[str], list[str]]:
    prompts, replies = [], []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        message = record.get("message") if record.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if message.get("role") == "user":
            if isinstance(content, str):
                said = content
            else:
                said = "\n".join(b.get("text", "") for b in content or []
                                 if isinstance(b, dict) and b.get("type") == "text")
            if said.strip():
                prompts.append(said)
        elif message.get("role") == "assistant":
            replies.extend(b["text"] for b in content or [] if isinstance(b, dict)
                           and b.get("type") == "text" and b.get("text", "").strip())
    return prompts, replies


SAID = {"gemini-cli": gemini_said, "opencode": opencode_said, "pi-coding-agent": pi_said}


def shape_of(kind: str, path: Path, head: bytes) -> str:
    if kind == "gemini-cli":
        return "Gemini session document (to 0.38)" if head.lstrip().startswith(b"{\n") \
            else "Gemini session JSON lines (0.39+)"
    if kind == "opencode":
        return "opencode export document"
    if DshReader().sniff(head) and not PiReader().sniff(head):
        return "not pi: a DSH session log"
    if head.startswith(b'{"type":"title"'):
        return "Oh My Pi session"
    return "pi session"


# ---- one file ---------------------------------------------------------------------------------
def census_file(kind: str, path: Path, stored_as: str) -> FileResult:
    data = path.read_bytes()
    shape = shape_of(kind, path, data[:4096])
    result = FileResult(kind, f"{shape}, {stored_as}")
    reader = KINDS[kind]
    if shape.startswith("not pi"):  # read by the reader of the agent that wrote it
        account = DshReader().read(str(path)).account
        result.other_reader.update(files=1, imported=account.imported, skipped=account.skipped,
                                   unknown=account.unknown, malformed=account.malformed)
        return result
    started = time.perf_counter()
    try:
        transcript = reader.read(str(path))
    except InputError as exc:
        result.error = exc.message
        return result
    result.seconds = time.perf_counter() - started
    account = transcript.account
    result.lines.update(imported=account.imported, skipped=account.skipped,
                        unknown=account.unknown, malformed=account.malformed,
                        split=account.split, total=account.total)
    result.skip_rules.update(dict(account.skip_rules))
    result.unknown_types.update(dict(account.unknown_types))
    chapters_text = archived_text(transcript, result)
    prompts, replies = SAID[kind](data)
    said = {e.text for e in transcript.events if isinstance(e, UserMessage | AssistantMessage)}
    for texts, which in ((prompts, "prompt"), (replies, "reply")):
        for text in texts:
            in_events = text in said
            in_chapters = text in chapters_text
            if not in_chapters and in_events:
                masked = redact(text)  # a credential in it: the chapter holds it redacted
                if masked.total and masked.text in chapters_text:
                    result.redacted += 1
                    in_chapters = True
            if which == "prompt":
                result.prompts += 1
                result.prompts_in_events += in_events
                result.prompts_in_chapters += in_chapters
            else:
                result.replies += 1
                result.replies_in_events += in_events
                result.replies_in_chapters += in_chapters
            if not in_events and len(result.missing) < 3:
                result.missing.append(f"{which}: {text[:80]!r}")
    return result


def archived_text(transcript: Transcript, result: FileResult) -> str:
    """Archive as `chapters import --final` does, into an in-memory store; the chapters' text."""
    store = FakeChapterStore()
    report = archive_transcript(transcript, store=store, lock=FakeWriterLock(),
                                clock=FixedClock(), config=DEFAULTS, identity=IDENTITY,
                                harness_id="census", final=True)
    result.chapters = len(report.chapters)
    result.turns = report.turns_archived
    return "\n".join(store.read_text(c.path) for c in report.chapters)


# ---- the whole set -----------------------------------------------------------------------------
def rows(data: Path, kinds: list[str]) -> Iterator[tuple[str, Path, str]]:
    with (data / "index.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            kind = row["file"].split("/", 1)[0]
            if kind in kinds:
                stored = "an Entire checkpoint copy" if row["path"].endswith("full.jsonl") \
                    else "the agent's own file"
                yield kind, data / row["file"], stored


def summarize(results: list[FileResult]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for kind in sorted({r.kind for r in results}):
        mine = [r for r in results if r.kind == kind]
        read = [r for r in mine if r.lines]
        lines: Counter[str] = Counter()
        skips: Counter[str] = Counter()
        unknowns: Counter[str] = Counter()
        for r in read:
            lines.update(r.lines)
            skips.update(r.skip_rules)
            unknowns.update(r.unknown_types)
        summary[kind] = {
            "files": len(mine),
            "shapes": dict(Counter(r.shape for r in mine)),
            "read": len(read),
            "notThisAgent": sum(1 for r in mine if r.shape.startswith("not ")),
            "notThisAgentReadByDsh": dict(sum((r.other_reader for r in mine), Counter())),
            "refused": {r.shape: r.error for r in mine if r.error},
            "lines": dict(lines),
            "skipRules": dict(skips.most_common()),
            "unknownTypes": dict(unknowns.most_common()),
            "prompts": sum(r.prompts for r in read),
            "promptsInEvents": sum(r.prompts_in_events for r in read),
            "promptsInChapters": sum(r.prompts_in_chapters for r in read),
            "replies": sum(r.replies for r in read),
            "repliesInEvents": sum(r.replies_in_events for r in read),
            "repliesInChapters": sum(r.replies_in_chapters for r in read),
            "redactedInChapters": sum(r.redacted for r in read),
            "chapters": sum(r.chapters for r in read),
            "turnsArchived": sum(r.turns for r in read),
            "zeroChapterFiles": sum(1 for r in read if r.chapters == 0),
            "zeroChapterWithWords": sum(1 for r in read if r.chapters == 0
                                        and (r.prompts or r.replies)),
            "missingExamples": [m for r in read for m in r.missing][:5],
            "readSeconds": round(sum(r.seconds for r in read), 3),
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=os.environ.get("DSH_OTHER_AGENTS",
                                                                  "/work/data/others"))
    parser.add_argument("--kind", nargs="*", default=list(KINDS), choices=list(KINDS))
    args = parser.parse_args(argv)
    data = Path(args.data)
    if not (data / "index.tsv").is_file():
        print(f"no index.tsv in {data}: fetch the files with fetch_haystack.py --tsv "
              "other_agents.tsv first", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results = [census_file(kind, path, stored) for kind, path, stored in rows(data, args.kind)]
    summary = summarize(results)
    out = {"data": str(data), "python": platform.python_version(),
           "seconds": round(time.perf_counter() - started, 1), "kinds": summary}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for kind, figures in summary.items():
        lines = figures["lines"]
        print(f"{kind}: {figures['files']} files ({figures['read']} read, "
              f"{figures['notThisAgent']} not this agent's); lines {lines.get('total', 0):,}: "
              f"{lines.get('imported', 0):,} imported, {lines.get('skipped', 0):,} skipped, "
              f"{lines.get('unknown', 0)} unknown, {lines.get('malformed', 0)} malformed; "
              f"prompts {figures['promptsInEvents']}/{figures['prompts']} verbatim "
              f"({figures['promptsInChapters']} in chapters), replies "
              f"{figures['repliesInEvents']}/{figures['replies']} "
              f"({figures['repliesInChapters']} in chapters); {figures['chapters']} chapters, "
              f"{figures['zeroChapterFiles']} zero-chapter files")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
