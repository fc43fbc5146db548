"""`chapters watch` over Cursor, Copilot CLI and Aider: where it watches (Aider's history file
itself, never the whole repository), which new files it takes as this project's, and a real
watcher process archiving an Aider turn and a Copilot CLI turn as they complete."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dsh_chapters.bootstrap import bootstrap
from dsh_chapters.services.live_archive import LiveArchive
from dsh_chapters_harness.cursor import project_slug
from dsh_chapters_harness.watch import existing_roots

from tests.app.archive_workspace import make_workspace
from tests.app.watch_session import Setup, Watcher
from tests.fixtures import make_agent_fixtures as fx

AGENTS = Path(fx.__file__).parent / "agents"
NEW = ("cursor", "copilot-cli", "aider")


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = make_workspace(tmp_path / "acme-api")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "laptop")
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    monkeypatch.delenv("AIDER_CHAT_HISTORY_FILE", raising=False)
    return ws


def _copilot(home: Path, ws: Path, session: str = fx.COPILOT_SESSION_ID) -> Path:
    path = home / ".copilot" / "session-state" / session / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (AGENTS / fx.COPILOT_FILE).read_text().replace(fx.CWD, str(ws))
    path.write_text(text.replace(fx.COPILOT_SESSION_ID, session))
    return path


def test_the_watcher_looks_at_each_harness_s_folder_and_at_aider_s_file(ws: Path) -> None:
    home = Path(os.environ["HOME"])
    history = ws / ".aider.chat.history.md"
    live = LiveArchive(bootstrap(ws, dict(os.environ)), NEW)
    global_storage = home / ".config" / "Cursor" / "User" / "globalStorage"
    assert live.roots() == [home / ".cursor" / "projects", global_storage,
                            home / ".copilot" / "session-state", history]
    assert existing_roots(live.roots()) == []  # nothing there yet: nothing to watch
    shutil.copy(AGENTS / fx.AIDER_FILE, history)
    (home / ".cursor" / "projects").mkdir(parents=True)
    assert set(existing_roots(live.roots())) == {home / ".cursor" / "projects", history}


def test_a_pass_takes_this_project_s_new_sessions_and_leaves_the_others(ws: Path) -> None:
    home = Path(os.environ["HOME"])
    shutil.copy(AGENTS / fx.AIDER_FILE, ws / ".aider.chat.history.md")
    transcripts = home / ".cursor" / "projects" / project_slug(str(ws)) / "agent-transcripts"
    transcripts.mkdir(parents=True)
    live = LiveArchive(bootstrap(ws, dict(os.environ)), NEW)
    live.discover()
    done = live.pass_over()
    assert [(d.harness, d.report is not None and d.report.turns_archived) for d in done] == [
        ("aider", 3)]  # live: the turn in flight waits
    mine = _copilot(home, ws)
    theirs = _copilot(home, ws.parent / "other", "0000-their-session")
    cursor = transcripts / Path(fx.CURSOR_FILE).name
    shutil.copy(AGENTS / fx.CURSOR_FILE, cursor)
    done = live.pass_over({str(mine), str(theirs), str(cursor)})
    assert sorted((d.harness, Path(d.path).name) for d in done) == [
        ("copilot-cli", "events.jsonl"), ("cursor", cursor.name)]
    assert str(theirs) in live.foreign
    assert all(d.error == "" for d in done)


@pytest.fixture
def watcher(ws: Path, tmp_path: Path) -> Iterator[Watcher]:
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
           "CODEX_HOME": str(tmp_path / "codex")}
    w = Watcher(Setup(ws, env, ws / "unused.jsonl"))
    yield w
    if w.proc.poll() is None:
        w.proc.kill()
        w.proc.wait(timeout=10)
    assert w.proc.stdout is not None
    w.proc.stdout.close()


@pytest.mark.slow
def test_a_watcher_archives_aider_and_copilot_turns_as_they_complete(
        ws: Path, request: pytest.FixtureRequest) -> None:
    home = Path(os.environ["HOME"])
    history = ws / ".aider.chat.history.md"
    history.write_text("\n# aider chat started at 2026-11-20 09:14:03\n\n"
                       "\n#### Explain the retry loop.  \n")
    copilot = _copilot(home, ws)
    lines = copilot.read_text().splitlines(keepends=True)
    copilot.write_text("".join(lines[:5]))  # the session has begun, no turn yet
    watcher: Watcher = request.getfixturevalue("watcher")
    ready = watcher.wait_for("watching")
    assert str(history) in ready["roots"]
    with history.open("a") as handle:  # the reply, then the next prompt ends the turn
        handle.write("\nIt retries `retry_limit` times with backoff.\n\n"
                     "\n#### Thanks, now the tests.  \n")
    row = watcher.wait_for("archived", timeout=30)
    assert row["harness"] == "aider" and row["turnsArchived"] == 1
    copilot.write_text("".join(lines))  # the whole session: four complete turns
    row = watcher.wait_for("archived", timeout=30)
    assert (row["harness"], row["turnsArchived"]) == ("copilot-cli", 4)
    assert watcher.stop() == 0
    bodies = "".join(p.read_text() for p in (ws / ".dsh-chapters").rglob("chapters/*.md"))
    assert "It retries `retry_limit` times with backoff." in bodies
    assert fx.COPILOT_REPLIES[2] in bodies
    assert json.dumps(ready)  # the ready line is JSON like every other


def _ide_chat(db: Path, chat: str, ws: Path, turns: int) -> None:
    """Cursor's global database holding one chat of `ws` with `turns` finished turns."""
    headers = [{"bubbleId": f"{kind}{n}", "type": 1 if kind == "u" else 2}
               for n in range(turns) for kind in ("u", "a")]
    rows = [(f"composerData:{chat}", json.dumps({
        "composerId": chat, "status": "completed", "createdAt": 1795165200000,
        "workspaceIdentifier": {"uri": {"fsPath": str(ws)}},
        "fullConversationHeadersOnly": headers}))]
    rows += [(f"bubbleId:{chat}:u{n}", json.dumps({"type": 1, "text": f"Question {n}?"}))
             for n in range(turns)]
    rows += [(f"bubbleId:{chat}:a{n}", json.dumps({"type": 2, "text": f"Answer {n}."}))
             for n in range(turns)]
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS cursorDiskKV "
                     "(key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
        conn.executemany("INSERT INTO cursorDiskKV VALUES (?, ?)", rows)
    conn.close()


def test_an_ide_chat_is_archived_again_when_its_database_changes(ws: Path) -> None:
    home = Path(os.environ["HOME"])
    db = home / ".config" / "Cursor" / "User" / "globalStorage" / "state.vscdb"
    chat = "5e4d3c2b-1a09-4876-9543-210fedcba987"
    _ide_chat(db, chat, ws, 1)
    live = LiveArchive(bootstrap(ws, dict(os.environ)), ("cursor",))
    live.discover()
    [done] = live.pass_over()
    assert done.path == f"{db}#{chat}" and done.report is not None
    assert done.report.turns_archived == 1
    _ide_chat(db, chat, ws, 2)  # the IDE answers a second question
    later = time.time() + 5
    os.utime(db, (later, later))
    [again] = live.pass_over({str(db)})
    assert again.report is not None and again.report.turns_archived == 1
    assert live.pass_over({str(db)}) == []  # nothing new: not read again
