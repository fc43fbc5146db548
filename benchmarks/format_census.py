"""Format census: every real transcript of the haystack read through its reader, line by line.

The haystack (`/work/shared/eval/haystack.tsv`, fetched with `fetch_haystack.py` into a
directory holding `index.tsv` and `<kind>/<nnnnn>.jsonl`) is genuine published Claude Code and
Codex transcripts of many harness versions. Each file is read by its reader exactly as
`chapters import --final` reads it, and checked against the raw records by rules of this script
that share no code with the readers:

- **lines**: imported, skipped (by rule), unknown (by record type, with the harness versions
  that wrote them), malformed, split; the readers must leave 0 unknown;
- **prompt-less replies**: archived turns (complete, or the final tail of a session that is
  over) that hold a reply but no user message, although the transcript has a prompt for that
  reply. Claude Code: walk the reply's `parentUuid` chain back to the first record that is not
  part of the exchange (a user record that is not a tool result, a turn-end record, or a
  finished message of the model); the reply has a prompt when that record is a real prompt.
  Codex: walk back in file order to the turn's start; a user message that is not host context
  is its prompt. Replies with no prompt anywhere (a stop hook, a task notification, a resumed
  session's first reply) are counted apart;
- **host context as a prompt**: user messages of archived turns that are host context by
  their heading (AGENTS.md, environment context, plugin lists, interrupt notices);
- **queued messages** (Claude Code): every message the user typed while the agent worked
  (`queue-operation` `enqueue` with the user's words) must be in an archived user message;
  one the user took back into the input box (`popAll`) and never sent is counted as withdrawn.

    python benchmarks/format_census.py [HAYSTACK] [--kind claude-code codex] [--limit N]
        [--docs]

HAYSTACK defaults to `$DSH_HAYSTACK`, else the first `data/haystack` above this checkout.
Writes `benchmarks/results/format_census.json`; with `--docs`, also the census block of
docs/formats.md. Also reported: reading speed (MB/s of the reader alone, in CPU seconds of this
process, median per file over 1 MB and overall); `reader_speed.py` compares it with a git ref.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import AssistantMessage, Transcript, UserMessage
from dsh_chapters_core.turns import Turn, split_turns
from dsh_chapters_harness.claude_code import ClaudeCodeReader
from dsh_chapters_harness.codex import CodexReader

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "format_census.json"
DOCS = ROOT / "docs" / "formats.md"
DOCS_BEGIN = "<!-- format census: begin (benchmarks/format_census.py --docs) -->"
DOCS_END = "<!-- format census: end -->"
READERS = {"claude-code": ClaudeCodeReader(), "codex": CodexReader()}

# Host context by its opening, as the harnesses write it (independent of the readers' rules).
_HOST_OPENINGS = re.compile(
    r"\s*(# AGENTS\.md instructions|<environment_context>|<user_instructions>|"
    r"<recommended_plugins>|<turn_aborted>|<skills_instructions>|<system-reminder>|"
    r"<local-command-caveat>|<task-notification>|<agent-notification>)"
)
_CC_NOT_PROMPT = re.compile(
    r"\s*(<command-name>|<command-message>|<local-command-std|<bash-input>|<bash-std|"
    r"<task-notification>|<agent-notification>|\[Request interrupted|Caveat:|"
    r"This session is being continued|Stop hook feedback:|<system-reminder>)"
)
_CC_COMMAND = re.compile(r"<command-name>/?([^<]*)</command-name>")
# Claude Code's own commands: a turn they start has no prompt of the user's.
_CC_BUILTIN = frozenset({
    "add-dir", "agents", "bashes", "bug", "clear", "compact", "config", "context", "cost",
    "doctor", "effort", "exit", "export", "fast", "feedback", "help", "hooks", "ide", "init",
    "login", "logout", "mcp", "memory", "model", "output-style", "permissions", "plugin",
    "plugins", "pr-comments", "release-notes", "rename", "resume", "review", "rewind", "sandbox",
    "security-review", "skills", "stats", "status", "statusline", "tasks", "terminal-setup",
    "theme", "todos", "upgrade", "usage", "vim", "loop", "remote-control", "btw", "goal",
})
_TERMINAL = frozenset({"end_turn", "stop_sequence", "max_tokens", "refusal"})


def find_haystack() -> Path | None:
    explicit = os.environ.get("DSH_HAYSTACK")
    if explicit:
        return Path(explicit)
    for parent in ROOT.parents:
        candidate = parent / "data" / "haystack"
        if (candidate / "index.tsv").is_file():
            return candidate
    return None


def records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each JSON object line, splitting lines that hold several."""
    decoder = json.JSONDecoder()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            text = raw.decode("utf-8", "replace").strip()
            position = 0
            while position < len(text):
                try:
                    value, position = decoder.raw_decode(text, position)
                except ValueError:
                    break
                if isinstance(value, dict):
                    yield number, value
                while position < len(text) and text[position].isspace():
                    position += 1


