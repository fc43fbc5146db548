"""`chapters import dsh`: this workspace's sessions, found where DSH keeps them under DSH_HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard
from dsh_chapters_core.events import AssistantMessage, HostInjection, UserMessage
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_harness.dsh import DshReader
from dsh_chapters_harness.dsh_discovery import project_key

from tests.app.archive_workspace import Runner, make_workspace, runner, snapshot
from tests.fixtures import DSH_LOG, DSH_SESSIONS, PROJECT_CWD
from tests.fixtures.dsh_logs import RUNTIME
from tests.fixtures.dsh_sessions import (
    COMMANDS_ID,
    COMPACTION_ID,
    FORK_CHILD_ID,
    FORK_PARENT_ID,
    INSTRUCTIONS_ID,
    INTERRUPTED_ID,
    SUBAGENT_ID,
    log_path,
    records,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "acme-api")


@pytest.fixture
def chapters(ws: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> Runner:
    return runner(ws, monkeypatch, capsys)


def place_sessions(ws: Path) -> list[Path]:
    """The fixture logs of PROJECT_CWD, moved to `ws` (header cwd and project dir), one zstd."""
    sessions = ws.parent / "dsh-home" / "sessions"
    placed = []
    for source in sorted(DSH_SESSIONS.glob("*/*/session.jsonl")):
        lines = source.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        if header["cwd"] != PROJECT_CWD:
            cwd = header["cwd"]  # another project's session stays another project's
        else:
            cwd = header["cwd"] = str(ws)
        lines[0] = json.dumps(header, separators=(",", ":"))
        target = sessions / project_key(cwd) / source.parent.name / "session.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(line + "\n" for line in lines)
        if not placed:  # DSH's default: one checksummed frame per append batch
            cctx = zstandard.ZstdCompressor(write_checksum=True)
            target = target.with_name("session.jsonl.zstd")
            target.write_bytes(cctx.compress((lines[0] + "\n").encode()) +
                               cctx.compress(text.split("\n", 1)[1].encode()))
        else:
            target.write_text(text, encoding="utf-8")
        if cwd == str(ws):
            placed.append(target)
    return placed


def test_import_dsh_finds_and_archives_this_workspaces_sessions_then_writes_nothing(
    ws: Path, chapters: Runner,
) -> None:
    placed = place_sessions(ws)
    assert len(placed) == 8
    first = chapters("import", "dsh", "--json")
    assert first.code == 0, first.err
    data = json.loads(first.out)
    assert data["sessions"] == data["imported"] == len(placed)
    assert data["chapters"] > 0 and data["failures"] == []
    assert {r["source"] for r in data["reports"]} == {str(p) for p in placed}
    linked = {r["sessionId"]: r["rootSessionId"] for r in data["reports"]
              if r["sessionId"] != r["rootSessionId"]}
    assert linked == {FORK_CHILD_ID: FORK_PARENT_ID, SUBAGENT_ID: FORK_PARENT_ID}
    assert all(r["lines"]["unknown"] == r["lines"]["malformed"] == 0 for r in data["reports"])
    store = snapshot(ws / ".dsh-chapters")
    again = chapters("import", "dsh", "--json")
    assert again.code == 0, again.err
    assert json.loads(again.out)["chapters"] == 0
    assert snapshot(ws / ".dsh-chapters") == store


def test_import_dsh_with_no_session_of_this_workspace_says_where_it_looked(
    ws: Path, chapters: Runner,
) -> None:
    result = chapters("import", "dsh")
    assert result.code != 0
    assert "no dsh session" in result.err and "0 files" in result.err


def test_archive_auto_detects_a_zstd_log_still_being_written_and_says_where_it_stopped(
    ws: Path, chapters: Runner,
) -> None:
    lines = DSH_LOG.read_text(encoding="utf-8").splitlines()
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    frames = [cctx.compress((lines[0] + "\n").encode())]
    frames += [cctx.compress("".join(f"{line}\n" for line in lines[i:i + 50]).encode())
               for i in range(1, len(lines), 50)]
    whole = b"".join(frames)
    live = ws.parent / "session.jsonl.zstd"
    live.write_bytes(whole[: len(whole) - len(frames[-1]) // 2])  # the last frame half written
    result = chapters("archive", str(live))
    assert result.code == 0, result.err
    assert f"archived dsh session {DSH_LOG.parent.name[:8]} from {live.name}" in result.out
    assert "the last line is incomplete" in result.out and "read stopped after line" in result.out
    assert "0 unknown" in result.out


def _bodies(ws: Path) -> str:
    return "\n".join(split_frontmatter(p.read_text(encoding="utf-8"))[1]
                     for p in sorted((ws / ".dsh-chapters").glob("*/chapters/*.md")))


@pytest.mark.parametrize("sid", [COMPACTION_ID, INSTRUCTIONS_ID, FORK_CHILD_ID, SUBAGENT_ID,
                                 COMMANDS_ID, INTERRUPTED_ID])
def test_each_fixture_archives_its_texts_verbatim_and_no_injected_text(
    ws: Path, chapters: Runner, sid: str,
) -> None:
    path = log_path(DSH_SESSIONS, sid)
    result = chapters("archive", str(path), "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["lines"]["unknown"] == report["lines"]["malformed"] == 0
    body = _bodies(ws)
    transcript = DshReader().read(str(path))
    said = [e.text for e in transcript.events if isinstance(e, UserMessage | AssistantMessage)]
    assert said and all(text in body for text in said)
    injected = [e.text for e in transcript.events if isinstance(e, HostInjection)]
    assert all(text not in body for text in injected)
    assert RUNTIME not in body and "Instructions from:" not in body
    assert "compacted-summary" not in body and "Permission preset now" not in body


def test_a_fork_childs_chapters_hold_only_its_own_turns(ws: Path, chapters: Runner) -> None:
    parent_prompt = records(log_path(DSH_SESSIONS, FORK_PARENT_ID))[5]["data"]["content"][0]
    assert parent_prompt["text"].startswith("Keep this in mind")
    result = chapters("archive", str(log_path(DSH_SESSIONS, FORK_CHILD_ID)), "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["rootSessionId"] == FORK_PARENT_ID and report["turns"]["archived"] == 1
    body = _bodies(ws)
    assert "HAZELNUT" in body and parent_prompt["text"] not in body
