"""Census of the Cursor, Copilot CLI and Aider readers over real public session files.

For every file: its lines imported / skipped (by rule) / unknown (by type) / malformed, the
prompts and replies the file holds (found here from the raw file, not by the reader) and
whether each is in the transcript verbatim, the chapters a final archive of the file writes
into a fresh store (zero-chapter files are listed with what they hold), and the harness kit's
checks run on the real file as on a fixture (prefixes never complete a turn the whole file
lacks, a half-written last line, re-reads, damaged copies). Targets: 0 unknown, 0 malformed,
every prompt and reply present, every kit check passed.

    python benchmarks/census_cursor_copilot_aider.py [--data DIR]
    python benchmarks/census_cursor_copilot_aider.py --assemble-aider MIRRORS [--data DIR]

`DIR` (default `$DSH_OTHERS_DATA`, else `/work/data/others`) holds `cursor-agent/*.jsonl` and
`copilot-cli/*.jsonl` as `../shared/eval/fetch_haystack.py --tsv ../shared/eval/other_agents.tsv`
writes them, and `aider/*.md`: `--assemble-aider` writes those from the public repositories
`aider_histories.tsv` lists (each brought with the search tool's `fetch`; MIRRORS holds
`<owner>+<name>/repo`), checking each file's sha256. The files are other people's text: they
are read here and never committed. Writes `benchmarks/results/census_cursor_copilot_aider.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh_chapters.bootstrap import bootstrap
from dsh_chapters.services.archive import archive_and_log
from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    Reasoning,
    ToolResult,
    Transcript,
    UserMessage,
)
from dsh_chapters_core.testing.harness_contract import (
    HARNESS_CHECKS,
    HarnessContractError,
    HarnessSample,
    run_harness_check,
)
from dsh_chapters_core.turns import split_turns
from dsh_chapters_harness.aider import AiderReader
from dsh_chapters_harness.copilot_cli import CopilotCliReader
from dsh_chapters_harness.cursor import CursorReader

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "census_cursor_copilot_aider.json"
AIDER_TSV = HERE / "aider_histories.tsv"
DEFAULT_DATA = os.environ.get("DSH_OTHERS_DATA", "/work/data/others")

Expected = tuple[list[str], list[str]]  # (prompts, replies) as the raw file holds them
# The harness kit's checks that need no list of texts, run on each real file as on a fixture:
# its line-boundary prefixes never complete a turn the whole file does not have, and so on.
KIT_CHECKS = tuple(c for c in HARNESS_CHECKS if c.name in {
    "every_line_accounted", "completeness_guard", "idempotent_reread", "truncated_last_line",
    "bad_input"})
KIT_PREFIXES = 24


# ---- what each file holds, read from the raw bytes ----------------------------------------
def copilot_expected(raw: str) -> Expected:
    prompts, replies = [], []
    for line in raw.splitlines():
        record = json.loads(line)
        data = record.get("data") or {}
        if record.get("type") == "user.message" and not data.get("source") \
                and not data.get("isAutopilotContinuation") and (data.get("content") or "").strip():
            prompts.append(data["content"])
        if record.get("type") == "assistant.message" and (data.get("content") or "").strip():
            replies.append(data["content"])
    return prompts, replies


_TYPED = re.compile(r"<user_query>\n([\s\S]*?)\n</user_query>")


def cursor_expected(raw: str) -> Expected:
    prompts, replies = [], []
    for line in raw.splitlines():
        record = json.loads(line)
        content = (record.get("message") or {}).get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            text = block.get("text") if block.get("type") == "text" else None
            if not isinstance(text, str) or not text.strip():
                continue
            if record.get("role") == "user":
                prompts.extend(_TYPED.findall(text))
            elif record.get("role") == "assistant":
                replies.append(text)
    return prompts, replies


_REASONING_TAG = re.compile(r"</?thinking-content-[0-9a-f]+>")


def aider_expected(raw: str) -> Expected:
    """Typed inputs (runs of `#### ` lines) and the lines of everything aider did not prefix."""
    prompts: list[str] = []
    replies: list[str] = []
    typed: list[str] = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        if line.startswith("#### ") and line.endswith("  "):
            typed.append(line[4:][:-2].removeprefix(" "))  # `####  ` is an empty last line
            continue
        if typed:
            prompts.append("\n".join(typed))
            typed = []
        if line.startswith(("# aider chat started", "# Aider chat started", "> ")) \
                or not line.strip() or _REASONING_TAG.fullmatch(line.strip()):
            continue
        replies.append(line.strip())
    if typed:
        prompts.append("\n".join(typed))
    return [p for p in prompts if p != "<blank>"], replies


# ---- the census ---------------------------------------------------------------------------
HARNESSES: dict[str, tuple[str, Callable[[], Any], Callable[[str], Expected], str, str]] = {
    # name: (data folder, reader, what the raw file holds, files, the name the kit writes)
    "cursor": ("cursor-agent", CursorReader, cursor_expected, "*.jsonl", "t.jsonl"),
    "copilot-cli": ("copilot-cli", CopilotCliReader, copilot_expected, "*.jsonl",
                    "s/events.jsonl"),
    "aider": ("aider", AiderReader, aider_expected, "*.md", ".aider.chat.history.md"),
}


def _said(transcript: Transcript) -> tuple[set[str], str]:
    """The prompts as typed (user messages, commands) and every text a reply can be in."""
    prompts = {e.text for e in transcript.events if isinstance(e, UserMessage)}
    prompts |= {e.command for e in transcript.events if isinstance(e, CommandRun)}
    prompts |= {e.text for e in transcript.events if isinstance(e, ToolResult)}  # confirmations
    texts = [e.text for e in transcript.events
             if isinstance(e, AssistantMessage | Reasoning | ToolResult)]
    # Aider's multi-line messages (a `/map`, an edit error) go on without their `> `: a
    # command's output holds them when a command printed them.
    texts += [e.output for e in transcript.events if isinstance(e, CommandRun)]
    return prompts, "\n".join(texts)


def _workspace(root: Path) -> Path:
    ws = root / "census"
    (ws / ".git").mkdir(parents=True)
    (ws / ".dsh-chapters").mkdir()
    (ws / ".dsh-chapters" / "config.toml").write_text(
        'projectKey = "github.com/census/others"\nharnessId = "census"\n', encoding="utf-8")
    return ws


def kit_failures(path: Path, make_reader: Callable[[], Any], turns: int,
                 filename: str) -> list[str]:
    """The kit's checks that fail on this real file (their names and first words)."""
    sample = HarnessSample(filename=filename, data=path.read_bytes(), texts=(), turns=turns,
                           max_prefixes=KIT_PREFIXES)
    failed = []
    for check in KIT_CHECKS:
        try:
            run_harness_check(check, make_reader, sample)
        except HarnessContractError as exc:
            failed.append(str(exc)[:120])
    return failed