# ---------------------------------------------------------------------------------------------
# Claude Code: the raw facts


def _cc_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(b.get("text", "") for b in content
                           if isinstance(b, dict) and b.get("type") == "text"
                           and isinstance(b.get("text"), str))
    return ""


def _cc_is_prompt(record: dict[str, Any]) -> bool:
    """A user record the user typed (a custom command counts; Claude Code's own do not)."""
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                         for b in content):
        return False
    if record.get("isMeta") is True or record.get("isCompactSummary") is True:
        return False
    text = _cc_text(content)
    command = _CC_COMMAND.search(text)
    if command is not None:
        return command.group(1).strip() not in _CC_BUILTIN
    if not text.strip() and not (isinstance(content, list) and content):
        return False
    return _CC_NOT_PROMPT.match(text) is None


@dataclass
class _CcNode:
    kind: str  # prompt | user (not a prompt) | tool (results) | assistant | end | other
    parent: str
    message_id: str = ""
    terminal: bool = False


@dataclass
class CcFacts:
    nodes: dict[str, _CcNode] = field(default_factory=dict)
    line_uuid: dict[int, list[str]] = field(default_factory=dict)
    typed: list[str] = field(default_factory=list)  # queued messages in the user's words
    withdrawn: list[str] = field(default_factory=list)
    version: str = ""


def cc_facts(path: Path) -> CcFacts:
    facts = CcFacts()
    queue: list[str] = []
    for number, record in records(path):
        kind = record.get("type")
        if isinstance(record.get("version"), str):
            facts.version = record["version"]
        if kind == "queue-operation":
            content = record.get("content")
            operation = record.get("operation")
            if operation == "enqueue" and isinstance(content, str) and content.strip() and \
                    content.lstrip()[:1] not in ("<", "/", "{", "!"):
                facts.typed.append(content)
                queue.append(content)
            elif operation == "popAll":
                popped = content if isinstance(content, str) else ""
                facts.withdrawn.extend(q for q in queue if q in popped or not popped)
                queue = [q for q in queue if popped and q not in popped]
            elif operation in ("remove", "dequeue") and queue:
                queue.remove(content if content in queue else queue[0])
            continue
        uid = record.get("uuid")
        if not isinstance(uid, str) or uid in facts.nodes:
            continue
        parent = record.get("parentUuid")
        parent = parent if isinstance(parent, str) else ""
        if record.get("isSidechain") is True and "/subagents/" not in str(path):
            continue
        message = record.get("message")
        if kind == "assistant" and isinstance(message, dict):
            node = _CcNode("assistant", parent, str(message.get("id", "")),
                           message.get("stop_reason") in _TERMINAL)
        elif kind == "user" and record.get("isMeta") is True:
            node = _CcNode("other", parent)  # an expanded command or skill body: host text
        elif kind == "user":
            content = message.get("content") if isinstance(message, dict) else None
            carrier = isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
            node = _CcNode("tool" if carrier else "prompt" if _cc_is_prompt(record) else "user",
                           parent)
        elif kind == "system" and record.get("subtype") in ("turn_duration", "stop_hook_summary"):
            node = _CcNode("end", parent)
        else:
            node = _CcNode("other", parent)
        facts.nodes[uid] = node
        facts.line_uuid.setdefault(number, []).append(uid)
    return facts


def cc_has_prompt(facts: CcFacts, line: int) -> bool:
    """Whether the reply at `line` answers a prompt of the user's (by its parent chain)."""
    start = next((u for u in facts.line_uuid.get(line, ())
                  if facts.nodes[u].kind == "assistant"), None)
    if start is None:
        return False
    message_id = facts.nodes[start].message_id
    seen = set()
    current = facts.nodes[start].parent
    while current and current not in seen:
        seen.add(current)
        node = facts.nodes.get(current)
        if node is None:
            return False
        if node.kind == "prompt":
            return True
        if node.kind == "end":
            return False
        if node.kind == "user":
            return False  # host context (a stop hook, a notification) started this exchange
        if node.kind == "assistant" and node.terminal and node.message_id != message_id:
            return False  # a finished earlier message: this reply came after that turn
        current = node.parent
    return False


