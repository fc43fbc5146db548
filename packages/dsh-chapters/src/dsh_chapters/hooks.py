"""Claude Code hooks: `chapters hook` reads one hook payload on stdin and acts on its event.

- SessionStart: a best-effort pull bounded by `sessionStartPullTimeoutMs`, then the
  continuation notice (§7.3) in the envelope Claude Code adds to the session's context:
  `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "..."}}`.
- PreCompact: archive the transcript so far, before the summary replaces it, then schedule
  the debounced push in a background process (§5.1). The compaction path waits on no
  network (§1 invariant 1).
- SessionEnd: the session is over (every `reason`): archive the rest, its unfinished last turn
  included (marked `ended: incomplete-turn`), then push, waiting at most for what is left of
  the budget.
- Stop (Codex, `chapters hook --agent codex`): archive the completed turns, then schedule the
  debounced push, as PreCompact does. Codex has no session-end hook: an idle rollout's tail is
  finalized by `chapters import` or `chapters watch` (sessionFinalAfterMinutes).

A hook never breaks the agent: the whole run is bounded by `hookTimeoutMs`, any failure is
logged to the store's log (counts, codes and messages, never content or a token) and the hook
exits 0. Network work runs in a detached `chapters sync` child. A push that outlives the
budget is left to finish on its own; a pull that outlives its budget is stopped, because it
holds the writer lock (§5.2) that this session's archives need. An archive that could not
finish in time is handed to a background `chapters archive` of the same transcript (Claude
Code keeps the whole file, so nothing is lost, and the watermark keeps it from repeating).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from dsh_chapters_core.errors import ChaptersError, InputError
from dsh_chapters_core.sync.state import read_sync_state

from dsh_chapters.app import App
from dsh_chapters.present import error_text
from dsh_chapters.services import pool as knowledge_pool
from dsh_chapters.services.agents import record_agent_session
from dsh_chapters.services.rules import notice

SESSION_START = "SessionStart"
PRE_COMPACT = "PreCompact"
SESSION_END = "SessionEnd"
STOP = "Stop"  # Codex: a turn ended
HOOK_EVENTS = (SESSION_START, PRE_COMPACT, SESSION_END, STOP)
HARNESS = "claude-code"  # the hooks are Claude Code's; its reader reads the transcript
HOOK_AGENTS = (HARNESS, "codex")  # `chapters hook --agent`: whose payload and transcript
# SessionStart sources that continue the same session: list its chapters. A fresh start or a
# /clear lists the chapters the last archive here wrote (the work just before).
CONTINUING_SOURCES = frozenset({"resume", "compact"})
HOOK_LOG = "logs/hooks.log"  # the background syncs' own output (machine-local, §3.1)
_POLL_S = 0.02  # how often a hook looks whether its sync child is done
_WRAP_UP_S = 0.25  # of the hook's budget, kept back to log and print after a wait
_STOP_WAIT_S = 2.0  # how long a stopped pull may take to exit before it is killed
TOOLS_LINE = (
    "Tools: chapters_search {query} ranks this project's past chapters and rules; "
    "chapters_read {path} opens a hit verbatim; chapters_rule_propose {category, text} "
    "suggests a rule a human must approve."
)

_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class HookPayload:
    """What Claude Code sends on stdin (its field names; only these are read)."""

    event: str  # hook_event_name
    session_id: str
    transcript_path: str
    cwd: str
    detail: str  # SessionStart `source`, PreCompact `trigger`, SessionEnd `reason`
    harness: str = HARNESS  # whose hook this is, and so which reader reads the transcript

    @classmethod
    def parse(cls, raw: str, harness: str = HARNESS) -> HookPayload:
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise InputError(
                f"the hook payload is not JSON ({len(raw)} bytes, error at char {exc.pos})"
                if isinstance(exc, json.JSONDecodeError) else "the hook payload is not JSON",
                hint="`chapters hook` is run by Claude Code with the payload on stdin") from None
        if not isinstance(data, dict):
            raise InputError(f"the hook payload is a JSON {type(data).__name__}, not an object",
                             hint="`chapters hook` is run by Claude Code with the payload on stdin")
        event = str(data.get("hook_event_name", ""))
        if event not in HOOK_EVENTS:
            raise InputError(f"hook event {event or '(none)'!r} is not one of "
                             f"{', '.join(HOOK_EVENTS)}",
                             hint="install the hooks with `chapters install claude-code`")
        detail = next((str(data[k]) for k in ("source", "trigger", "reason") if data.get(k)), "")
        transcript = data.get("transcript_path")  # Codex sends null for an ephemeral session
        return cls(event=event, session_id=str(data.get("session_id", "")),
                   transcript_path=str(transcript) if transcript else "",
                   cwd=str(data.get("cwd", "")), detail=detail, harness=harness)


@dataclass
class HookResult:
    """What the hook prints (stdout) and what its log line says."""

    output: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Deadline:
    """The end of a hook's time budget, on the monotonic clock."""

    at: float  # time.monotonic()

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def sooner(self, seconds: float) -> Deadline:
        return Deadline(min(self.at, time.monotonic() + seconds))


