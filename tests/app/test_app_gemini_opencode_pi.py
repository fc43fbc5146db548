"""`chapters import`, `archive`, `install` and `watch` with Gemini CLI, OpenCode and pi: each
finds this project's sessions where the agent keeps them, in process through the CLI."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dsh_chapters.bootstrap import bootstrap
from dsh_chapters.services.live_archive import LiveArchive
from dsh_chapters_harness.gemini_cli import project_hash
from dsh_chapters_harness.pi import session_folder

from tests.app.archive_workspace import Runner, make_workspace, runner
from tests.app.watch_session import Setup, Watcher
from tests.fixtures import other_agents as fx


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every agent's folders under one temporary home, none of the real ones."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("GEMINI_CLI_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    return home


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "acme-api")


@pytest.fixture
def run(ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Runner:
    return runner(ws, monkeypatch, capsys)


_ISO = re.compile(rb'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"')


def _records_of_now(data: bytes) -> bytes:
    """The fixture's record times moved, order kept, to end a minute ago: a live session
    (`chapters import` and `watch` take one whose last record is older than
    sessionFinalAfterMinutes to be over, as a copied transcript is)."""
    def seconds(stamp: bytes) -> float:
        return datetime.fromisoformat(stamp.decode().replace("Z", "+00:00")).timestamp()

    shift = time.time() - 60 - max(seconds(m) for m in _ISO.findall(data))

    def moved(match: re.Match[bytes]) -> bytes:
        when = datetime.fromtimestamp(seconds(match.group(1)) + shift, tz=UTC)
        return b'"' + when.isoformat(timespec="milliseconds").replace("+00:00", "Z").encode() \
            + b'"'

    return _ISO.sub(moved, data)


def gemini_session(home: Path, ws: Path) -> Path:
    chats = home / ".gemini" / "tmp" / project_hash(str(ws)) / "chats"
    chats.mkdir(parents=True)
    path = chats / "session-2026-01-10T02-08-3c1d5e2a.jsonl"
    path.write_bytes(_records_of_now(fx.gemini_jsonl().data))
    return path


def opencode_db(home: Path, ws: Path) -> Path:
    root = home / ".local" / "share" / "opencode"
    root.mkdir(parents=True, exist_ok=True)
    saved = fx.T0
    fx.T0 = int((time.time() - 600) * 1000)  # records of now: a live session (above)
    try:
        return fx.opencode_database(root / "opencode.db", directory=str(ws), others=2)
    finally:
        fx.T0 = saved


def pi_session(home: Path, ws: Path) -> Path:
    folder = home / ".pi" / "agent" / "sessions" / session_folder(str(ws))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"2026-07-14T16-11-12-625Z_{fx.PI_SESSION}.jsonl"
    path.write_bytes(fx.pi_session().data)
    return path


def chapter_texts(ws: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((ws / ".dsh-chapters").rglob("*.md")))


@pytest.mark.parametrize(("agent", "make", "turns"), [
    ("gemini-cli", gemini_session, 2), ("opencode", opencode_db, 4), ("pi", pi_session, 3)])
def test_import_finds_this_projects_sessions_where_the_agent_keeps_them(
        run: Runner, home: Path, ws: Path, agent: str, make: object, turns: int) -> None:
    assert callable(make)
    make(home, ws)
    result = run("import", agent, "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["sessions"] == 1 and data["imported"] == 1 and data["turnsArchived"] == turns
    again = json.loads(run("import", agent, "--json").out)
    assert again["turnsArchived"] == 0 and again["chapters"] == 0  # nothing twice


def test_import_final_archives_the_last_gemini_turn(run: Runner, home: Path, ws: Path) -> None:
    gemini_session(home, ws)
    assert json.loads(run("import", "gemini-cli", "--json").out)["turnsArchived"] == 2
    final = json.loads(run("import", "gemini-cli", "--final", "--json").out)
    assert final["turnsArchived"] == 1
    text = chapter_texts(ws)
    for said in (fx.G_PROMPT_1, fx.G_PROMPT_2, fx.G_TYPED_3, fx.G_REPLY_1, fx.G_REPLY_3):
        assert said in text
    assert "Content from @src/orders.py" not in text  # host context screened


def test_import_from_a_source_folder_and_archive_by_auto_detection(
        run: Runner, tmp_path: Path) -> None:
    source = tmp_path / "exports"
    source.mkdir()
    (source / "full.jsonl").write_bytes(fx.opencode_export().data)
    result = run("import", "opencode", "--source", str(source), "--json")
    assert result.code == 0 and json.loads(result.out)["turnsArchived"] == 4
    for name, data in (("g.json", fx.gemini_document().data), ("p.jsonl", fx.pi_session().data)):
        path = tmp_path / name
        path.write_bytes(data)
        archived = run("archive", str(path), "--final", "--json")
        assert archived.code == 0, archived.err
    text = chapter_texts(tmp_path / "acme-api")
    for said in (*fx.O_PROMPTS, *fx.O_REPLIES, fx.G_REPLY_2, fx.P_REPLY_2B):
        assert said in text


def test_import_says_where_it_looked_when_nothing_is_there(run: Runner) -> None:
    result = run("import", "pi")
    assert result.code == 1 and "no pi session" in result.err and "--source" in result.err


def test_install_and_uninstall_through_the_cli(run: Runner, home: Path, ws: Path) -> None:
    result = run("install", "gemini-cli", "--json")
    assert result.code == 0, result.err
    settings = ws / ".gemini" / "settings.json"
    assert json.loads(settings.read_text())["mcpServers"]["dsh-chapters"]["args"][-1] == "mcp"
    user = run("install", "opencode", "--scope", "user")
    assert user.code == 0 and "registered MCP server dsh-chapters" in user.out
    config = home / ".config" / "opencode" / "opencode.json"
    assert json.loads(config.read_text())["mcp"]["dsh-chapters"]["type"] == "local"
    assert run("uninstall", "gemini-cli").code == 0 and not settings.exists()
    assert run("uninstall", "opencode", "--scope", "user").code == 0 and not config.exists()
    pi = run("install", "pi")
    assert pi.code == 1 and "pi reads no MCP configuration" in pi.err
    assert "chapters watch" in pi.err


def test_watch_once_archives_every_agents_sessions(run: Runner, home: Path, ws: Path) -> None:
    gemini_session(home, ws)
    opencode_db(home, ws)
    pi_session(home, ws)
    result = run("watch", "--once", "--json")
    assert result.code == 0, result.err
    archived = {json.loads(line)["harness"]: json.loads(line)["turnsArchived"]
                for line in result.out.splitlines() if '"archived"' in line}
    assert archived == {"gemini-cli": 2, "opencode": 4, "pi": 3}


def test_a_new_session_in_opencodes_database_is_followed_by_its_log(
        home: Path, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenCode writes every session into one database: a write to its log (or the database)
    makes the watcher look for new sessions of this project and read the changed ones."""
    monkeypatch.setenv("DSH_HOME", str(ws.parent / "dsh-home"))
    database = opencode_db(home, ws)
    live = LiveArchive(bootstrap(ws, dict(os.environ)), ("opencode",))
    live.discover()
    assert [a.report.turns_archived for a in live.pass_over() if a.report] == [4]
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("INSERT INTO session VALUES ('ses_second0000000000000000', ?, NULL, 's', "
                       "?, 't', '1.2.0', 1, 1)", (fx.OC_PROJECT, str(ws)))
    user = {"role": "user", "time": {"created": fx.T0 + 90_000}, "agent": "build",
            "model": {"providerID": "p", "modelID": "m"}}
    reply = {"role": "assistant", "time": {"created": fx.T0 + 91_000,
                                           "completed": fx.T0 + 92_000},
             "finish": "stop", "parentID": "msg_a", "modelID": "m", "providerID": "p",
             "mode": "build", "agent": "build", "path": {"cwd": str(ws), "root": str(ws)},
             "cost": 0, "tokens": {"input": 1, "output": 1, "reasoning": 0,
                                   "cache": {"read": 0, "write": 0}}}
    for message_id, info, text in (("msg_a", user, "A second question"),
                                   ("msg_b", reply, "A second answer")):
        connection.execute("INSERT INTO message VALUES (?, 'ses_second0000000000000000', ?, ?, "
                           "?)", (message_id, info["time"]["created"], 1, json.dumps(info)))
        connection.execute("INSERT INTO part VALUES (?, ?, 'ses_second0000000000000000', 1, 1, ?)",
                           (f"prt_{message_id}", message_id,
                            json.dumps({"type": "text", "text": text})))
    connection.commit()
    changed = {f"{database}-wal"} if Path(f"{database}-wal").exists() else {str(database)}
    done = live.pass_over(changed)
    connection.close()
    by_session = {Path(a.path).name.split("#")[-1]: a.report.turns_archived
                  for a in done if a.report}
    assert by_session == {"ses_second0000000000000000": 1, fx.OC_SESSION: 0}


