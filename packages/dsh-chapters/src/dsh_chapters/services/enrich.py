"""Enrichment as the app runs it (§6): queue on archive, drain in the background, never block.

The archive path calls two functions here, and both return at once and never raise:
- `note_archived(app, paths)` appends the new chapters to the queue (a state write under the
  writer lock) and, with `enrichmentTrigger` both|idle, starts the idle waiter;
- `after_push(app, outcome)` starts a push-triggered drain once a push went out (both|afterPush).
Neither calls or waits for a model (§1 invariant 1): a drain is a detached child process
`chapters enrich run --auto <cause>`, started with posix_spawn in its own session, its output
in `.dsh-chapters/logs/enrich.log`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dsh_chapters_core.enrich.queue import (
    DrainCause,
    DrainDecision,
    ModelRoute,
    drain_decision,
    effective_route,
    launch_after_archive,
    read_state,
    should_queue,
)
from dsh_chapters_core.errors import ChaptersError

from dsh_chapters.app import App
from dsh_chapters.present import MANUAL_DRAIN

if TYPE_CHECKING:
    from dsh_chapters_core.enrich.run import DrainReport, Progress

ENRICH_RUN_LOCK = "state/enrich-run.lock"  # one drain at a time
ENRICH_IDLE_LOCK = "state/enrich-idle.lock"  # one idle waiter at a time

ENRICH_LOG = "logs/enrich.log"  # the background drains' stdout and stderr (never published)


def route_of(app: App) -> ModelRoute:
    return effective_route(app.config, app.store_tree)


def _log(app: App, step: str, **fields: Any) -> None:
    with contextlib.suppress(OSError, ChaptersError):
        app.log.write("enrich", app.clock.now(), step=step, **fields)


# ---------------------------------------------------------------------------------------------
# The archive path's two calls


def note_archived(app: App, paths: list[str]) -> int:
    """Queue the chapters an archive just wrote; start the idle waiter. Never raises."""
    if not paths:
        return 0
    from dsh_chapters_core.enrich.run import enqueue_archived  # the drain's: not for a sync

    try:
        queued = enqueue_archived(store_tree=app.store_tree, lock=app.lock, clock=app.clock,
                                  config=app.config, paths=paths)
        if queued and launch_after_archive(config=app.config, route=route_of(app),
                                           pushed=False) is DrainCause.IDLE and not (
                app.factories.drain_lock(app, ENRICH_IDLE_LOCK).holder_pid()):
            # A waiter already running sees the new chapters and extends its quiet window, so
            # an import of many sessions starts one waiter, not one per session.
            launch_worker(app, DrainCause.IDLE)
        return queued
    except (ChaptersError, OSError) as exc:  # the archive already succeeded and stays so
        _log(app, "queue-failed", error=type(exc).__name__, chapters=len(paths))
        return 0


def after_push(app: App, outcome: object) -> int:
    """Start a push-triggered drain when an archive's push went out. Never raises; the pid of
    the drain it started, else 0."""
    pushed = bool(getattr(outcome, "ok", False) and getattr(outcome, "pushed", False))
    try:
        route = route_of(app)
        cause = launch_after_archive(config=app.config, route=route, pushed=pushed)
        if cause is not DrainCause.AFTER_PUSH or not read_state(app.store_tree).queued:
            return 0
        return launch_worker(app, DrainCause.AFTER_PUSH)
    except (ChaptersError, OSError) as exc:
        _log(app, "launch-failed", error=type(exc).__name__)
        return 0


def worker_argv(app: App, cause: DrainCause) -> list[str]:
    return [sys.executable, "-m", "dsh_chapters", "-C", str(app.workspace),
            "enrich", "run", "--auto", str(cause)]


def launch_worker(app: App, cause: DrainCause) -> int:
    """Start `chapters enrich run --auto <cause>` detached (its own session, stdio to the log)
    and return its pid. posix_spawn leaves no `Popen` to wait for: the caller returns at once."""
    log = app.store_root / ENRICH_LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = worker_argv(app, cause)
    env = dict(app.env)
    if hasattr(os, "posix_spawn"):
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        _reap()
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)
        _children.append(pid)
    else:  # pragma: no cover (Windows)
        with log.open("ab") as sink:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
                                     env=env,
                                     creationflags=getattr(subprocess, "DETACHED_PROCESS", 0)
                                     | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
        _detached.append(popen)  # held, never waited for: the drain outlives this call
        pid = popen.pid
    _log(app, "launched", cause=str(cause), pid=pid)
    return pid


_children: list[int] = []
_detached: list[subprocess.Popen[bytes]] = []


def _reap() -> None:
    """Collect finished drains started by this process (a long-lived host, or a test)."""
    for pid in list(_children):
        with contextlib.suppress(ChildProcessError):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if not done:
                continue
        _children.remove(pid)


# ---------------------------------------------------------------------------------------------
# Draining


def run_drain(app: App, cause: DrainCause, progress: Progress | None = None) -> DrainReport:
    """One drain under the drain lock; when another process drains, leave the queue to it."""
    # Imported here: a sync or `chapters status` reads the queue and never drains, and the
    # drain's module brings the model door and the redaction engine.
    from dsh_chapters_core.enrich.run import DrainReport, drain

    lock = app.factories.drain_lock(app, ENRICH_RUN_LOCK)
    with lock.try_hold() as mine:
        if not mine:
            pid = lock.holder_pid()
            reason = f"another drain (pid {pid or '?'}) is running"
            return DrainReport(DrainDecision(False, reason=reason), route_of(app))
        report = drain(store=app.store, store_tree=app.store_tree, lock=app.lock,
                       clock=app.clock, config=app.config,
                       open_door=lambda route: app.factories.model_door(app, route),
                       harness_id=app.harness_id, cause=cause, progress=progress)
    if report.decision.run and cause is DrainCause.MANUAL:
        # The core says only that the drain was asked for; the CLI names the command that did.
        report = dataclasses.replace(
            report, decision=dataclasses.replace(report.decision, reason=MANUAL_DRAIN))
    return report


def _seconds_until(due_at: str, now: str) -> float:
    def parse(iso: str) -> datetime:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC)

    return max(0.0, (parse(due_at) - parse(now)).total_seconds())


def idle_drain(
    app: App, *, sleep: Callable[[float], None] = time.sleep, progress: Progress | None = None
) -> list[DrainReport]:
    """The idle waiter: wait until nothing was queued for `enrichmentIdleMs`, drain a batch,
    repeat while chapters are queued. One waiter per workspace; a server failure ends it (the
    next archive or `chapters enrich run` tries again), so a down server is never polled."""
    reports: list[DrainReport] = []
    while True:
        with app.factories.drain_lock(app, ENRICH_IDLE_LOCK).try_hold() as mine:
            if not mine:
                return reports
            finished, seen = _idle_pass(app, sleep, progress, reports)
        # An archive that queued while this waiter was leaving saw it alive and started none:
        # look once more after letting go, so those chapters never wait for the next archive.
        if finished or read_state(app.store_tree).last_enqueued_at == seen:
            return reports


def _idle_pass(
    app: App, sleep: Callable[[float], None], progress: Progress | None,
    reports: list[DrainReport],
) -> tuple[bool, str]:
    """Wait and drain until the queue is done (False, the last enqueue seen) or a drain ended
    on a server failure (True)."""
    idle_s = app.config.enrichment_idle_ms / 1000
    while True:
        state = read_state(app.store_tree)
        decision = drain_decision(DrainCause.IDLE, config=app.config, route=route_of(app),
                                  state=state, now=app.clock.now())
        if not decision.run:
            if not decision.due_at:
                return False, state.last_enqueued_at  # off, no model, empty, another trigger
            # Whole seconds in the clock: wake just after the window, never before it.
            sleep(min(_seconds_until(decision.due_at, app.clock.now()) + 1.0, idle_s + 1.0))
            continue
        report = run_drain(app, DrainCause.IDLE, progress)
        reports.append(report)
        if not report.decision.run:
            sleep(idle_s)  # another drain runs: look again after one idle window
            continue
        if report.summary is None or report.summary.deferred or not report.outcomes or any(
            o.server_failed for o in report.outcomes
        ):
            return True, state.last_enqueued_at


def queue_summary(app: App) -> dict[str, Any]:
    """`chapters status`'s enrich section: queue length, the route, the last run."""
    state = read_state(app.store_tree)
    route = route_of(app)
    return {
        "enabled": app.config.enrichment_enabled,
        "model": route.route,
        "modelOrigin": route.origin,
        "trigger": app.config.enrichment_trigger,
        "queued": len(state.queued),
        "queuing": should_queue(app.config, route),
        "lastRun": state.last_run.to_json() if state.last_run else None,
    }


def status_lines(app: App) -> list[str]:
    data = queue_summary(app)
    label = "enrich".ljust(11)
    if not data["enabled"]:
        return [f"{label}off (enrichmentEnabled = false): nothing is queued or sent to a model"]
    if not data["model"]:
        return [f"{label}no model configured · {data['queued']} queued "
                "(set enrichmentModel, or run `chapters enrich model <provider/model>`)"]
    state = read_state(app.store_tree)
    last = state.last_run.line() if state.last_run else "never"
    return [f"{label}{data['queued']} queued · model {data['model']} ({data['modelOrigin']}) · "
            f"trigger {data['trigger']}",
            f"{' ' * 11}last run {last}"]