# ---------------------------------------------------------------------------------------------
# Background `chapters` children: started detached, waited for within a budget


@dataclass
class Child:
    """A detached `chapters` process. `wait` polls; past the deadline the child runs on."""

    pid: int
    _popen: subprocess.Popen[bytes] | None = None
    code: int | None = None

    def wait(self, deadline: Deadline) -> int | None:
        while self.code is None:
            if self._popen is not None:
                self.code = self._popen.poll()
            else:
                done, status = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    self.code = os.waitstatus_to_exitcode(status)
            if self.code is not None or deadline.remaining() <= 0:
                break
            time.sleep(min(_POLL_S, deadline.remaining()))
        return self.code

    def stop(self) -> None:
        """Terminate the child and its group, and reap it (the kernel drops its file lock)."""
        if self.code is not None:
            return
        if self._popen is not None:  # pragma: no cover (Windows)
            self._popen.terminate()
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
        if self.wait(Deadline.after(_STOP_WAIT_S)) is None:
            if self._popen is not None:  # pragma: no cover (Windows)
                self._popen.kill()
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
            self.wait(Deadline.after(_STOP_WAIT_S))


def chapters_argv(app: App, args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "dsh_chapters", "-C", str(app.workspace), *args]


def spawn_chapters(app: App, args: Sequence[str]) -> Child:
    """Start `chapters -C <workspace> ARGS` in its own session, stdio to the hooks log.

    Its own session: Claude Code's hook timeout, or Claude Code exiting, does not take it down.
    posix_spawn leaves no `Popen` behind to warn about a child that outlives its caller.
    """
    log = app.store_root / HOOK_LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = chapters_argv(app, args)
    env = dict(app.env)
    if hasattr(os, "posix_spawn"):
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        return Child(os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True))
    with log.open("ab") as sink:  # pragma: no cover (Windows)
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=env,
                                 creationflags=getattr(subprocess, "DETACHED_PROCESS", 0)
                                 | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
    return Child(popen.pid, popen)


def _sync_outcome(app: App, code: int | None) -> dict[str, Any]:
    report = read_sync_state(app.store_tree).report
    data: dict[str, Any] = {"sync": "done" if code == 0 else "failed", "syncExit": code}
    if report is not None:
        data["syncLine"] = report.line()
        if report.failure_code:
            data["syncFailure"] = report.failure_code
    return data


def bounded_sync(app: App, mode: str, deadline: Deadline, *, stop_late: bool) -> dict[str, Any]:
    """`chapters sync --<mode>` in a child, waited for until `deadline` (§5.3: best effort).
    Past it, the child is stopped (`stop_late`) or left to finish in the background."""
    if not knowledge_pool.is_linked(app):
        return {"sync": "no pool linked"}
    budget = deadline.remaining()
    child = spawn_chapters(app, ["sync", f"--{mode}"])
    code = child.wait(deadline)
    if code is not None:
        return _sync_outcome(app, code)
    if stop_late:
        child.stop()
        return {"sync": "stopped", "syncNote": f"not done within {budget:.1f} s; stopped so it "
                "holds no lock this session's archives need; `chapters sync` pulls later"}
    return {"sync": "running", "syncPid": child.pid,
            "syncNote": f"not done within {budget:.1f} s; it finishes in the background"}


