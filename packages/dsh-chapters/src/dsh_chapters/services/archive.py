"""Archiving: read a transcript, archive it, and the one after-archive pipeline.

Every archive point (`chapters archive`, `chapters import`, the hooks, the watcher) goes
through `archive_and_log`, then `sync_point`, so they cannot drift: the store log line, the
enrichment queue (§6.2, no model called), the search index kept current for the chapters just
written, and the debounced push (§5.1).
"""

from __future__ import annotations

from pathlib import Path

from dsh_chapters_core.archive import ArchiveReport, archive_transcript
from dsh_chapters_core.errors import InputError, UsageError
from dsh_chapters_core.events import Transcript
from dsh_chapters_core.ports.harness import HarnessReader

from dsh_chapters.app import MIRROR_DIRNAME, App
from dsh_chapters.services import drift, enrich, pool
from dsh_chapters.services.transcripts import read_guarded

AUTO = "auto"
# Bytes a reader's `sniff` sees: a Codex header line can hold a whole AGENTS.md (tens of KB).
SNIFF_BYTES = 1 << 20


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
        what = ("a directory" if path.is_dir() else "not a regular file" if path.exists()
                else "missing")
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
    """The transcript at `path`, or an InputError with numbers: never a traceback."""
    return read_guarded(app, choose_reader(app, path, harness), str(path))


def archive_and_log(app: App, transcript: Transcript, *, final: bool = False) -> ArchiveReport:
    """Archive one transcript with the App's adapters, then the after-archive steps.
    `final`: the session is over, so its unfinished tail is archived too."""
    report = archive_transcript(
        transcript, store=app.store, lock=app.lock, clock=app.clock, config=app.config,
        identity=app.identity, harness_id=app.harness_id, final=final,
    )
    drift.note_transcript(app, transcript)  # record types the reader did not know (doctor)
    after_archive(app, report)
    return report


def after_archive(app: App, report: ArchiveReport) -> None:
    """What follows every archive that wrote something: its log line and the queue (§6.2)."""
    if report.wrote_nothing:
        return  # a re-run changes no byte of the store, not even the log
    first = next(iter(app.log.entries("archive")), None) is None
    # Counts and paths only: a log line never carries a transcript's text (or a token).
    app.log.write("archive", report.started_at, sessionId=report.session_id,
                  harness=report.harness, source=report.source_path,
                  turnsArchived=report.turns_archived, chapters=[c.path for c in report.chapters],
                  artifactsWritten=report.artifacts_written, watermark=report.watermark_after)
    enrich.note_archived(app, [c.path for c in report.chapters])
    if first:
        keep_out_of_git(app)


def keep_out_of_git(app: App) -> list[str]:
    """The store and the pool's copy stay out of the project's commits: an entry in this
    clone's `.git/info/exclude` (never `.gitignore`, which every teammate would get). Asked by
    the store's first archive only, so a line the user removed is not put back."""
    entries = [p.relative_to(app.workspace).as_posix() for p in
               (app.store_root, app.workspace / MIRROR_DIRNAME)
               if p.is_relative_to(app.workspace) and p != app.workspace]
    return app.factories.exclude_from_git(app.workspace, entries)


def sync_point(app: App) -> pool.SyncPointOutcome:
    """§5.1: the debounced push after archiving; it never fails the archive (§5.3)."""
    return pool.after_archive(app)
