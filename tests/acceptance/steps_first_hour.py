"""Steps of features/first_hour.feature: the README's commands, as a new user types them.

Every command is the real `chapters` (this environment's script, found on PATH as a user's
would be) in a subprocess, in a repository made by the real `git init`, with a HOME of its own
and no DSH_HOME, CLAUDE_CONFIG_DIR or CODEX_HOME: the defaults are what is tested. The two
sessions are the Claude Code fixture (real shapes, our own text) under two session ids; the
second stops before its fourth prompt, its last reply with `stop_reason: null` and no
`turn_duration` record after it, as Claude Code up to 2.1.62 leaves a session's end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from tests.app.archive_workspace import CLAUDE_MAIN, CLAUDE_SESSION

SECOND_SESSION = "9b2d4f61-3c5e-4a7b-8d90-1e2f3a4b5c6d"
PROMPTS_KEPT = 3  # the second session: its first three prompts, the third left unfinished
GIT = shutil.which("git")


@dataclass
class FirstHour:
    root: Path
    workspace: Path
    home: Path
    env: dict[str, str]
    sessions: dict[str, Path] = field(default_factory=dict)  # session id -> its file
    results: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def chapters(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["chapters", *args], cwd=self.workspace, env=self.env,
                              capture_output=True, text=True, timeout=300, check=False)
        if check:
            assert done.returncode == 0, f"chapters {' '.join(args)}: {done.stderr}"
        self.results[" ".join(args)] = done
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.chapters("--json", *args).stdout)


def _prompt_records(records: list[dict[str, Any]]) -> list[int]:
    return [i for i, r in enumerate(records) if r.get("type") == "user" and not r.get("isMeta")
            and isinstance(r.get("message", {}).get("content"), str)]


def _unfinished_copy(text: str) -> str:
    """The fixture session under another id, cut before its fourth prompt, its last reply left
    as a session that stopped mid-turn leaves it."""
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    kept = records[:_prompt_records(records)[PROMPTS_KEPT]]
    while kept and kept[-1].get("type") == "system":  # the turn_duration that ends the turn
        kept.pop()
    last = next(r for r in reversed(kept) if r.get("type") == "assistant")
    last["message"]["stop_reason"] = None
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
    return body.replace(CLAUDE_SESSION, SECOND_SESSION)


@pytest.fixture
def first_hour(tmp_path: Path) -> FirstHour:
    if GIT is None:
        pytest.fail("the first-hour feature needs the git command (README: apt-get install git)")
    home = tmp_path / "home"
    workspace = home / "src" / "widgets"
    workspace.mkdir(parents=True)
    env = {"HOME": str(home), "LANG": "C.UTF-8", "COLUMNS": "100",
           # this environment's `chapters` on PATH, as pipx or uv would put it there
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])}
    return FirstHour(tmp_path, workspace, home, env)


@given("a fresh git repository and a home directory of its own")
def fresh_repository(first_hour: FirstHour) -> None:
    for args in (["init", "-q"], ["remote", "add", "origin", "https://github.com/acme/api.git"]):
        subprocess.run([GIT or "git", *args], cwd=first_hour.workspace, env=first_hour.env,
                       check=True, capture_output=True)


@given("two Claude Code sessions of this project copied into ~/.claude/projects, written weeks "
       "ago")
def copied_sessions(first_hour: FirstHour) -> None:
    folder = (first_hour.home / ".claude" / "projects"
              / re.sub(r"[^A-Za-z0-9]", "-", str(first_hour.workspace)))
    folder.mkdir(parents=True)
    text = CLAUDE_MAIN.read_text(encoding="utf-8")
    for session, body in ((CLAUDE_SESSION, text), (SECOND_SESSION, _unfinished_copy(text))):
        path = folder / f"{session}.jsonl"
        path.write_text(body, encoding="utf-8")  # copied: the file is new, its records are not
        first_hour.sessions[session] = path
    newest = max(r["timestamp"] for p in first_hour.sessions.values()
                 for r in map(json.loads, p.read_text(encoding="utf-8").splitlines())
                 if "timestamp" in r)
    assert newest < "2026-11-21", newest  # weeks before any run of this test


def _every_turn(first_hour: FirstHour, session: str) -> int:
    """The turns a `--final` archive of this session takes (in a scratch workspace): all of
    them, the unfinished last one included. The oracle for `every turn`."""
    scratch = first_hour.root / f"scratch-{session[:8]}"
    (scratch / ".git").mkdir(parents=True)
    done = subprocess.run(
        ["chapters", "--json", "archive", "--final", str(first_hour.sessions[session])],
        cwd=scratch, env={**first_hour.env, "DSH_HOME": str(scratch / "dsh")},
        capture_output=True, text=True, timeout=300, check=True)
    return int(json.loads(done.stdout)["turns"]["complete"])


@when(parsers.parse('the user runs "chapters {command}"'), target_fixture="ran")
def user_runs(first_hour: FirstHour, command: str) -> subprocess.CompletedProcess[str]:
    return first_hour.chapters(*command.split())


def _archived_turns(first_hour: FirstHour) -> dict[str, int]:
    """Turns archived per session, from the store's own log lines (what every archive wrote)."""
    log = first_hour.workspace / ".dsh-chapters" / "logs" / "chapters.log"
    turns: dict[str, int] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("event") == "archive":
            sid = str(record.get("sessionId"))
            turns[sid] = turns.get(sid, 0) + int(record.get("turnsArchived", 0))
    return turns


