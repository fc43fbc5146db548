"""`chapters import cursor|copilot-cli|aider`: this workspace's sessions, found where each
harness keeps them (by the folder or cwd it records), archived verbatim; a second import writes
nothing; `--source DIR` and `chapters archive FILE` read the same files."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from dsh_chapters_harness.cursor import project_slug

from tests.app.archive_workspace import Runner, make_workspace, runner, snapshot
from tests.fixtures import make_agent_fixtures as fx

AGENTS = Path(fx.__file__).parent / "agents"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "acme-api")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    monkeypatch.delenv("AIDER_CHAT_HISTORY_FILE", raising=False)
    return home


@pytest.fixture
def chapters(ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> Runner:
    return runner(ws, monkeypatch, capsys)


def _moved(text: str, ws: Path) -> str:
    return text.replace(fx.CWD, str(ws))


def place_copilot(home: Path, ws: Path) -> Path:
    target = home / ".copilot" / fx.COPILOT_FILE.removeprefix("copilot-cli/")
    target.parent.mkdir(parents=True)
    target.write_text(_moved((AGENTS / fx.COPILOT_FILE).read_text(), ws))
    other = target.parent.parent / "0000-other" / "events.jsonl"  # another project's session
    other.parent.mkdir()
    other.write_text((AGENTS / fx.COPILOT_FILE).read_text())
    return target


def place_cursor(home: Path, ws: Path) -> tuple[Path, str]:
    folder = home / ".cursor" / "projects" / project_slug(str(ws)) / "agent-transcripts"
    folder.mkdir(parents=True)
    transcript = folder / Path(fx.CURSOR_FILE).name
    shutil.copy(AGENTS / fx.CURSOR_FILE, transcript)
    db = home / ".config" / "Cursor" / "User" / "globalStorage" / "state.vscdb"
    db.parent.mkdir(parents=True)
    chat = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, "
                     "value BLOB)")
        conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (f"composerData:{chat}", json.dumps(
            {"composerId": chat, "status": "completed", "createdAt": 1795165200000,
             "workspaceIdentifier": {"uri": {"fsPath": str(ws)}},
             "fullConversationHeadersOnly": [{"bubbleId": "u", "type": 1},
                                             {"bubbleId": "a", "type": 2}]})))
        conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (f"bubbleId:{chat}:u", json.dumps(
            {"type": 1, "text": "Where is the rate limiter configured?"})))
        conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (f"bubbleId:{chat}:a", json.dumps(
            {"type": 2, "text": "In `config/limits.toml`, read by `RateLimiter.from_settings`."})))
    conn.close()
    return transcript, chat


def _chapter_text(ws: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((ws / ".dsh-chapters").rglob("*.md")))


def _import(chapters: Runner, *argv: str) -> dict[str, object]:
    result = chapters("import", *argv, "--final", "--json")
    assert result.code == 0, result.err
    data: dict[str, object] = json.loads(result.out)
    return data


def test_import_copilot_cli_finds_this_project_s_sessions_by_their_cwd(
        ws: Path, home: Path, chapters: Runner) -> None:
    placed = place_copilot(home, ws)
    data = _import(chapters, "copilot-cli")
    assert (data["sessions"], data["imported"]) == (1, 1)
    report = data["reports"][0]  # type: ignore[index]
    assert report["source"] == str(placed) and report["turns"]["archived"] == 4
    assert report["lines"]["unknown"] == report["lines"]["malformed"] == 0
    text = _chapter_text(ws)
    for words in (*fx.COPILOT_PROMPTS, fx.COPILOT_STEERING, *fx.COPILOT_REPLIES):
        assert words in text
    assert "You are the GitHub Copilot CLI" not in text  # the system prompt is screened
    store = snapshot(ws / ".dsh-chapters")
    assert _import(chapters, "copilot-cli")["chapters"] == 0
    assert snapshot(ws / ".dsh-chapters") == store


def test_import_cursor_takes_the_transcripts_and_the_ide_chats_of_this_project(
        ws: Path, home: Path, chapters: Runner) -> None:
    _, chat = place_cursor(home, ws)
    data = _import(chapters, "cursor")
    assert data["sessions"] == data["imported"] == 2
    sessions = {r["sessionId"] for r in data["reports"]}  # type: ignore[attr-defined]
    assert sessions == {fx.CURSOR_SESSION_ID, chat}
    text = _chapter_text(ws)
    for words in (*fx.CURSOR_PROMPTS, *fx.CURSOR_REPLIES, "Where is the rate limiter "
                  "configured?"):
        assert words in text
    assert fx.FOLLOW_UP not in text
    store = snapshot(ws / ".dsh-chapters")
    assert _import(chapters, "cursor")["chapters"] == 0
    assert snapshot(ws / ".dsh-chapters") == store


def test_import_aider_reads_the_history_in_the_repository(ws: Path, chapters: Runner) -> None:
    shutil.copy(AGENTS / fx.AIDER_FILE, ws / ".aider.chat.history.md")
    data = _import(chapters, "aider")
    assert data["sessions"] == data["imported"] == 1
    # --final: the session is over, so its last turn (in flight) is archived too.
    assert data["reports"][0]["turns"]["archived"] == 4  # type: ignore[index]
    text = _chapter_text(ws)
    for words in (*fx.AIDER_PROMPTS, *fx.AIDER_REPLIES):
        assert words in text
    assert "Commit 4e5f6a7 fix: read retry_limit from the settings" in text


def test_import_with_a_source_and_archive_of_one_file_detect_each_format(
        ws: Path, tmp_path: Path, chapters: Runner) -> None:
    source = tmp_path / "copied"
    shutil.copytree(AGENTS, source)
    for harness, expected in (("copilot-cli", 1), ("cursor", 2), ("aider", 1)):
        data = _import(chapters, harness, "--source", str(source))
        assert data["sessions"] == expected, harness
    for relative in (fx.COPILOT_FILE, fx.CURSOR_FILE, fx.AIDER_FILE):
        result = chapters("archive", str(source / relative), "--json")
        assert result.code == 0, result.err
        assert json.loads(result.out)["chapters"] == [], relative  # imported already


def test_import_says_where_it_looked_when_nothing_is_there(ws: Path, chapters: Runner) -> None:
    for harness in ("cursor", "copilot-cli", "aider"):
        result = chapters("import", harness)
        assert result.code != 0 and f"no {harness} session" in result.err