# ---------------------------------------------------------------------------------------------
# The events


def session_start(app: App, payload: HookPayload, deadline: Deadline,
                  progress: dict[str, Any]) -> str:
    record_agent_session(app, {"sessionId": payload.session_id, "harness": payload.harness,
                               "source": payload.detail, "at": app.clock.now()})
    pull_ms = app.config.session_start_pull_timeout_ms
    if pull_ms > 0:
        progress.update(bounded_sync(app, "pull", deadline.sooner(pull_ms / 1000),
                                     stop_late=True))
    else:
        progress["sync"] = "skipped (sessionStartPullTimeoutMs is 0)"
    session = payload.session_id if payload.detail in CONTINUING_SOURCES else ""
    result = notice(app, session=session)
    text = result.text.rstrip("\n") + "\n\n" + TOOLS_LINE + "\n"
    envelope = {"hookSpecificOutput": {"hookEventName": SESSION_START, "additionalContext": text}}
    progress.update(noticeSession=result.session, noticeChapters=result.chapters,
                    rulesRefused=result.refused)
    return json.dumps(envelope, ensure_ascii=False) + "\n"


def _archive_transcript(app: App, payload: HookPayload, progress: dict[str, Any], *,
                        final: bool = False) -> None:
    # The archive path is imported by the events that archive: a session's start (the notice)
    # never loads the readers, the composition or the redaction engine.
    from dsh_chapters.services.archive import archive_and_log, read_transcript

    path = transcript_of(payload)
    report = archive_and_log(app, read_transcript(app, path, payload.harness), final=final)
    # Counts only: the archive's own log line (written above) lists the chapter paths.
    progress.update(archived=True, turnsArchived=report.turns_archived,
                    turnsAlready=report.turns_already, chaptersWritten=len(report.chapters),
                    artifactsWritten=report.artifacts_written)


def transcript_of(payload: HookPayload) -> Path:
    path = Path(payload.transcript_path).expanduser()
    if not payload.transcript_path or not path.is_file():
        raise InputError(f"transcript_path {payload.transcript_path!r} is not a file",
                         hint="Claude Code sends the session's transcript path in the payload")
    return path


def pre_compact(app: App, payload: HookPayload, deadline: Deadline,
                progress: dict[str, Any]) -> str:
    _archive_transcript(app, payload, progress)
    if knowledge_pool.is_linked(app):
        # §1 invariant 1: the compaction path waits on no network. The child decides the
        # debounced push (push now, or record when) exactly as `chapters archive` does.
        child = spawn_chapters(app, ["hook", "--after-archive"])
        progress.update(sync="scheduled", syncPid=child.pid)
    return _summary(progress)


def session_end(app: App, payload: HookPayload, deadline: Deadline,
                progress: dict[str, Any]) -> str:
    # The session is over whatever the `reason` (clear, logout, prompt_input_exit, other…):
    # there is no next archive for its unfinished last turn.
    _archive_transcript(app, payload, progress, final=True)
    progress.update(bounded_sync(app, "push", deadline, stop_late=False))
    return _summary(progress)


def stop(app: App, payload: HookPayload, deadline: Deadline, progress: dict[str, Any]) -> str:
    """Codex's Stop: archive the completed turns, schedule the push; print nothing, because
    Codex reads a Stop hook's stdout as its decision."""
    pre_compact(app, payload, deadline, progress)
    return ""


Handler = Callable[[App, HookPayload, Deadline, dict[str, Any]], str]
HANDLERS: Mapping[str, Handler] = {
    SESSION_START: session_start,
    PRE_COMPACT: pre_compact,
    SESSION_END: session_end,
    STOP: stop,
}
ARCHIVE_POINTS = frozenset({PRE_COMPACT, SESSION_END, STOP})


def _summary(fields: Mapping[str, Any]) -> str:
    line = (f"dsh-chapters: {fields.get('turnsArchived', 0)} turn(s) archived into "
            f"{fields.get('chaptersWritten', 0)} chapter(s)")
    if fields.get("sync") not in (None, "no pool linked"):
        line += f"; pool: {fields.get('syncLine') or fields.get('sync')}"
    return line + "\n"


