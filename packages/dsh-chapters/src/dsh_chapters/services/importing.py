"""Import every session of this project from one harness: `chapters import` and the import
that `chapters install` runs, so history already on disk is archived before the harness's own
cleanup (Claude Code's `cleanupPeriodDays`, 30 days by default) deletes it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dsh_chapters_core.archive import ArchiveReport
from dsh_chapters_core.errors import InputError, UsageError

from dsh_chapters.app import App
from dsh_chapters.services import drift, finality, pool
from dsh_chapters.services.archive import archive_and_log, sync_point
from dsh_chapters.services.transcripts import read_guarded


@dataclass
class ImportResult:
    """What one import found and archived; `where` is the folder it looked in."""

    harness: str
    where: str
    files: list[str] = field(default_factory=list)
    reports: list[ArchiveReport] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    outcome: pool.SyncPointOutcome | None = None

    @property
    def chapters(self) -> int:
        return sum(len(r.chapters) for r in self.reports)

    @property
    def turns(self) -> int:
        return sum(r.turns_archived for r in self.reports)

    @property
    def sessions_with_news(self) -> int:
        return sum(1 for r in self.reports if r.turns_archived)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def where_sessions_are(app: App, harness: str, source: str | None) -> str:
    """The folder an import of `harness` reads: `--source`, else where the harness keeps this
    project's sessions (a plugin reader's folders are its own: named by the reader)."""
    if source is not None:
        return source
    folder = app.factories.session_files().project_folder(harness, str(app.workspace))
    return str(folder) if folder is not None else f"the {harness} reader's own folders"


@dataclass(frozen=True, slots=True)
class SourceContents:
    """What a `--source` folder holds when no session file of the harness was found in it: how
    many files (counted up to `FOLDER_FILES_COUNTED`), one of their names, and how the harness
    names its session files when its reader says ("" otherwise)."""

    files: int
    example: str
    session_files: str


FOLDER_FILES_COUNTED = 100_000  # a folder past this is said to hold "100,000 or more"


def source_contents(app: App, harness: str, source: str) -> SourceContents:
    """What is under `source` instead of session files, for the error that names it."""
    files, example = 0, ""
    for _, _, names in os.walk(source):
        for name in sorted(names):
            example = example or name
            files += 1
        if files >= FOLDER_FILES_COUNTED:
            break
    reader = app.harnesses.get(harness)
    pattern = getattr(reader, "session_files", "")
    return SourceContents(files, example, pattern if isinstance(pattern, str) else "")


def import_sessions(app: App, harness: str, *, source: str | None = None, final: bool = False,
                    on_file: Callable[[int, int, str], None] | None = None) -> ImportResult:
    """Archive every session file of this project the reader finds (or every one under
    `source`). A session is over, and its unfinished last turn archived, with `final` or once
    finality says so; one unreadable file never stops the others."""
    reader = app.harnesses.get(harness)
    if reader is None:
        from dsh_chapters.plugins import missing_reader_hint

        raise UsageError(f"import {harness}: no such reader (installed: "
                         f"{', '.join(app.harnesses) or 'none'})",
                         hint=missing_reader_hint(harness)
                         or "run `chapters import claude-code` or `chapters import codex`")
    if source is not None and not Path(source).is_dir():
        raise UsageError(f"--source {source}: not a directory",
                         hint="pass the directory that holds the session files")
    result = ImportResult(harness, where_sessions_are(app, harness, source))
    result.files = list(reader.discover(source, str(app.workspace)))
    counted: set[str] = set()
    # A session inside one file (OpenCode's database) is as idle as that file.
    backing = getattr(reader, "backing_file", None)
    with contextlib.ExitStack() as batch:
        held = 0  # transcript bytes archived in the open writer section
        for done, file in enumerate(result.files):
            if on_file is not None:
                on_file(done, len(result.files), Path(file).name)
            if not held:
                # Sessions are archived a batch to a writer section: as each batch ends, the
                # search index takes in what it wrote (search.md "The freshness rule").
                batch.enter_context(app.lock.hold(app.config.lock_timeout_ms / 1000))
            stands_for = backing(file) if callable(backing) else file
            try:
                transcript = read_guarded(app, reader, file)
                # Over when idle, or when its last record is old (a copy written just now).
                over = final or finality.is_finished(stands_for, app.config,
                                                     transcript=transcript)
                result.reports.append(archive_and_log(app, transcript, final=over))
            except InputError as exc:  # one unreadable session never stops the others
                drift.note_refusal(app, file, exc)  # a format version the reader does not know
                result.failures.append((file, exc.message))
            # A file holding many sessions counts once, with its first.
            held += max(_size(stands_for) if stands_for not in counted else 0, 1)
            counted.add(stands_for)
            if held >= app.config.import_batch_bytes:
                batch.close()
                held = 0
    if on_file is not None:
        on_file(len(result.files), len(result.files), "done")
    result.outcome = sync_point(app) if result.reports else None  # §5.1, as for archive
    return result
