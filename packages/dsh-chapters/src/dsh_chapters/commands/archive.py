"""`chapters archive`, `import`, `list`, `show` and `status`: the local archive (issue #3).

Every archive and import prints the archive report: counts per line class, chapters written,
artifacts, redactions per family and the composition rule behind each split. A file that is not
a transcript is refused with numbers before anything in the store is touched.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_chapters_core.archive import ArchivedChapter, ArchiveReport, archive_transcript
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.errors import ChaptersError, InputError, UsageError
from dsh_chapters_core.events import Transcript
from dsh_chapters_core.ports.harness import HarnessReader

from dsh_chapters import enrichment, knowledge_pool
from dsh_chapters.bootstrap import App, bootstrap
from dsh_chapters.cli import Invocation

AUTO = "auto"
# Bytes a reader's `sniff` sees: a Codex header line can hold a whole AGENTS.md (tens of KB).
SNIFF_BYTES = 1 << 20
_PROGRESS_WIDTH = 30


def _app(inv: Invocation) -> App:
    return bootstrap(inv.cwd, inv.env)


# ---------------------------------------------------------------------------------------------
# Reading a transcript


def _head(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(SNIFF_BYTES)


def choose_reader(app: App, path: Path, harness: str) -> HarnessReader:
    """The reader `--harness` names, or (auto) the first whose `sniff` accepts the file."""
    if harness != AUTO:
        reader = app.harnesses.get(harness)
        if reader is None:
            known = ", ".join([AUTO, *app.harnesses]) or AUTO
            raise UsageError(f"--harness {harness}: no such reader (installed: {known})",
                             hint="pick one of the installed readers, or `auto`")
        return reader
    if not path.is_file():
        what = "a directory" if path.is_dir() else "missing"
        raise InputError(f"{path} is {what}, not a session file",
                         hint="pass one session file; `chapters import` reads a directory")
    head = _head(path)
    if not head:
        raise InputError(f"{path} is empty (0 bytes): there is no session to read",
                         hint="point at a session file with at least one complete line")
    for reader in app.harnesses.values():
        if reader.sniff(head):
            return reader
    size = path.stat().st_size
    names = ", ".join(app.harnesses) or "none installed"
    complete_lines = head.count(b"\n")
    raise InputError(
        f"{path} is not a transcript any installed reader recognizes: its first "
        f"{len(head)} of {size} bytes ({complete_lines} complete lines) match none of: {names}",
        hint="check the path, or name the format with --harness " + "|".join(app.harnesses),
    )


def read_transcript(app: App, path: Path, harness: str) -> Transcript:
    reader = choose_reader(app, path, harness)
    return reader.read(str(path))


def archive_and_log(app: App, transcript: Transcript) -> ArchiveReport:
    """Archive one transcript with the App's adapters; log the archive if it wrote anything."""
    report = archive_transcript(
        transcript, store=app.store, lock=app.lock, clock=app.clock, config=app.config,
        identity=app.identity, harness_id=app.harness_id,
    )
    if report.wrote_nothing:
        return report  # a re-run changes no byte of the store, not even the log
    # Counts and paths only: a log line never carries a transcript's text (or a token).
    app.log.write("archive", report.started_at, sessionId=report.session_id,
                  harness=report.harness, source=report.source_path,
                  turnsArchived=report.turns_archived, chapters=[c.path for c in report.chapters],
                  artifactsWritten=report.artifacts_written, watermark=report.watermark_after)
    # §6.2: queue the new chapters for enrichment; no model is called or waited for here.
    enrichment.note_archived(app, [c.path for c in report.chapters])
    return report




# ---------------------------------------------------------------------------------------------
# The archive report, as text