@pytest.mark.slow
def test_watch_follows_new_sessions_live(home: Path, ws: Path, tmp_path: Path) -> None:
    """A real `chapters watch`: a pi session file, then OpenCode's database, written while it
    runs, are archived within seconds of their writes (inotify on `.jsonl` and `.db-wal`)."""
    # pi made the project's folder in an earlier session (a folder made and written in the
    # same instant can be missed by the kernel watch until the file's next write).
    (home / ".pi" / "agent" / "sessions" / session_folder(str(ws))).mkdir(parents=True)
    (home / ".local" / "share" / "opencode").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "DSH_HOME": str(tmp_path / "dsh-home"),
           "DSH_CHAPTERS_HARNESS_ID": "laptop"}
    watcher = Watcher(Setup(ws, env, home / "unused.jsonl"))
    try:
        watcher.wait_for("watching")
        pi_session(home, ws)
        row = watcher.wait_for("archived", timeout=30)
        assert row["harness"] == "pi" and row["turnsArchived"] == 3
        opencode_db(home, ws)
        row = watcher.wait_for("archived", timeout=30)
        assert row["harness"] == "opencode" and row["turnsArchived"] == 4
        assert watcher.stop() == 0
    finally:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.proc.wait(timeout=10)
        assert watcher.proc.stdout is not None
        watcher.proc.stdout.close()
    assert fx.P_REPLY_1 in chapter_texts(ws) and fx.O_REPLY_3 in chapter_texts(ws)


def test_import_finalizes_an_idle_database_session(run: Runner, home: Path, ws: Path) -> None:
    """A session inside OpenCode's database is as idle as the database: its unfinished tail
    is archived by `chapters import` once the database has not been written for a while."""
    _, messages = fx.opencode_session()
    database = opencode_db(home, ws)
    connection = sqlite3.connect(database)
    connection.execute("DELETE FROM part WHERE message_id = ?", (messages[-1]["info"]["id"],))
    connection.execute("DELETE FROM message WHERE id = ?", (messages[-1]["info"]["id"],))
    connection.commit()
    connection.close()
    assert json.loads(run("import", "opencode", "--json").out)["turnsArchived"] == 3
    hours_ago = time.time() - 3 * 3600
    for path in database.parent.glob("opencode.db*"):
        os.utime(path, (hours_ago, hours_ago))
    assert json.loads(run("import", "opencode", "--json").out)["turnsArchived"] == 1