# ---------------------------------------------------------------------------------------------
# Codex: the raw facts


@dataclass
class CxFacts:
    lines: list[tuple[int, str]] = field(default_factory=list)  # (line, prompt|host|end|...)
    version: str = ""


def cx_facts(path: Path) -> CxFacts:
    facts = CxFacts()
    for number, record in records(path):
        payload = record.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        kind = record.get("type")
        if kind == "session_meta" and isinstance(payload.get("cli_version"), str):
            facts.version = payload["cli_version"]
        if kind == "event_msg" and payload.get("type") in ("task_complete", "turn_aborted",
                                                             "thread_rolled_back"):
            facts.lines.append((number, "end"))
        elif kind == "response_item" and payload.get("type") == "message" and \
                payload.get("role") == "user":
            items = payload.get("content")
            texts = [i.get("text", "") for i in items if isinstance(i, dict)] \
                if isinstance(items, list) else []
            real = [t for t in texts if isinstance(t, str) and t.strip()
                    and _HOST_OPENINGS.match(t) is None]
            facts.lines.append((number, "prompt" if real else "host"))
    return facts


def cx_has_prompt(facts: CxFacts, line: int) -> bool:
    for number, kind in reversed(facts.lines):
        if number >= line:
            continue
        if kind == "prompt":
            return True
        if kind == "end":
            return False
    return False


# ---------------------------------------------------------------------------------------------
# One file


@dataclass
class FileResult:
    kind: str
    path: str
    version: str
    size: int
    seconds: float = 0.0
    error: str = ""
    lines: dict[str, int] = field(default_factory=dict)
    skip_rules: dict[str, int] = field(default_factory=dict)
    unknown_types: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    promptless_with_prompt: list[int] = field(default_factory=list)  # first reply line
    promptless_without: int = 0
    host_prompts: int = 0
    typed: int = 0
    typed_present: int = 0
    withdrawn: int = 0
    missing: list[int] = field(default_factory=list)  # indexes of typed messages not found


def archived_turns(transcript: Transcript) -> list[Turn]:
    """The turns `chapters import --final` archives: every complete turn and the tail."""
    split = split_turns(transcript.events)
    tail = split.final_turn()
    return [*split.complete, *([tail] if tail is not None else [])]


def census_file(kind: str, path: Path, version: str) -> FileResult:
    result = FileResult(kind, str(path), version, path.stat().st_size)
    started = time.process_time()  # CPU seconds: the machine may be shared
    try:
        transcript = READERS[kind].read(str(path))
    except InputError as exc:
        result.error = exc.message
        return result
    result.seconds = time.process_time() - started
    account = transcript.account
    result.lines = {"total": account.total, "imported": account.imported,
                    "skipped": account.skipped, "unknown": account.unknown,
                    "malformed": account.malformed, "split": account.split}
    result.skip_rules = dict(account.skip_rules)
    result.unknown_types = dict(account.unknown_types)
    turns = archived_turns(transcript)
    result.turns = len(turns)
    cc = cx = None
    if kind == "claude-code":
        cc = cc_facts(path)
        result.version = result.version or cc.version
    else:
        cx = cx_facts(path)
        result.version = result.version or cx.version
    user_texts: list[str] = []
    for turn in turns:
        users = [e for e in turn.events if isinstance(e, UserMessage)]
        user_texts.extend(e.text for e in users)
        result.host_prompts += sum(1 for e in users if _HOST_OPENINGS.match(e.text))
        replies = [e for e in turn.events if isinstance(e, AssistantMessage)]
        if users or not replies:
            continue
        line = replies[0].seq
        has = cc_has_prompt(cc, line) if cc is not None else cx_has_prompt(cx, line) \
            if cx is not None else False
        if has:
            result.promptless_with_prompt.append(line)
        else:
            result.promptless_without += 1
    if cc is not None:
        joined = "\n".join(" ".join(t.split()) for t in user_texts)
        withdrawn = set(cc.withdrawn)
        for index, typed in enumerate(cc.typed):
            result.typed += 1
            if " ".join(typed.split()) in joined:
                result.typed_present += 1
            elif typed in withdrawn:
                result.withdrawn += 1
            else:
                result.missing.append(index)
    return result


