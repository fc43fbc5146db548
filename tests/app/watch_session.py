"""A Claude Code session that grows turn by turn under `chapters watch`: the pieces the watch
test and the idle-CPU benchmark share (a workspace, CLAUDE_CONFIG_DIR, the watcher process)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsh_chapters_harness.claude_code import project_dir_name

from tests.app.archive_workspace import make_workspace

LANDS_WITHIN_S = 5.0  # the bound: a completed turn is in the store within 5 s
SESSION = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


@dataclass
class Setup:
    ws: Path
    env: dict[str, str]
    transcript: Path

    @property
    def store(self) -> Path:
        return self.ws / ".dsh-chapters"

    def bodies(self) -> str:
        return "".join(p.read_text(encoding="utf-8").split("---\n", 2)[2]
                       for p in sorted(self.store.glob("*/chapters/*.md")))


def make_setup(tmp_path: Path) -> Setup:
    ws = make_workspace(tmp_path / "acme-api")
    claude = tmp_path / "claude-config"
    project = claude / "projects" / project_dir_name(str(ws))
    project.mkdir(parents=True)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "DSH_HOME": str(tmp_path / "dsh-home"),
           "DSH_CHAPTERS_HARNESS_ID": "laptop", "CLAUDE_CONFIG_DIR": str(claude),
           "CODEX_HOME": str(tmp_path / "codex")}
    return Setup(ws, env, project / f"{SESSION}.jsonl")


def turn(n: int, ws: Path) -> list[dict[str, Any]]:
    """One complete Claude Code turn: a prompt, the reply, its turn_duration."""
    base = {"isSidechain": False, "userType": "external", "cwd": str(ws), "sessionId": SESSION,
            "version": "2.1.70", "gitBranch": "main"}
    # Records of now: a live session (old record times would make it a session that is over).
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return [
        {**base, "type": "user", "uuid": f"u{n}", "timestamp": stamp,
         "message": {"role": "user", "content": f"Step {n}: rename helper_{n} to tidy_{n}."}},
        {**base, "type": "assistant", "uuid": f"a{n}", "timestamp": stamp,
         "message": {"id": f"m{n}", "role": "assistant", "model": "claude-x",
                     "content": [{"type": "text", "text": f"Renamed helper_{n} to tidy_{n}."}],
                     "stop_reason": "end_turn"}},
        {**base, "type": "system", "subtype": "turn_duration", "durationMs": 1000,
         "uuid": f"d{n}", "timestamp": stamp},
    ]


def append(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for record in records:  # one write per record, as Claude Code appends them
            handle.write(json.dumps(record) + "\n")
            handle.flush()


class Watcher:
    def __init__(self, setup: Setup) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_chapters", "-C", str(setup.ws), "watch", "--json"],
            env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            bufsize=1)
        self.events: list[dict[str, Any]] = []

    def wait_for(self, event: str, timeout: float = 60.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    break
                self.events.append(json.loads(line))
                if self.events[-1]["event"] == event:
                    return self.events[-1]
        raise AssertionError(f"no {event!r} from the watcher; saw {self.events}")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
        return (utime + stime) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def lands(setup: Setup, text: str) -> float:
    """Seconds until `text` is in a chapter; fails past LANDS_WITHIN_S."""
    started = time.monotonic()
    while time.monotonic() - started < LANDS_WITHIN_S:
        if text in setup.bodies():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not archived within {LANDS_WITHIN_S} s")
