"""`chapters archive`, `import`, `list` and `show`: the local archive.

Every archive and import prints the archive report: counts per line class, chapters written,
artifacts, redactions per family and the composition rule behind each split. A file that is not
a transcript is refused with numbers before anything in the store is touched.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.errors import ChaptersError

from dsh_chapters.app import App
from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import fold, report_lines
from dsh_chapters.services import pool
from dsh_chapters.services.archive import AUTO, archive_and_log, read_transcript, sync_point
from dsh_chapters.services.importing import (
    FOLDER_FILES_COUNTED,
    ImportResult,
    import_sessions,
    source_contents,
)
from dsh_chapters.services.library import (
    chapter_ids,
)

_PROGRESS_WIDTH = 30
WIDE_HELP = ("everything on each line, however long: source paths, full session ids, chapter "
             "paths and why each chapter began")
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
    lines = report_lines(report, ids=chapter_ids(app, (c.path for c in report.chapters)),
                         wide=args.wide)
    inv.emit({**report.to_dict(), "pool": pool.sync_point_json(outcome)},
             fold("\n".join([*lines, *([pool_line] if pool_line else [])]), wide=args.wide))
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


def run_import(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    source = str((inv.cwd / args.source).absolute()) if args.source else None
    progress: _Progress | None = None

    def on_file(done: int, total: int, label: str) -> None:
        nonlocal progress
        if progress is None:
            progress = _Progress(inv, total)
        progress.show(done, label)

    result = import_sessions(app, args.harness, source=source,
                             final=bool(getattr(args, "final", False)), on_file=on_file)
    if progress is not None:
        progress.close()
    if not result.files:
        raise _nothing_found(app, args.harness, result.where, source)
    inv.emit(import_json(result), fold("\n".join(import_lines(app, result, wide=args.wide)),
                                       wide=args.wide))
    if result.failures:
        raise ChaptersError(f"{len(result.failures)} of {len(result.files)} session file(s) "
                            "could not be read",
                            hint="see each file's reason above; the others were archived")
    return 0


def _nothing_found(app: App, harness: str, where: str, source: str | None) -> ChaptersError:
    """No session file: of this project where the harness keeps them, or under `--source`,
    where the error says what the folder holds instead and how the harness names its files."""
    if source is None:
        return ChaptersError(f"no {harness} session of {app.workspace} found under {where} "
                             "(0 files)", hint="pass --source DIR to import from another directory")
    held = source_contents(app, harness, source)
    if not held.files:
        what = "it holds no file"
    elif held.files == 1:
        what = f"its one file, {held.example}, is not one"
    else:
        count = (f"{held.files:,}" if held.files < FOLDER_FILES_COUNTED
                 else f"{FOLDER_FILES_COUNTED:,} or more")
        what = f"none of its {count} files is one (such as {held.example})"
    named = (f"{harness} names its session files {held.session_files}: "
             if held.session_files else "")
    return ChaptersError(f"no {harness} session file under {where}: {what}",
                         hint=f"{named}pass --source the directory that holds them")


def import_json(result: ImportResult) -> dict[str, Any]:
    return {"harness": result.harness, "sessions": len(result.files),
            "imported": len(result.reports), "chapters": result.chapters,
            "turnsArchived": result.turns, "from": result.where,
            "reports": [r.to_dict() for r in result.reports],
            "failures": [{"path": p, "error": m} for p, m in result.failures],
            "pool": pool.sync_point_json(result.outcome)}


def import_lines(app: App, result: ImportResult, *, wide: bool = False,
                 reports: bool = True) -> list[str]:
    """An import's report: each session's (unless `reports` is off), then the totals."""
    lines: list[str] = []
    if reports:
        ids = chapter_ids(app, (c.path for r in result.reports for c in r.chapters))
        for report in result.reports:
            lines.extend(report_lines(report, ids=ids, wide=wide))
    lines.append(f"imported {len(result.reports)} of {len(result.files)} {result.harness} "
                 f"session(s): {result.turns} turn(s) into {result.chapters} new chapter(s)")
    unknown = sorted({name for r in result.reports for name, _ in r.account.unknown_types})
    if unknown:
        held = sum(1 for r in result.reports if r.account.unknown_types)
        lines.append(f"{held} session(s) hold record types this reader does not know "
                     f"({', '.join(unknown[:5])}{', …' if len(unknown) > 5 else ''}): "
                     "`chapters doctor` lists them")
    for path, message in result.failures:
        lines.append(f"  failed {path}: {message}")
    if pool.describe_sync_point(result.outcome):
        lines.append(pool.describe_sync_point(result.outcome))
    if result.chapters:
        lines.append("`chapters list` shows every chapter with its id; "
                     "`chapters show <id>` prints one")
    return lines


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
    archive.add_argument("--wide", action="store_true", help=WIDE_HELP)
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
    imp.add_argument("--wide", action="store_true", help=WIDE_HELP)
    imp.set_defaults(run=run_import)