# ---------------------------------------------------------------------------------------------
# The whole haystack


def index_rows(haystack: Path, kinds: list[str], limit: int) -> list[tuple[str, Path, str]]:
    rows = []
    with (haystack / "index.tsv").open(newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            kind = row["file"].split("/", 1)[0]
            if kind in kinds:
                rows.append((kind, haystack / row["file"], row.get("version", "")))
    if limit:
        per_kind: Counter[str] = Counter()
        kept = []
        for row in rows:
            if per_kind[row[0]] < limit:
                per_kind[row[0]] += 1
                kept.append(row)
        rows = kept
    return rows


def summarize(results: list[FileResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in sorted({r.kind for r in results}):
        mine = [r for r in results if r.kind == kind]
        read = [r for r in mine if not r.error]
        lines: Counter[str] = Counter()
        rules: Counter[str] = Counter()
        unknown: Counter[str] = Counter()
        unknown_versions: dict[str, set[str]] = defaultdict(set)
        unknown_files: Counter[str] = Counter()
        for r in read:
            lines.update(r.lines)
            rules.update(r.skip_rules)
            unknown.update(r.unknown_types)
            for name in r.unknown_types:
                unknown_versions[name].add(r.version)
                unknown_files[name] += 1
        speeds = [r.size / r.seconds / 1e6 for r in read if r.seconds > 0 and r.size > 1e6]
        versions = sorted({r.version for r in mine if r.version}, key=_version_key)
        promptless = [r for r in read if r.promptless_with_prompt]
        out[kind] = {
            "files": len(mine),
            "filesRead": len(read),
            "refused": [{"path": r.path, "error": r.error} for r in mine if r.error],
            "megabytes": round(sum(r.size for r in mine) / 1e6, 1),
            "versions": {"count": len(versions), "oldest": versions[0] if versions else "",
                         "newest": versions[-1] if versions else ""},
            "lines": dict(lines),
            "skipRules": dict(sorted(rules.items())),
            "unknownTypes": {name: {"lines": n, "files": unknown_files[name],
                                    "versions": sorted(unknown_versions[name],
                                                       key=_version_key)}
                             for name, n in unknown.most_common()},
            "turns": sum(r.turns for r in read),
            "promptlessReplies": {
                "withPrompt": sum(len(r.promptless_with_prompt) for r in read),
                "withPromptFiles": len(promptless),
                "examples": [{"path": r.path, "lines": r.promptless_with_prompt[:5],
                              "version": r.version} for r in promptless[:10]],
                "noPromptInTranscript": sum(r.promptless_without for r in read),
            },
            "hostContextAsPrompt": sum(r.host_prompts for r in read),
            "queued": {
                "typed": sum(r.typed for r in read),
                "present": sum(r.typed_present for r in read),
                "withdrawn": sum(r.withdrawn for r in read),
                "missing": sum(len(r.missing) for r in read),
                # Paths and counts only: the figures file is committed, transcripts' text never.
                "missingFiles": [{"path": r.path, "version": r.version, "missing": len(r.missing)}
                                 for r in read if r.missing][:10],
            },
            "readSpeed": {
                "medianMBps": round(statistics.median(speeds), 1) if speeds else None,
                "totalMBps": round(sum(r.size for r in read) / 1e6
                                   / max(sum(r.seconds for r in read), 1e-9), 1),
                "readerSeconds": round(sum(r.seconds for r in read), 1),
            },
        }
    return out


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def docs_block(summary: dict[str, Any]) -> str:
    """The census as docs/formats.md shows it."""
    lines = [DOCS_BEGIN, "",
             "| | Claude Code | Codex |", "|---|---|---|"]

    def cell(kind: str, fn: Any) -> str:
        return str(fn(summary[kind])) if kind in summary else "–"

    def row(label: str, fn: Any) -> None:
        lines.append(f"| {label} | {cell('claude-code', fn)} | {cell('codex', fn)} |")

    row("files (MB)", lambda s: f"{s['files']:,} ({s['megabytes']:,.0f})")
    row("harness versions", lambda s: f"{s['versions']['count']}: "
                                      f"{s['versions']['oldest']} to {s['versions']['newest']}")
    row("lines", lambda s: f"{s['lines'].get('total', 0):,}")
    row("imported", lambda s: f"{s['lines'].get('imported', 0):,}")
    row("skipped by a named rule", lambda s: f"{s['lines'].get('skipped', 0):,}")
    row("unknown", lambda s: f"{s['lines'].get('unknown', 0):,}")
    row("malformed", lambda s: f"{s['lines'].get('malformed', 0):,}")
    row("split lines", lambda s: f"{s['lines'].get('split', 0):,}")
    row("archived turns", lambda s: f"{s['turns']:,}")
    row("replies cut off a prompt the transcript has",
        lambda s: f"{s['promptlessReplies']['withPrompt']:,}")
    row("replies with no prompt in the transcript",
        lambda s: f"{s['promptlessReplies']['noPromptInTranscript']:,}")
    row("host context taken as a prompt", lambda s: f"{s['hostContextAsPrompt']:,}")
    row("messages typed mid-turn: present / typed",
        lambda s: f"{s['queued']['present']:,} / {s['queued']['typed']:,}"
        + (f" ({s['queued']['withdrawn']} withdrawn, never sent)"
           if s['queued']['withdrawn'] else ""))
    row("reader speed, median file > 1 MB", lambda s: f"{s['readSpeed']['medianMBps']} MB/s")
    lines += ["", DOCS_END]
    return "\n".join(lines)


def write_docs(summary: dict[str, Any]) -> None:
    text = DOCS.read_text(encoding="utf-8")
    start, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if start < 0 or end < 0:
        raise SystemExit(f"{DOCS} has no census block ({DOCS_BEGIN!r} … {DOCS_END!r})")
    DOCS.write_text(text[:start] + docs_block(summary) + text[end + len(DOCS_END):],
                    encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("haystack", nargs="?", type=Path, default=None,
                        help="the fetched haystack (index.tsv, <kind>/*.jsonl)")
    parser.add_argument("--kind", nargs="*", default=sorted(READERS), choices=sorted(READERS))
    parser.add_argument("--limit", type=int, default=0, help="at most N files per kind")
    parser.add_argument("--docs", action="store_true", help="rewrite docs/formats.md's block")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    haystack = args.haystack or find_haystack()
    if haystack is None or not (haystack / "index.tsv").is_file():
        print("no haystack: pass its directory (with index.tsv) or set DSH_HAYSTACK; "
              "/work/shared/eval/README.md says how to fetch it", file=sys.stderr)
        return 2
    rows = index_rows(haystack, args.kind, args.limit)
    results = []
    started = time.perf_counter()
    for done, (kind, path, version) in enumerate(rows, 1):
        results.append(census_file(kind, path, version))
        if done % 100 == 0:
            print(f"  {done}/{len(rows)} files", file=sys.stderr, flush=True)
    summary = summarize(results)
    figures = {"haystack": str(haystack), "python": platform.python_version(),
               "seconds": round(time.perf_counter() - started, 1), "kinds": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    for kind, s in summary.items():
        print(f"{kind}: {s['files']} files, {s['lines'].get('total', 0):,} lines: "
              f"{s['lines'].get('imported', 0):,} imported, {s['lines'].get('skipped', 0):,} "
              f"skipped, {s['lines'].get('unknown', 0):,} unknown, "
              f"{s['lines'].get('malformed', 0):,} malformed; {len(s['refused'])} refused")
        for name, u in list(s["unknownTypes"].items())[:20]:
            print(f"    unknown {name}: {u['lines']} lines in {u['files']} files "
                  f"({', '.join(u['versions'][:3])}{'…' if len(u['versions']) > 3 else ''})")
        p = s["promptlessReplies"]
        print(f"  turns {s['turns']:,}; replies cut off their prompt {p['withPrompt']} "
              f"in {p['withPromptFiles']} files; with no prompt anywhere "
              f"{p['noPromptInTranscript']}; host context as prompt {s['hostContextAsPrompt']}")
        q = s["queued"]
        if q["typed"]:
            print(f"  typed mid-turn {q['typed']}: present {q['present']}, withdrawn "
                  f"{q['withdrawn']}, missing {q['missing']}")
        r = s["readSpeed"]
        print(f"  reader: median {r['medianMBps']} MB/s, overall {r['totalMBps']} MB/s "
              f"({r['readerSeconds']} s)")
    if args.docs:
        write_docs(summary)
        print(f"docs: {DOCS}")
    print(f"figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