@then("every turn of both sessions is archived, the unfinished last one included")
def every_turn_archived(first_hour: FirstHour) -> None:
    expected = {s: _every_turn(first_hour, s) for s in first_hour.sessions}
    archived = _archived_turns(first_hour)
    assert {s: archived.get(s, 0) for s in expected} == expected, (
        f"archived {archived}, a --final archive takes {expected}; the import said:\n"
        + "\n".join(r.stdout + r.stderr for r in first_hour.results.values()))


@then(parsers.parse('"chapters list" shows both sessions, each line with an id and no line '
                    "over {columns:d} columns"))
def list_shows_both(first_hour: FirstHour, columns: int) -> None:
    listing = first_hour.chapters("list").stdout
    assert all(len(line) <= columns for line in listing.splitlines()), listing
    rows = first_hour.json("list")
    assert {r["sessionId"] for r in rows} >= set(first_hour.sessions), rows
    for session in first_hour.sessions:
        header = next(line for line in listing.splitlines() if line.startswith(session[:8]))
        assert "chapter" in header, listing
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{8}/\d+", row["id"]), row
        assert re.search(rf"^  {re.escape(row['id'])} ", listing, re.M), (row["id"], listing)


@then("git status shows nothing of the archive")
def git_status_clean(first_hour: FirstHour) -> None:
    status = subprocess.run([GIT or "git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=first_hour.workspace, capture_output=True, text=True,
                            check=True).stdout
    assert ".dsh-chapters" not in status, status
    exclude = (first_hour.workspace / ".git" / "info" / "exclude").read_text(encoding="utf-8")
    assert "/.dsh-chapters/" in exclude.splitlines(), exclude
    assert not (first_hour.workspace / ".gitignore").exists()  # never a committed file


@when(parsers.parse('the user runs "chapters search" for words of the first session'),
      target_fixture="searched")
def user_searches(first_hour: FirstHour) -> subprocess.CompletedProcess[str]:
    return first_hour.chapters("search", "rate limiting middleware")


@then("the search prints no warning")
def no_warning(searched: subprocess.CompletedProcess[str]) -> None:
    assert searched.stderr == "", searched.stderr
    assert searched.stdout.startswith("shown "), searched.stdout


@then('"chapters show <id> --line L" of its first hit prints the anchor\'s text')
def show_the_anchor(first_hour: FirstHour, searched: subprocess.CompletedProcess[str]) -> None:
    lines = searched.stdout.splitlines()
    hit = lines[1].split(" | ")[4].split(" (topics:")[0]
    anchor = re.match(r"^    L(\d+): (.*)$", lines[2])
    assert anchor is not None, searched.stdout
    ids = {f".dsh-chapters/{r['path'].split('.dsh-chapters/', 1)[-1]}": r["id"]
           for r in first_hour.json("list")}
    shown = first_hour.chapters("show", ids[hit], "--line", anchor.group(1)).stdout
    snippet = anchor.group(2).strip("…")
    assert snippet[:24] in shown.splitlines()[0], (snippet, shown.splitlines()[0])


@then('.claude/settings.json and .mcp.json run "chapters" and hold no absolute path')
def portable_entries(first_hour: FirstHour) -> None:
    settings = first_hour.workspace / ".claude" / "settings.json"
    servers = first_hour.workspace / ".mcp.json"
    for path in (settings, servers):
        text = path.read_text(encoding="utf-8")
        assert str(first_hour.root) not in text and sys.executable not in text, text
        assert not re.search(r'"/|\s/', text), text  # no absolute path of any machine
    hooks = json.loads(settings.read_text(encoding="utf-8"))["hooks"]
    assert {h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]} == {
        "chapters hook"}
    server = json.loads(servers.read_text(encoding="utf-8"))["mcpServers"]["dsh-chapters"]
    assert server == {"command": "chapters", "args": ["mcp"]}


@then(parsers.parse("the install says it imported {count:d} sessions, and every turn of both "
                    "is archived"))
def install_imported(first_hour: FirstHour, count: int) -> None:
    said = first_hour.results["install claude-code"].stdout
    assert re.search(rf"^imported {count} of {count} claude-code session\(s\)", said, re.M), said
    every_turn_archived(first_hour)


@then("the hook it wrote runs as written and prints the session-start notice")
def hook_runs(first_hour: FirstHour) -> None:
    settings = json.loads((first_hour.workspace / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    payload = json.dumps({"session_id": SECOND_SESSION, "transcript_path": "",
                          "cwd": str(first_hour.workspace), "hook_event_name": "SessionStart",
                          "source": "startup"})
    ran = subprocess.run(command, shell=True, input=payload, capture_output=True, text=True,
                         cwd=first_hour.workspace, env=first_hour.env, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    notice = json.loads(ran.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Project: api · " in notice and "## Chapters of this session" in notice, notice
