"""`chapters watch`: one foreground process that archives this project's sessions live.

It watches the session folders of every agent it reads (Aider's: its history file), through
the kernel (inotify, via watchfiles: no polling loop), archives the completed turns of a
transcript within a few seconds of their end, finalizes a session whose file has been idle for
`sessionFinalAfterMinutes`, and pushes with the debounce of §5.2.
SIGTERM (or Ctrl-C) stops it between two archives: an archive that has begun always finishes.
`--once` archives what is pending and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import ChaptersError, UsageError

from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import display_path, fold

ALL = "all"
BUILT_IN = ("claude-code", "codex", "dsh", "gemini-cli", "opencode", "pi", "cursor",
            "copilot-cli", "aider")


@contextlib.contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT only set `stop`; the loop ends at its next wait, between archives."""
    if threading.current_thread() is not threading.main_thread():
        yield  # in a worker thread (tests): the caller sets `stop` itself
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, lambda _signum, _frame: stop.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _lines(done: Sequence[Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for item in done:
        if item.error:
            rows.append({"event": "error", "harness": item.harness, "path": item.path,
                         "error": item.error})
        elif item.report is not None and not item.report.wrote_nothing:
            r = item.report
            rows.append({"event": "archived", "harness": item.harness, "path": item.path,
                         "turnsArchived": r.turns_archived, "chapters": len(r.chapters),
                         "final": bool(r.ended), "clamp": r.clamp})
    return rows


def _say(inv: Invocation, row: dict[str, Any]) -> None:
    if inv.json:
        inv.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        inv.stdout.flush()
        return
    # Paths as a person reads them (`~/.claude/projects/…`), lines folded to 100 columns.
    home = Path(inv.env["HOME"]) if inv.env.get("HOME") else Path.home()

    def shown(path: str) -> str:
        return display_path(path, inv.cwd, home)

    if row["event"] == "archived":
        mark = " (final: its unfinished last turn too)" if row["final"] else ""
        text = (f"archived {shown(row['path'])}: {row['turnsArchived']} turn(s) into "
                f"{row['chapters']} chapter(s){mark}")
    elif row["event"] == "error":
        text = f"skipped {shown(row['path'])}: {row['error']}"
    elif row["event"] == "watching":
        text = "watching " + ", ".join(shown(r) for r in row["roots"])
    else:
        text = str(row["text"])
    inv.stdout.write(fold(text) + "\n")
    inv.stdout.flush()


def run_watch(args: argparse.Namespace, inv: Invocation,
              stop: threading.Event | None = None) -> int:
    from dsh_chapters_harness.watch import WatchTiming, existing_roots, session_changes

    from dsh_chapters.services.live_archive import LiveArchive

    app = inv.app
    wanted = BUILT_IN if args.harness == ALL else (args.harness,)
    missing = [name for name in wanted if name not in app.harnesses]
    if missing:
        raise UsageError(f"--harness {args.harness}: no reader for {', '.join(missing)} "
                         f"(installed: {', '.join(app.harnesses)})",
                         hint="pick one of the installed readers, or `all`")
    live = LiveArchive(app, tuple(n for n in wanted if n in app.harnesses))
    live.discover()
    stop = stop if stop is not None else threading.Event()

    def point(done: Sequence[Any]) -> None:
        for row in _lines(done):
            _say(inv, row)
        line = live.sync_point()
        if line:
            _say(inv, {"event": "pool", "text": line.strip()})

    if args.once:
        point(live.pass_over())  # what is pending now
        return 0
    roots = existing_roots(live.roots())
    timing = WatchTiming(debounce_ms=app.config.watch_debounce_ms,
                         tick_ms=app.config.watch_idle_check_seconds * 1000)
    if not roots:
        point(live.pass_over())
        looked = [str(r) for r in live.roots()]
        raise ChaptersError(
            f"nothing to watch: none of the {len(looked)} session folder(s) exists "
            f"({', '.join(looked)})",
            hint="run the agent once so that it creates its folder, then `chapters watch` again")
    with _stopped_by_signals(stop):
        for changed in session_changes(roots, timing, stop):
            if changed is None:  # the kernel watch is live: catch up on what is pending
                point(live.pass_over())
                _say(inv, {"event": "watching", "roots": [str(r) for r in roots],
                           "text": "watching " + ", ".join(map(str, roots))})
                continue
            point(live.pass_over(changed))
            if stop.is_set():
                break
    _say(inv, {"event": "stopped", "text": "stopped"})
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    watch = subparsers.add_parser(
        "watch", parents=[common], help="archive this project's sessions as they are written",
        description="Watch this project's Claude Code, Codex, DSH, Gemini CLI, OpenCode, pi, "
                    "Cursor and Copilot CLI session folders and Aider's chat history "
                    "(inotify; no polling) and archive each completed turn within seconds of "
                    "its end; a session idle for sessionFinalAfterMinutes is archived whole. "
                    "Pushes with the sync debounce. SIGTERM stops it between archives.")
    watch.add_argument("--once", action="store_true",
                       help="archive what is pending, then exit")
    watch.add_argument("--harness", default=ALL, metavar="all|" + "|".join(BUILT_IN),
                       help="whose sessions to watch (default: all)")
    watch.set_defaults(run=run_watch)