# ---------------------------------------------------------------------------------------------
# Running one hook: bounded, logged, always exit 0


@dataclass
class Bounded(Generic[_V]):
    """How a hook's work ran under the watchdog: whether it finished, and its value or its error."""

    finished: bool
    value: _V | None = None
    error: BaseException | None = None


def run_bounded(work: Callable[[], _V], seconds: float) -> Bounded[_V]:
    """Run `work` in a daemon thread and wait at most `seconds` for it (the hook's watchdog)."""
    outcome: Bounded[_V] = Bounded(False)

    def target() -> None:
        try:
            outcome.value = work()
        except BaseException as exc:  # reported, never raised: the agent must go on
            outcome.error = exc
        outcome.finished = True

    worker = threading.Thread(target=target, name="chapters-hook", daemon=True)
    worker.start()
    worker.join(seconds)
    return outcome


def safe_message(app: App | None, exc: BaseException) -> str:
    """An error for the log: credential patterns redacted and the pool's token never echoed."""
    text = error_text(exc) if isinstance(exc, ChaptersError) else f"{type(exc).__name__}: {exc}"
    from dsh_chapters_core.redact import redact  # on an error only

    text = redact(text).text
    if app is not None:
        token = app.credentials.read(app.identity.project_key)
        if token:
            text = text.replace(token, "[token]")
    return text


def _archive_later(app: App, payload: HookPayload) -> dict[str, Any]:
    """The archive did not finish here: a background `chapters archive` of the same file
    takes over (it waits for the writer lock on its own, and archives each turn once)."""
    try:
        path = transcript_of(payload)
    except InputError:
        return {}
    final = ["--final"] if payload.event == SESSION_END else []
    child = spawn_chapters(app, ["archive", str(path), "--harness", payload.harness, *final])
    return {"retry": "background archive", "retryPid": child.pid}


def run_hook(app: App, payload: HookPayload) -> HookResult:
    """Act on one payload within `hookTimeoutMs`; log the outcome; never raise."""
    started = time.monotonic()
    budget = app.config.hook_timeout_ms / 1000
    deadline = Deadline.after(max(0.0, budget - _WRAP_UP_S))
    progress: dict[str, Any] = {}
    handler = HANDLERS[payload.event]
    bounded = run_bounded(lambda: handler(app, payload, deadline, progress), budget)
    fields = dict(progress)  # a snapshot: a worker past the deadline may still be writing
    if not bounded.finished:
        fields["error"] = (f"timeout: the hook ran past hookTimeoutMs ({app.config.hook_timeout_ms}"
                           " ms); the agent went on")
    elif bounded.error is not None:
        fields["error"] = safe_message(app, bounded.error)
    if "error" in fields and payload.event in ARCHIVE_POINTS and not fields.get("archived"):
        with contextlib.suppress(OSError):
            fields.update(_archive_later(app, payload))
    fields.pop("archived", None)
    # A store that cannot take a log line must not break the agent either.
    with contextlib.suppress(OSError):
        app.log.write("hook", app.clock.now(), hookEvent=payload.event,
                      sessionId=payload.session_id, detail=payload.detail,
                      elapsedMs=round((time.monotonic() - started) * 1000), **fields)
    output = bounded.value if bounded.finished and bounded.value is not None else ""
    if "error" in fields and not output and payload.event not in (SESSION_START, STOP):
        output = (f"dsh-chapters: {payload.event} hook did not finish: "
                  f"{fields['error'].splitlines()[0]} (see .dsh-chapters/logs/chapters.log)\n")
    return HookResult(output, fields)


def after_archive(app: App) -> None:
    """The background half of PreCompact: the debounced push decision (§5.1)."""
    outcome = knowledge_pool.after_archive(app)  # what `services.archive.sync_point` runs
    app.log.write("hook", app.clock.now(), hookEvent="after-archive",
                  outcome=knowledge_pool.describe_sync_point(outcome) or "no pool linked")
