"""`chapters hook` as Claude Code runs it: a real process, the payload on stdin, exit 0 always.

A fixture transcript grows across turns: PreCompact archives the first part, SessionEnd the
rest, and no turn is archived twice. SessionStart prints the notice in the envelope Claude Code
adds to context. A pool that is down (refusing, or accepting and never answering) costs no more
than the configured timeout, and the agent goes on.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import CLAUDE_CODE_SESSION, CLAUDE_CODE_SESSION_ID, CLAUDE_CODE_TOOL_RESULTS

pytestmark = pytest.mark.slow

TOKEN = "tok-hooks-5d1c0e9a7b3f4e21"  # a pool token that must appear in no output or log


@dataclass
class HookRun:
    code: int
    out: str
    err: str
    seconds: float

    def envelope(self) -> dict[str, Any]:
        data = json.loads(self.out)
        assert isinstance(data, dict)
        return data


@dataclass
class Project:
    root: Path
    env: dict[str, str]
    transcript: Path  # the live transcript Claude Code appends to

    @property
    def store(self) -> Path:
        return self.root / ".dsh-chapters"

    def chapters(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(self.root), *argv],
                              env=self.env, capture_output=True, text=True, timeout=120,
                              check=False)

    def set_config(self, **settings: int) -> None:
        path = self.store / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            for key, value in settings.items():
                handle.write(f"{key} = {value}\n")

    def hook(self, event: str, **extra: str) -> HookRun:
        """Claude Code's payload for `event` (its field names), on the hook's stdin."""
        payload = {"session_id": CLAUDE_CODE_SESSION_ID, "transcript_path": str(self.transcript),
                   "cwd": str(self.root), "hook_event_name": event, "permission_mode": "default",
                   **extra}
        return self.raw_hook(json.dumps(payload))

    def raw_hook(self, stdin: str) -> HookRun:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "dsh_chapters", "hook"], input=stdin,
                              cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=120, check=False)
        return HookRun(done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    def log(self, event: str = "hook") -> list[dict[str, Any]]:
        path = self.store / "logs" / "chapters.log"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return [e for e in map(json.loads, lines) if e.get("event") == event]

    def chapter_files(self) -> dict[str, bytes]:
        return {p.relative_to(self.store).as_posix(): p.read_bytes()
                for p in sorted(self.store.glob("*/chapters/*.md"))}


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "acme-api"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/acme/api.git\n', encoding="utf-8")
    env = {"DSH_HOME": str(tmp_path / "dsh-home"), "DSH_CHAPTERS_HARNESS_ID": "laptop",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    # Claude Code's layout: <session>.jsonl with its externalized tool output beside it.
    live = tmp_path / "claude" / CLAUDE_CODE_SESSION.name
    shutil.copytree(CLAUDE_CODE_TOOL_RESULTS, live.parent / live.stem / "tool-results")
    return Project(root, env, live)


def write_turns(project: Project, lines: int) -> None:
    """The transcript as Claude Code has written it so far: the first `lines` records."""
    records = CLAUDE_CODE_SESSION.read_bytes().splitlines(keepends=True)
    project.transcript.write_bytes(b"".join(records[:lines]))


class BlackHole:
    """A loopback port that accepts connections and never answers (a hung pool)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = int(self.listener.getsockname()[1])
        self.held: list[socket.socket] = []
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.held.append(conn)

    def close(self) -> None:
        self.closing.set()
        self.thread.join(timeout=5)
        self.listener.close()
        for conn in self.held:  # the background push sees the pool hang up, and ends
            conn.close()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    hole = BlackHole()
    yield hole
    hole.close()


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])  # closed when this returns: connections are refused


def link(project: Project, port: int) -> None:
    done = project.chapters("link", f"http://127.0.0.1:{port}/acme-api.git", TOKEN)
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stdout + done.stderr


def assert_no_token(project: Project, *runs: HookRun) -> None:
    for run in runs:
        assert TOKEN not in run.out + run.err
    for path in project.store.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


# ---------------------------------------------------------------------------------------------


