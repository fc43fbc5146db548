"""Archive a project's sessions as they are written: the service behind `chapters watch`.

One pass archives every session file of this project that each installed reader discovers
(Claude Code, Codex, DSH, Cursor, Copilot CLI, Aider): completed turns only while a file is
live (§4.3), its unfinished tail too once the file has been idle for `sessionFinalAfterMinutes`
(the session is over). Each pass that wrote chapters is a sync point (§5.1) with the push
debounce of §5.2; a push that was deferred is retried at a later wake-up, never by a timer of
its own. The watch loop itself is the harness adapter's (`dsh_chapters_harness.watch`, inotify
through watchfiles).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dsh_chapters_core.archive import ArchiveReport
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.sync.run import PushDecision

from dsh_chapters.app import App, SessionFiles
from dsh_chapters.services import pool as knowledge_pool
from dsh_chapters.services.archive import archive_and_log, sync_point
from dsh_chapters.services.finality import is_finished


@dataclass(frozen=True, slots=True)
class Archived:
    """One file's archive in a pass, or why it could not be read."""

    harness: str
    path: str
    report: ArchiveReport | None = None
    error: str = ""


@dataclass
class LiveArchive:
    """What the watcher knows between passes: each file's size and mtime when last archived,
    which files were finalized, and whether a push is waiting for its debounce."""

    app: App
    harnesses: tuple[str, ...]
    seen: dict[str, tuple[int, float]] = field(default_factory=dict)
    finalized: dict[str, float] = field(default_factory=dict)  # path -> mtime when finalized
    files: dict[str, str] = field(default_factory=dict)  # path -> harness (this project's)
    foreign: set[str] = field(default_factory=set)  # seen under a root, another project's
    push_pending: bool = False

    def _files(self) -> SessionFiles:
        """Where each built-in reader's sessions live, and the harness adapter's checks (the
        composition root builds them; a plugin's reader is archived, not watched)."""
        return self.app.factories.session_files()

    def _roots(self) -> dict[str, list[Path]]:
        """Where each watched reader's sessions are written: a built-in reader's folder, or the
        folders and files a reader names itself (`watch_roots(cwd)`: Cursor, Copilot CLI, and
        Aider's history file in the repository)."""
        files = self._files()
        found: dict[str, list[Path]] = {}
        for name in self.harnesses:
            own = getattr(self.app.harnesses[name], "watch_roots", None)
            if name in files.roots:
                found[name] = [files.roots[name]]
            elif callable(own):
                found[name] = [Path(p) for p in own(str(self.app.workspace))]
        return found

    def roots(self) -> list[Path]:
        return [root for roots in self._roots().values() for root in roots]

    def discover(self) -> None:
        """This project's session files, per reader (a new file joins at the next call)."""
        for name in self.harnesses:
            reader = self.app.harnesses[name]
            for path in reader.discover(None, str(self.app.workspace)):
                self.files.setdefault(path, name)

    def adopt(self, paths: Iterable[str]) -> None:
        """Sort new paths into this project's files and other projects' (asked once each):
        a Codex rollout by its own header, the others by their reader's discover()."""
        new = [p for p in paths if p not in self.files and p not in self.foreign]
        if not new:
            return
        workspace = str(self.app.workspace)
        files = self._files()
        by_root = self._roots()
        rediscover = set()
        for path in new:
            owner = next((n for n, roots in by_root.items()
                          if any(Path(path).is_relative_to(root) for root in roots)), None)
            if owner == "codex":
                cwd = files.rollout_cwd(path)
                if files.same_directory(cwd, workspace):
                    self.files[path] = owner
                elif cwd:  # no header yet: asked again at the file's next write
                    self.foreign.add(path)
            elif owner is not None:
                rediscover.add(owner)
        for name in sorted(rediscover):
            found = set(self.app.harnesses[name].discover(None, workspace))
            if _names_sessions_inside(self.app.harnesses[name]):
                for path in found:  # a new session inside a changed database
                    self.files.setdefault(path, name)
            for path in new:
                if path in found:
                    self.files.setdefault(path, name)
                elif any(Path(path).is_relative_to(root) for root in by_root[name]) and \
                        b"\n" in files.read_head(path):  # header written, yet not claimed
                    self.foreign.add(path)

    def pass_over(self, changed: Iterable[str] | None = None) -> list[Archived]:
        """Archive what changed (None: every file), and finalize the files gone idle."""
        if changed is not None:
            changed = set(changed)
            self.adopt(changed)  # a new session file: is it this project's?
        done: list[Archived] = []
        for path, harness in sorted(self.files.items()):
            backing = _backing_file(self.app.harnesses[harness], path)
            stat = _stat(backing)
            if stat is None:
                continue
            final = is_finished(backing, self.app.config)
            if final and self.finalized.get(path) == stat[1]:
                continue  # finalized at this very mtime: nothing new, nothing to read
            if not final and changed is not None and path not in changed \
                    and self.seen.get(path) == stat:
                continue
            done.append(self._archive(harness, path, final=final))
            self.seen[path] = stat
            if final:
                self.finalized[path] = stat[1]
        if any(a.report is not None and not a.report.wrote_nothing for a in done):
            self.push_pending = True
        return done

    def sync_point(self) -> str:
        """§5.1/§5.2: the debounced push after archives; a deferred one stays pending."""
        if not self.push_pending:
            return ""
        outcome = sync_point(self.app)
        self.push_pending = isinstance(outcome, PushDecision)
        return knowledge_pool.describe_sync_point(outcome)

    def _archive(self, harness: str, path: str, *, final: bool) -> Archived:
        try:
            reader = self.app.harnesses[harness]
            transcript = reader.read(path)
            # A file written just now may hold a session that ended long ago (a copy).
            final = final or is_finished(_backing_file(reader, path), self.app.config,
                                         transcript=transcript)
            return Archived(harness, path, archive_and_log(self.app, transcript, final=final))
        except ChaptersError as exc:  # one unreadable file never stops the watcher
            return Archived(harness, path, error=exc.message)


def _backing_file(reader: object, path: str) -> str:
    """The file whose size and time stand for a session's. A reader whose sessions live inside
    one file (OpenCode's database: `<db>#<session id>`) says which, by a `backing_file`
    method; otherwise the session is its file."""
    backing = getattr(reader, "backing_file", None)
    return str(backing(path)) if callable(backing) else path


def _names_sessions_inside(reader: object) -> bool:
    return callable(getattr(reader, "backing_file", None))


def _stat(path: str) -> tuple[int, float] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime


def seconds_until_idle(live: LiveArchive, now: float | None = None) -> float | None:
    """How long until the next live file counts as over (None: no live file)."""
    minutes = live.app.config.session_final_after_minutes
    if minutes <= 0:
        return None
    now = time.time() if now is None else now
    waits = [
        stat[1] + minutes * 60 - now
        for path, stat in live.seen.items()
        if live.finalized.get(path) != stat[1]
    ]
    return max(0.0, min(waits)) if waits else None
