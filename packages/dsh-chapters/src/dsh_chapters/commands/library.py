"""`chapters list` and `chapters show`: the store's chapters, read (services/library.py).

A family of their own: listing and printing chapters never loads the archive path (the
readers, the composition and the redaction engine)."""

from __future__ import annotations

import argparse
from typing import Any

from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.notice import chapter_ended

from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import clip
from dsh_chapters.services.library import (
    chapter_number,
    chapters,
    read_chapter,
    sessions_by_date,
)

# ---------------------------------------------------------------------------------------------
# chapters list


def _messages_text(messages: dict[str, int]) -> str:
    order = ["user", "assistant", "tool", *sorted(set(messages) - {"user", "assistant", "tool"})]
    shown = [f"{messages[role]} {role}" for role in order if role in messages]
    return " · ".join(shown) or "no messages"


def _when(date: str) -> str:
    """`2026-01-27T09:19:03Z` as `2026-01-27 09:19` (the minute is what a reader scans)."""
    return date[:16].replace("T", " ") if date else "-"


def run_list(args: argparse.Namespace, inv: Invocation) -> int:
    if args.pool:
        from dsh_chapters.commands.pool import run_list_pool  # the pool's family, when asked

        return run_list_pool(args, inv)
    app = inv.app
    prefix = app.store_dir()
    sessions = sessions_by_date(chapters(app))
    rows: list[dict[str, Any]] = [{
        "id": s.chapter_id(d), "session": s.short, "number": chapter_number(d), "date": d.date,
        "title": d.title, "messages": dict(d.messages), "topics": list(d.topics),
        "path": f"{prefix}/{d.path}", "sessionId": d.session_id, "ended": chapter_ended(d),
    } for s in sessions for d in s.chapters]
    if not rows:
        inv.emit(rows, f"no chapters in {app.store_root} yet; run `chapters import claude-code` "
                       "(or codex, dsh) or `chapters archive PATH`")
        return 0
    by_path = {r["path"]: r for r in rows}
    text: list[str] = []
    for s in sessions:
        count = len(s.chapters)
        text.append(clip(f"{s.short}  {_when(s.started)}  {count} chapter{'s' * (count != 1)}  "
                         f"{s.chapters[0].title}", wide=args.wide))
        for d in s.chapters:
            r = by_path[f"{prefix}/{d.path}"]
            note = "  (last turn unfinished)" if r["ended"] else ""
            line = f"  {r['id']:<{len(s.short) + 4}}  {_when(d.date)[11:] or '-':<5}  {d.title}"
            if args.wide:
                text.append(f"{line}{note}  ({_messages_text(r['messages'])})  "
                            f"[{', '.join(r['topics'])}]  {r['path']}")
            else:
                text.append(clip(line, keep=note))
    text.append(f"{len(rows)} chapter(s) in {len(sessions)} session(s) in {prefix}/ · "
                "`chapters show <id>` prints one")
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
    lst = subparsers.add_parser(
        "list", parents=[common], help="one line per archived chapter",
        description="This store's chapters, grouped by session in the order the sessions "
                    "started: a line per session (its short id, start, chapter count and first "
                    "title), then a line per chapter with the id that `show`, `artifact` and the "
                    "viewer take (<session>/<n>). --wide adds message counts, topics and paths.")
    lst.add_argument("--pool", action="store_true",
                     help="list the pool mirror's chapters of this project instead")
    lst.add_argument("--wide", action="store_true",
                     help="everything on each line, however long: message counts, topics, path")
    lst.set_defaults(run=run_list)

    show = subparsers.add_parser(
        "show", parents=[common], help="print one chapter",
        description="Print a chapter. ID is the id `chapters list` prints (<session>/<n>: the "
                    "first characters of the session and the chapter's number), a bare number "
                    "when only one session has it, or a chapter's path.")
    show.add_argument("id", metavar="ID|PATH", help="which chapter")
    show.add_argument("--line", type=int, default=None, metavar="L",
                      help="open at this 1-based line (a search anchor's L<line>), "
                           "printing artifactReadDefaultLines lines")
    show.set_defaults(run=run_show)