def test_precompact_archives_the_first_part_and_session_end_the_rest_once(
    project: Project,
) -> None:
    records = len(CLAUDE_CODE_SESSION.read_bytes().splitlines())
    write_turns(project, records // 2)
    compact = project.hook("PreCompact", trigger="auto", custom_instructions="")
    assert compact.code == 0, compact.err
    assert "turn(s) archived" in compact.out
    first = project.chapter_files()
    [pre] = project.log()
    assert pre["hookEvent"] == "PreCompact" and pre["detail"] == "auto"
    assert 0 < pre["turnsArchived"] < 54 and pre["chaptersWritten"] == len(first) > 0
    assert "error" not in pre and pre.get("sync") is None  # no pool: nothing scheduled

    write_turns(project, records)  # the session went on after the compaction
    end = project.hook("SessionEnd", reason="prompt_input_exit")
    assert end.code == 0, end.err
    post = project.log()[-1]
    assert post["hookEvent"] == "SessionEnd" and post["detail"] == "prompt_input_exit"
    assert post["turnsAlready"] == pre["turnsArchived"]  # nothing archived twice
    assert pre["turnsArchived"] + post["turnsArchived"] == 54
    after = project.chapter_files()
    assert {p: after[p] for p in first} == first  # append-only: PreCompact's bytes unchanged
    assert len(after) == len(first) + post["chaptersWritten"]

    # Archived turns never overlap: each archive starts where the last one stopped.
    archives = project.log("archive")
    assert [a["turnsArchived"] for a in archives] == [pre["turnsArchived"],
                                                      post["turnsArchived"]]
    assert archives[0]["watermark"] < archives[1]["watermark"]

    again = project.hook("SessionEnd", reason="other")
    assert again.code == 0 and project.log()[-1]["turnsArchived"] == 0
    assert project.chapter_files() == after


def test_session_start_prints_the_notice_in_claude_codes_envelope(project: Project) -> None:
    write_turns(project, len(CLAUDE_CODE_SESSION.read_bytes().splitlines()))
    assert project.hook("PreCompact", trigger="manual", custom_instructions="").code == 0
    proposed = project.chapters("rule", "add", "testing", "Run pytest -x before committing.",
                                "--json")
    rule_id = json.loads(proposed.stdout)["rule"]["id"]
    assert project.chapters("rule", "approve", rule_id).returncode == 0

    compact = project.hook("SessionStart", source="compact")
    assert compact.code == 0, compact.err
    envelope = compact.envelope()
    assert list(envelope) == ["hookSpecificOutput"]
    output = envelope["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    notice = output["additionalContext"]
    assert notice.startswith("# Continuation notice")
    assert "Project: api · " in notice  # the remote names the project, not the directory
    assert "## Core rules (approved on this machine)" in notice
    assert "Run pytest -x before committing." in notice
    assert f".dsh-chapters/{CLAUDE_CODE_SESSION_ID}/chapters/" in notice  # this session's
    assert "## Search" in notice and "chapters_search" in notice
    logged = project.log()[-1]
    assert logged["noticeSession"] == CLAUDE_CODE_SESSION_ID and logged["noticeChapters"] > 0

    fresh = project.hook("SessionStart", source="startup")
    assert fresh.code == 0
    assert "Continuation notice" in fresh.envelope()["hookSpecificOutput"]["additionalContext"]
    # The session an agent runs in is recorded for its rule proposals' provenance.
    state = json.loads((project.store / "state" / "agent-session.json").read_text())
    assert state["sessionId"] == CLAUDE_CODE_SESSION_ID and state["source"] == "startup"


def test_a_hung_pool_costs_no_more_than_the_timeouts(
    project: Project, black_hole: BlackHole
) -> None:
    link(project, black_hole.port)
    project.set_config(sessionStartPullTimeoutMs=1500, hookTimeoutMs=6000)
    write_turns(project, len(CLAUDE_CODE_SESSION.read_bytes().splitlines()))

    start = project.hook("SessionStart", source="startup")
    assert start.code == 0, start.err
    assert start.envelope()["hookSpecificOutput"]["additionalContext"]
    logged = project.log()[-1]
    # The pull never answered: stopped at its budget, so it holds no lock the archives need.
    assert logged["sync"] == "stopped"
    assert logged["elapsedMs"] < 1500 + 2500  # the pull budget, plus stopping it and the notice

    end = project.hook("SessionEnd", reason="logout")
    assert end.code == 0, end.err
    logged = project.log()[-1]
    assert logged["turnsArchived"] == 54  # the archive is local and done
    assert logged["sync"] == "running"  # the push goes on in the background, the agent too
    assert logged["elapsedMs"] < 6000 + 1000  # hookTimeoutMs bounds the push wait
    assert "error" not in logged
    assert_no_token(project, start, end)


def test_a_refused_pool_leaves_the_archive_whole_and_the_agent_going(project: Project) -> None:
    link(project, closed_port())
    # A refused connection fails at once; the generous pull budget keeps a loaded machine's
    # slow process start from turning "failed" into "stopped".
    project.set_config(syncDebounceMs=0, sessionStartPullTimeoutMs=30000)
    records = len(CLAUDE_CODE_SESSION.read_bytes().splitlines())
    write_turns(project, records // 3)

    start = project.hook("SessionStart", source="startup")
    assert start.code == 0 and start.envelope()
    pulled = project.log()[-1]
    assert pulled["sync"] == "failed" and pulled["syncFailure"] == "network"

    compact = project.hook("PreCompact", trigger="auto", custom_instructions="")
    assert compact.code == 0
    scheduled = project.log()[-1]
    assert scheduled["sync"] == "scheduled" and scheduled["turnsArchived"] > 0

    write_turns(project, records)
    end = project.hook("SessionEnd", reason="clear")
    assert end.code == 0
    ended = project.log()[-1]
    assert ended["sync"] == "failed" and ended["syncFailure"] == "network"
    assert scheduled["turnsArchived"] + ended["turnsArchived"] == 54

    status = json.loads(project.chapters("status", "--json").stdout)
    assert status["pool"]["localOnly"] is True and status["pool"]["pending"] > 0
    assert_no_token(project, start, compact, end)


def test_payloads_it_cannot_use_never_break_the_agent(project: Project) -> None:
    garbage = project.raw_hook("this is not json")
    assert garbage.code == 0 and garbage.out == "" and "not JSON" in garbage.err

    unknown = project.raw_hook(json.dumps({"hook_event_name": "PostToolUse", "cwd": "/"}))
    assert unknown.code == 0 and "not one of SessionStart, PreCompact, SessionEnd" in unknown.err

    project.transcript = project.root / "gone.jsonl"
    missing = project.hook("PreCompact", trigger="auto")
    assert missing.code == 0
    logged = project.log()[-1]
    assert logged["hookEvent"] == "PreCompact" and "is not a file" in logged["error"]
    assert "did not finish" in missing.out and "retry" not in logged