def _pairs(pairs: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{name} {count}" for name, count in pairs)


def _opened_by(chapter: ArchivedChapter) -> str:
    """The composition rule behind the split that opened this chapter (§4.4: inspectable)."""
    if chapter.rule == "first":
        return "opened by: first turn of this archive"
    return f"split by: {chapter.rule}, overlap {chapter.overlap:.3f}"


def report_lines(report: ArchiveReport, store_prefix: str = ".dsh-chapters") -> list[str]:
    a = report.account
    lines = [f"archived {report.source_path or report.session_id} "
             f"({report.harness}, session {report.session_id})"]
    malformed = f"{a.malformed} malformed"
    if a.malformed_lines:
        shown = ", ".join(str(n) for n in a.malformed_lines[:10])
        more = f", +{len(a.malformed_lines) - 10} more" if len(a.malformed_lines) > 10 else ""
        malformed += f" (line {shown}{more})"
    lines.append(f"  lines      {a.total} total · {a.imported} imported · {a.skipped} skipped · "
                 f"{a.unknown} unknown · {malformed}")
    if a.skip_rules:
        lines.append(f"             skipped by rule: {_pairs(a.skip_rules)}")
    if a.unknown_types:
        lines.append(f"             unknown types: {_pairs(a.unknown_types)}")
    if a.truncated_tail:
        lines.append("             the last line is incomplete (a session being written): "
                     f"read stopped after line {a.total}, the last complete one")
    if a.replaced_bytes:
        lines.append(f"             {a.replaced_bytes} non-UTF-8 byte(s) became U+FFFD")
    lines.append(f"  turns      {report.turns_complete} complete · {report.turns_archived} "
                 f"archived now · {report.turns_already} archived before")
    lines.append(f"  chapters   {len(report.chapters)} written")
    for chapter in report.chapters:
        lines.append(f"    {store_prefix}/{chapter.path}  ({chapter.turns} turn(s), "
                     f"seq {chapter.seq_range[0]}–{chapter.seq_range[1]}, {_opened_by(chapter)})")
    lines.append(f"  artifacts  {report.artifacts_written} written · "
                 f"{report.artifacts_present} already present")
    lines.append(f"  redactions {_pairs(report.redactions) or 'none'}")
    if report.omissions:
        lines.append(f"  screened   {_pairs(report.omissions)} (host-injected context)")
    if report.clamp:
        lines.append(f"  clamp      {report.clamp}")
    if report.wrote_nothing and report.turns_complete:
        lines.append("  nothing new: every completed turn was already archived")
    return lines


# ---------------------------------------------------------------------------------------------
# chapters archive PATH


def run_archive(args: argparse.Namespace, inv: Invocation) -> int:
    app = _app(inv)
    path = (inv.cwd / args.path).absolute()
    transcript = read_transcript(app, path, args.harness)  # refuses before the store is touched
    report = archive_and_log(app, transcript)
    # §5.1: the debounced push after an archive; it never fails the archive (§5.3).
    outcome = knowledge_pool.after_archive(app)
    pool_line = knowledge_pool.describe_sync_point(outcome)
    inv.emit({**report.to_dict(), "pool": knowledge_pool.sync_point_json(outcome)},
             "\n".join([*report_lines(report), *([pool_line] if pool_line else [])]))
    return 0


# ---------------------------------------------------------------------------------------------
# chapters import claude-code|codex [--source DIR]


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
    app = _app(inv)
    reader = app.harnesses.get(args.harness)
    if reader is None:
        raise UsageError(f"import {args.harness}: no such reader (installed: "
                         f"{', '.join(app.harnesses) or 'none'})",
                         hint="run `chapters import claude-code` or `chapters import codex`")
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
    for done, file in enumerate(files):
        progress.show(done, Path(file).name)
        try:
            reports.append(archive_and_log(app, reader.read(file)))
        except InputError as exc:  # one unreadable session never stops the others
            failures.append((file, exc.message))
    progress.show(len(files), "done")
    progress.close()
    outcome = knowledge_pool.after_archive(app) if reports else None  # §5.1, as for archive
    chapters = sum(len(r.chapters) for r in reports)
    turns = sum(r.turns_archived for r in reports)
    data = {"harness": args.harness, "sessions": len(files), "imported": len(reports),
            "chapters": chapters, "turnsArchived": turns,
            "reports": [r.to_dict() for r in reports],
            "failures": [{"path": p, "error": m} for p, m in failures],
            "pool": knowledge_pool.sync_point_json(outcome)}
    lines: list[str] = []
    for report in reports:
        lines.extend(report_lines(report))
    lines.append(f"imported {len(reports)} of {len(files)} {args.harness} session(s): "
                 f"{turns} turn(s) into {chapters} new chapter(s)")
    for path, message in failures:
        lines.append(f"  failed {path}: {message}")
    if knowledge_pool.describe_sync_point(outcome):
        lines.append(knowledge_pool.describe_sync_point(outcome))
    inv.emit(data, "\n".join(lines))
    if failures:
        raise ChaptersError(f"{len(failures)} of {len(files)} session file(s) could not be read",
                            hint="see each file's reason above; the others were archived")
    return 0


# ---------------------------------------------------------------------------------------------
# chapters list


def _chapters(app: App) -> list[Document]:
    return [d for d in app.store.documents() if d.kind is DocumentKind.CHAPTER]


def _number(document: Document) -> int:
    name = document.path.rsplit("/", 1)[-1]
    digits = name.split("-", 1)[0]
    return int(digits) if digits.isdigit() else 0


def _messages_text(messages: dict[str, int]) -> str:
    order = ["user", "assistant", "tool", *sorted(set(messages) - {"user", "assistant", "tool"})]
    shown = [f"{messages[role]} {role}" for role in order if role in messages]
    return " · ".join(shown) or "no messages"


def run_list(args: argparse.Namespace, inv: Invocation) -> int:
    if args.pool:
        from dsh_chapters.commands.pool import run_list_pool

        return run_list_pool(args, inv)
    app = _app(inv)
    prefix = app.store_root.relative_to(app.workspace).as_posix()
    rows: list[dict[str, Any]] = [{
        "number": _number(d), "date": d.date, "title": d.title, "messages": dict(d.messages),
        "topics": list(d.topics), "path": f"{prefix}/{d.path}", "sessionId": d.session_id,
    } for d in _chapters(app)]
    if not rows:
        inv.emit(rows, f"no chapters in {app.store_root} yet; run `chapters archive PATH` or "
                       "`chapters import claude-code`")
        return 0
    text = [f"{r['number']:03d}  {r['date'][:16] or '-':<16}  {r['title']}  "
            f"({_messages_text(r['messages'])})  "
            f"[{', '.join(r['topics'])}]  {r['path']}" for r in rows]
    text.append(f"{len(rows)} chapter(s) in {app.store_root}")
    inv.emit(rows, "\n".join(text))
    return 0


# ---------------------------------------------------------------------------------------------
# chapters show ID|PATH


def resolve_chapter(app: App, ident: str, cwd: Path) -> str:
    """A store-relative chapter path from a file path, a store path, `<session>/<NNN>` or `NNN`."""
    candidate = (cwd / ident).absolute()
    store_root = app.store_root.absolute()
    if candidate.is_file() and candidate.is_relative_to(store_root):
        return candidate.relative_to(store_root).as_posix()
    paths = [d.path for d in _chapters(app)]
    stripped = ident.removeprefix(f"{app.store_root.name}/")
    if stripped in paths:
        return stripped
    session, _, number = stripped.rpartition("/")
    matches = [p for p in paths
               if number.isdigit() and p.rsplit("/", 1)[-1].split("-", 1)[0] == f"{int(number):03d}"
               and (not session or p.split("/", 1)[0].startswith(session))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ChaptersError(f"no chapter matches {ident!r} ({len(paths)} chapter(s) in the store)",
                            hint="run `chapters list` and pass a path or <session>/<NNN>")
    raise UsageError(f"{ident!r} matches {len(matches)} chapters: " + ", ".join(matches[:5]),
                     hint="add the session: `chapters show <session>/<NNN>`")


def run_show(args: argparse.Namespace, inv: Invocation) -> int:
    app = _app(inv)
    relpath = resolve_chapter(app, args.id, inv.cwd)
    text = app.store.read_text(relpath)
    prefix = app.store_root.relative_to(app.workspace).as_posix()
    if args.line is not None:  # a search anchor's line: open the chapter there (search.md)
        text, first = _from_line(text, args.line, app.config.artifact_read_default_lines)
        if inv.json:
            inv.emit({"path": f"{prefix}/{relpath}", "line": first, "text": text})
        else:
            inv.stdout.write(text)
        return 0
    if inv.json:
        inv.emit({"path": f"{prefix}/{relpath}", "text": text})
    else:
        inv.stdout.write(text)
    return 0


def _from_line(text: str, line: int, count: int) -> tuple[str, int]:
    """`count` lines of `text` from 1-based `line`."""
    lines = text.splitlines(keepends=True)
    if line < 1 or line > len(lines):
        raise UsageError(f"--line {line} is outside the chapter (lines 1..{len(lines)})",
                         hint="pass a line from a search anchor (`L<line>:`)")
    return "".join(lines[line - 1:line - 1 + count]), line


# ---------------------------------------------------------------------------------------------
# chapters status: a dict of sections, each from one small function (others append theirs)


@dataclass(frozen=True)
class StatusSection:
    key: str  # the section's key in `chapters status --json`
    data: Any
    lines: list[str]


def store_section(app: App) -> StatusSection:
    chapters = _chapters(app)
    meta = app.store.session_meta()
    artifact_count = getattr(app.store, "artifact_count", None)
    artifacts = artifact_count() if callable(artifact_count) else 0
    modified = sum(1 for d in chapters if d.modified_since_archived)
    last = app.log.last("archive")
    data = {
        "root": str(app.store_root), "projectKey": app.identity.project_key,
        "derivation": app.identity.derivation, "canonical": app.identity.canonical,
        "harnessId": app.harness_id, "chapters": len(chapters), "artifacts": artifacts,
        "sessions": len(meta), "modifiedSinceArchived": modified,
        "lastArchive": last,
    }
    last_text = (f"{last.get('at', '?')} ({last.get('harness', '?')} session "
                 f"{last.get('sessionId', '?')}, {len(last.get('chapters', []))} chapter(s))"
                 if last else "never")
    lines = [
        f"store      {app.store_root}",
        f"projectKey {app.identity.project_key} ({app.identity.derivation}: "
        f"{app.identity.canonical})",
        f"harnessId  {app.harness_id}",
        f"archive    {len(chapters)} chapter(s) · {artifacts} artifact(s) · "
        f"{len(meta)} session(s)" + (f" · {modified} modified since archived" if modified else ""),
        f"last       {last_text}",
    ]
    return StatusSection("store", data, lines)


def lock_section(app: App) -> StatusSection:
    state = app.lock.state()
    data = {"held": state.held, "pid": state.pid, "ageSeconds": round(state.age_seconds, 1),
            "stale": state.stale, "path": state.path}
    if state.held:
        text = f"held by pid {state.pid} for {state.age_seconds:.0f} s"
    elif state.stale:
        text = (f"free; a stale holder (pid {state.pid}, {state.age_seconds:.0f} s ago) was killed "
                "mid-write; the next archive takes over")
    else:
        text = "free"
    return StatusSection("lock", data, [f"lock       {text}"])


def pool_section(app: App) -> StatusSection:
    try:
        status = knowledge_pool.pool_status(app)
        return StatusSection("pool", status.to_json(), knowledge_pool.status_lines(app))
    except ChaptersError as exc:  # the pool never breaks the local status (§5.3)
        return StatusSection("pool", {"error": exc.message}, [f"pool: {exc.message}"])


# Sections in print order. Another family adds its own with one `.append(fn)`.
STATUS_SECTIONS: list[Callable[[App], StatusSection]] = [store_section, lock_section, pool_section]


def run_status(args: argparse.Namespace, inv: Invocation) -> int:
    app = _app(inv)
    sections = [section(app) for section in STATUS_SECTIONS]
    inv.emit({s.key: s.data for s in sections},
             "\n".join(line for s in sections for line in s.lines))
    return 0


# ---------------------------------------------------------------------------------------------


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    archive = subparsers.add_parser(
        "archive", parents=[common], help="archive one session file into chapters",
        description="Archive the completed, not yet archived turns of one session file "
                    "(DSH event log, Claude Code or Codex transcript) into topic chapters under "
                    ".dsh-chapters/. No model, no network; running it again writes nothing new.")
    archive.add_argument("path", help="the session file (.jsonl)")
    archive.add_argument("--harness", default=AUTO, metavar="auto|dsh|claude-code|codex",
                         help="the file's format (default: auto, from its first bytes)")
    archive.set_defaults(run=run_archive)

    imp = subparsers.add_parser(
        "import", parents=[common], help="archive every session of this project",
        description="Archive every Claude Code session of this project (matched by its "
                    "directory) or every Codex rollout whose cwd is this project; with --source, "
                    "every session file under DIR. Re-running adds no file.")
    imp.add_argument("harness", metavar="claude-code|codex", help="whose sessions to import")
    imp.add_argument("--source", metavar="DIR", help="import the session files under DIR")
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

    status = subparsers.add_parser(
        "status", parents=[common], help="the store, the lock and the pool at a glance",
        description="Store root, projectKey, chapters, artifacts, sessions, the last archive, "
                    "the writer lock and the pool.")
    status.set_defaults(run=run_status)