def census_file(path: Path, reader: Any, expect: Callable[[str], Expected],
                scratch: Path, env: dict[str, str]) -> dict[str, Any]:
    started = time.perf_counter()
    transcript = reader.read(str(path))
    read_s = time.perf_counter() - started
    raw = path.read_bytes().decode("utf-8", "replace")
    prompts, replies = expect(raw)
    said_prompts, reply_text = _said(transcript)
    missing_prompts = [p for p in prompts if p not in said_prompts]
    missing_replies = [r for r in replies if r not in reply_text]
    for what, missing in (("prompt", missing_prompts), ("reply", missing_replies)):
        for text in missing[:2]:  # on the terminal only: the results file holds no one's text
            print(f"  {path.name}: {what} not verbatim: {text[:80]!r}", file=sys.stderr)
    ws = _workspace(scratch / path.stem)
    report = archive_and_log(bootstrap(ws, env), transcript, final=True)
    account = transcript.account
    split = split_turns(transcript.events)
    return {
        "file": path.name, "lines": account.total, "imported": account.imported,
        "skipped": account.skipped, "unknown": account.unknown, "malformed": account.malformed,
        "truncatedTail": account.truncated_tail,
        "skipRules": dict(account.skip_rules), "unknownTypes": dict(account.unknown_types),
        "prompts": len(prompts), "promptsPresent": len(prompts) - len(missing_prompts),
        "replies": len(replies), "repliesPresent": len(replies) - len(missing_replies),
        "turnsComplete": len(split.complete), "chapters": len(report.chapters),
        "turnsArchived": report.turns_archived, "readSeconds": round(read_s, 4),
    }


