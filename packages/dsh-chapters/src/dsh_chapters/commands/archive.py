"""`chapters archive`, `import`, `list` and `show`: the local archive.

Every archive and import prints the archive report: counts per line class, chapters written,
artifacts, redactions per family and the composition rule behind each split. A file that is not
a transcript is refused with numbers before anything in the store is touched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_chapters_core.archive import ArchiveReport
from dsh_chapters_core.errors import ChaptersError, InputError, UsageError
from dsh_chapters_core.notice import chapter_ended

from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.commands.pool import run_list_pool
from dsh_chapters.present import report_lines
from dsh_chapters.services import finality, pool
from dsh_chapters.services.archive import AUTO, archive_and_log, read_transcript, sync_point
from dsh_chapters.services.library import chapter_number, chapters, read_chapter
from dsh_chapters.services.transcripts import read_guarded

_PROGRESS_WIDTH = 30
FINAL_HELP = ("the session is over: archive its unfinished last turn too, marked "
              "`ended: incomplete-turn`")


# ---------------------------------------------------------------------------------------------
# chapters archive PATH


def run_archive(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    path = (inv.cwd / args.path).absolute()
    transcript = read_transcript(app, path, args.harness)  # refuses before the store is touched
    report = archive_and_log(app, transcript, final=bool(getattr(args, "final", False)))
    outcome = sync_point(app)
    pool_line = pool.describe_sync_point(outcome)
    inv.emit({**report.to_dict(), "pool": pool.sync_point_json(outcome)},
             "\n".join([*report_lines(report), *([pool_line] if pool_line else [])]))
    return 0


# ---------------------------------------------------------------------------------------------
# chapters import dsh|claude-code|codex [--source DIR]


@dataclass
class _Progress:
    """A one-line bar on stderr, shown only when stderr is a terminal."""

    inv: Invocation
    total: int
    enabled: bool = field(init=False)

    def __post_init__(self) -> None:
        isatty = getattr(self.inv.stderr, "isatty", None)
        self.enabled = bool(isatty and isatty()) and self.total > 0

    def show(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        filled = _PROGRESS_WIDTH * done // self.total
        bar = "#" * filled + "-" * (_PROGRESS_WIDTH - filled)
        self.inv.stderr.write(f"\r[{bar}] {done}/{self.total} {label[:40]:<40}")
        self.inv.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self.inv.stderr.write("\n")
            self.inv.stderr.flush()


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def run_import(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    reader = app.harnesses.get(args.harness)
    if reader is None:
        from dsh_chapters.plugins import missing_reader_hint

        raise UsageError(f"import {args.harness}: no such reader (installed: "
                         f"{', '.join(app.harnesses) or 'none'})",
                         hint=missing_reader_hint(args.harness)
                         or "run `chapters import claude-code` or `chapters import codex`")
    source = str((inv.cwd / args.source).absolute()) if args.source else None
    if source is not None and not Path(source).is_dir():
        raise UsageError(f"--source {args.source}: not a directory",
                         hint="pass the directory that holds the session files")
    files = reader.discover(source, str(app.workspace))
    if not files:
        where = source or f"the default {args.harness} location"
        raise ChaptersError(f"no {args.harness} session of {app.workspace} found under {where} "
                            "(0 files)", hint="pass --source DIR to import from another directory")
    progress = _Progress(inv, len(files))
    reports: list[ArchiveReport] = []
    failures: list[tuple[str, str]] = []
    counted: set[str] = set()
    with contextlib.ExitStack() as batch:
        held = 0  # transcript bytes archived in the open writer section
        for done, file in enumerate(files):
            progress.show(done, Path(file).name)
            if not held:
                # Sessions are archived a batch to a writer section: as each batch ends, the
                # search index takes in what it wrote (search.md "The freshness rule").
                batch.enter_context(app.lock.hold(app.config.lock_timeout_ms / 1000))
            # A session inside one file (OpenCode's database) is as idle as that file.
            backing = getattr(reader, "backing_file", None)
            stands_for = backing(file) if callable(backing) else file
            try:
                final = (bool(getattr(args, "final", False))
                         or finality.is_finished(stands_for, app.config))
                reports.append(archive_and_log(app, read_guarded(app, reader, file),
                                               final=final))
            except InputError as exc:  # one unreadable session never stops the others
                failures.append((file, exc.message))
            # A file holding many sessions counts once, with its first.
            held += max(_size(stands_for) if stands_for not in counted else 0, 1)
            counted.add(stands_for)
            if held >= app.config.import_batch_bytes:
                batch.close()
                held = 0
    progress.show(len(files), "done")
    progress.close()
    outcome = sync_point(app) if reports else None  # §5.1, as for archive
    chapters = sum(len(r.chapters) for r in reports)
    turns = sum(r.turns_archived for r in reports)
    data = {"harness": args.harness, "sessions": len(files), "imported": len(reports),
            "chapters": chapters, "turnsArchived": turns,
            "reports": [r.to_dict() for r in reports],
            "failures": [{"path": p, "error": m} for p, m in failures],
            "pool": pool.sync_point_json(outcome)}
    lines: list[str] = []
    for report in reports:
        lines.extend(report_lines(report))
    lines.append(f"imported {len(reports)} of {len(files)} {args.harness} session(s): "
                 f"{turns} turn(s) into {chapters} new chapter(s)")
    for path, message in failures:
        lines.append(f"  failed {path}: {message}")
    if pool.describe_sync_point(outcome):
        lines.append(pool.describe_sync_point(outcome))
    inv.emit(data, "\n".join(lines))
    if failures:
        raise ChaptersError(f"{len(failures)} of {len(files)} session file(s) could not be read",
                            hint="see each file's reason above; the others were archived")
    return 0


# ---------------------------------------------------------------------------------------------
# chapters list


def _messages_text(messages: dict[str, int]) -> str:
    order = ["user", "assistant", "tool", *sorted(set(messages) - {"user", "assistant", "tool"})]
    shown = [f"{messages[role]} {role}" for role in order if role in messages]
    return " · ".join(shown) or "no messages"


def run_list(args: argparse.Namespace, inv: Invocation) -> int:
    if args.pool:
        return run_list_pool(args, inv)
    app = inv.app
    prefix = app.store_dir()
    rows: list[dict[str, Any]] = [{
        "number": chapter_number(d), "date": d.date, "title": d.title, "messages": dict(d.messages),
        "topics": list(d.topics), "path": f"{prefix}/{d.path}", "sessionId": d.session_id,
        "ended": chapter_ended(d),
    } for d in chapters(app)]
    if not rows:
        inv.emit(rows, f"no chapters in {app.store_root} yet; run `chapters archive PATH` or "
                       "`chapters import claude-code`")
        return 0
    text = [f"{r['number']:03d}  {r['date'][:16] or '-':<16}  {r['title']}  "
            f"({_messages_text(r['messages'])})  "
            f"[{', '.join(r['topics'])}]  {r['path']}"
            + (f"  (ended: {r['ended']})" if r["ended"] else "") for r in rows]
    text.append(f"{len(rows)} chapter(s) in {app.store_root}")
    inv.emit(rows, "\n".join(text))
    return 0


# ---------------------------------------------------------------------------------------------
# chapters show ID|PATH


def run_show(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    # A store path, a mirror path as search prints it, or a short id; read through the read
    # doors' one containment check (never an internal or quarantined file).
    path, text = read_chapter(app, args.id, inv.cwd)
    if args.line is not None:  # a search anchor's line: open the chapter there (search.md)
        text, first = _from_line(text, args.line, app.config.artifact_read_default_lines)
        if inv.json:
            inv.emit({"path": path, "line": first, "text": text})
        else:
            inv.stdout.write(text)
        return 0
    if inv.json:
        inv.emit({"path": path, "text": text})
    else:
        inv.stdout.write(text)
    return 0


def _from_line(text: str, line: int, count: int) -> tuple[str, int]:
    """`count` lines of `text` from 1-based `line`, counted as search anchors count them: a
    line is what `\n` ends (a `\r` inside one is text)."""
    pieces = text.split("\n")
    lines = [p + "\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    if line < 1 or line > len(lines):
        raise UsageError(f"--line {line} is outside the chapter (lines 1..{len(lines)})",
                         hint="pass a line from a search anchor (`L<line>:`)")
    return "".join(lines[line - 1:line - 1 + count]), line


# ---------------------------------------------------------------------------------------------


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    archive = subparsers.add_parser(
        "archive", parents=[common], help="archive one session file into chapters",
        description="Archive the completed, not yet archived turns of one session file "
                    "(DSH event log, Claude Code or Codex transcript) into topic chapters under "
                    ".dsh-chapters/. No model, no network; running it again writes nothing new.")
    archive.add_argument("path", help="the session file (.jsonl)")
    archive.add_argument("--harness", default=AUTO,
                         metavar="auto|dsh|claude-code|codex|gemini-cli|opencode|pi|cursor|"
                                 "copilot-cli|aider",
                         help="the file's format (default: auto, from its first bytes)")
    archive.add_argument("--final", action="store_true", help=FINAL_HELP)
    archive.set_defaults(run=run_archive)

    imp = subparsers.add_parser(
        "import", parents=[common], help="archive every session of this project",
        description="Archive every DSH session of this project (under $DSH_HOME/sessions, "
                    "by its normalized cwd and the log's own cwd), every Claude Code session of "
                    "this project (matched by its directory) or every Codex rollout whose cwd is "
                    "this project; every Gemini CLI, OpenCode, pi, Cursor (transcripts and IDE "
                    "chats) or Copilot CLI session or Aider chat history of this project "
                    "(docs/formats.md says where each keeps them); with --source, every session "
                    "file under DIR. Re-running adds no file.")
    imp.add_argument("harness",
                     metavar="dsh|claude-code|codex|gemini-cli|opencode|pi|cursor|copilot-cli|"
                             "aider",
                     help="whose sessions to import")
    imp.add_argument("--source", metavar="DIR", help="import the session files under DIR")
    imp.add_argument("--final", action="store_true",
                     help=FINAL_HELP + "; without it, a file idle for sessionFinalAfterMinutes "
                          "counts as over")
    imp.set_defaults(run=run_import)

    lst = subparsers.add_parser(
        "list", parents=[common], help="one line per archived chapter",
        description="One line per chapter: number, date, title, message counts, topics, path.")
    lst.add_argument("--pool", action="store_true",
                     help="list the pool mirror's chapters of this project instead")
    lst.set_defaults(run=run_list)

    show = subparsers.add_parser(
        "show", parents=[common], help="print one chapter",
        description="Print a chapter. ID is a path, a store path, <session>/<NNN> or NNN.")
    show.add_argument("id", metavar="ID|PATH", help="which chapter")
    show.add_argument("--line", type=int, default=None, metavar="L",
                      help="open at this 1-based line (a search anchor's L<line>), "
                           "printing artifactReadDefaultLines lines")
    show.set_defaults(run=run_show)