def census(data: Path, names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="census-") as tmp:
        env = {**os.environ, "DSH_HOME": str(Path(tmp) / "dsh-home"),
               "HOME": str(Path(tmp) / "home")}
        for name in names:
            folder, make_reader, expect, pattern, kit_name = HARNESSES[name]
            files = sorted((data / folder).glob(pattern))
            rows = [census_file(p, make_reader(), expect, Path(tmp) / name, env) for p in files]
            for path, row in zip(files, rows, strict=True):
                row["kitFailures"] = kit_failures(path, make_reader, row["turnsComplete"],
                                                  kit_name)
            rules: Counter[str] = Counter()
            unknown: Counter[str] = Counter()
            for row in rows:
                rules.update(row["skipRules"])
                unknown.update(row["unknownTypes"])
            total = {key: sum(r[key] for r in rows) for key in (
                "lines", "imported", "skipped", "unknown", "malformed", "prompts",
                "promptsPresent", "replies", "repliesPresent", "turnsComplete", "chapters")}
            out[name] = {
                "folder": folder, "files": len(rows), **total,
                "skipRules": dict(sorted(rules.items())), "unknownTypes": dict(unknown),
                "malformedFiles": [r["file"] for r in rows if r["malformed"]],
                "kitChecks": len(rows) * len(KIT_CHECKS),
                "kitChecksFailed": sum(len(r["kitFailures"]) for r in rows),
                "zeroChapterFiles": [{"file": r["file"], "prompts": r["prompts"],
                                      "replies": r["replies"], "lines": r["lines"]}
                                     for r in rows if r["chapters"] == 0],
                "readSecondsMedian": sorted(r["readSeconds"] for r in rows)[len(rows) // 2]
                if rows else 0.0,
                "rows": rows,
            }
    return out


def assemble_aider(mirrors: Path, data: Path) -> int:
    """`data/aider/NNNNN.md` from the mirrors, each checked against its sha256."""
    target = data / "aider"
    target.mkdir(parents=True, exist_ok=True)
    rows = [line.split("\t") for line in AIDER_TSV.read_text().splitlines()[1:] if line]
    index = ["file\trepo\tcommit\tpath"]
    for n, (repo, commit, path, sha, _size) in enumerate(rows):
        git_dir = mirrors / repo.replace("/", "+") / "repo"
        body = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"],
                              capture_output=True, check=True).stdout
        if hashlib.sha256(body).hexdigest() != sha:
            raise SystemExit(f"{repo} {commit}:{path}: sha256 differs from aider_histories.tsv")
        name = f"{n:05d}.md"
        (target / name).write_bytes(body)
        index.append(f"aider/{name}\t{repo}\t{commit}\t{path}")
    (target / "index.tsv").write_text("\n".join(index) + "\n")
    return len(rows)


def _line(name: str, figures: dict[str, Any]) -> str:
    return (f"{name:12} {figures['files']:3} files {figures['lines']:6} lines: "
            f"{figures['imported']} imported, {figures['skipped']} skipped, "
            f"{figures['unknown']} unknown, {figures['malformed']} malformed; prompts "
            f"{figures['promptsPresent']}/{figures['prompts']}, replies "
            f"{figures['repliesPresent']}/{figures['replies']}; {figures['chapters']} chapters, "
            f"{len(figures['zeroChapterFiles'])} zero-chapter files; kit checks "
            f"{figures['kitChecks'] - figures['kitChecksFailed']}/{figures['kitChecks']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="the real files (see above)")
    parser.add_argument("--assemble-aider", metavar="MIRRORS",
                        help="first write DIR/aider/ from the mirrors of aider_histories.tsv")
    parser.add_argument("names", nargs="*", default=list(HARNESSES),
                        help=f"any of {', '.join(HARNESSES)} (default: all)")
    args = parser.parse_args(argv)
    data = Path(args.data)
    if args.assemble_aider:
        print(f"assembled {assemble_aider(Path(args.assemble_aider), data)} aider histories")
    missing = [HARNESSES[n][0] for n in args.names if not (data / HARNESSES[n][0]).is_dir()]
    if missing:
        print(f"{data} has no {', '.join(missing)} folder: see this script's docstring",
              file=sys.stderr)
        return 2
    figures = census(data, args.names)
    RESULTS.parent.mkdir(exist_ok=True)
    # A run of some harnesses keeps the others' last figures.
    kept = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"summary": {}, "files": {}}
    for name, f in figures.items():
        kept["summary"][name] = {k: v for k, v in f.items() if k != "rows"}
        kept["files"][name] = f["rows"]
    RESULTS.write_text(json.dumps(kept, indent=2, ensure_ascii=False) + "\n")
    for name, f in figures.items():
        print(_line(name, f))
    print(f"figures: {RESULTS.relative_to(HERE.parent)}")
    bad = [n for n, f in figures.items() if f["unknown"] or f["malformed"] or f["kitChecksFailed"]
           or f["promptsPresent"] != f["prompts"] or f["repliesPresent"] != f["replies"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
