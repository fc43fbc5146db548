"""`chapters archive/import/list/show/status` end to end on the real store and readers."""

from __future__ import annotations

import argparse
import io
import json
import shutil
from pathlib import Path

import pytest
from dsh_chapters.cli import Invocation
from dsh_chapters.commands.archive import run_import
from dsh_chapters_harness.claude_code import project_dir_name

from tests.app.archive_workspace import (
    CLAUDE_DIR,
    CLAUDE_SESSION,
    CODEX_DIR,
    DSH_FILE,
    DSH_SESSION,
    Runner,
    make_workspace,
    runner,
    snapshot,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


@pytest.fixture
def chapters(ws: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> Runner:
    return runner(ws, monkeypatch, capsys)


# The DSH fixture's line count (it was 262 in the invented format the real one replaced).
DSH_LINES = len(DSH_FILE.read_bytes().splitlines())


def _chapter_files(ws: Path) -> list[Path]:
    return sorted(ws.glob(".dsh-chapters/*/chapters/*.md"))


def test_archive_prints_the_report_and_writes_the_store(ws: Path, chapters: Runner) -> None:
    result = chapters("archive", str(DSH_FILE))
    assert result.code == 0, result.err
    out = result.out
    assert f"archived dsh session {DSH_SESSION[:8]} from {DSH_FILE.name}" in out
    assert f"lines      {DSH_LINES} total · " in out and "malformed" in out
    assert "skipped by rule: " in out
    assert "redactions " in out and "aws-access-key" in out
    assert "screened   " in out
    files = _chapter_files(ws)
    assert f"chapters   {len(files)} written" in out
    ids = [f"{DSH_SESSION[:8]}/{n}" for n in range(1, len(files) + 1)]
    assert all(f"    {i} " in out for i in ids)  # each chapter by the id `list` prints
    assert all(len(line) <= 100 for line in out.splitlines())
    wide = chapters("archive", "--wide", "--final", str(DSH_FILE)).out
    assert f"archived dsh session {DSH_SESSION} from {DSH_FILE}" in wide
    assert (ws / ".dsh-chapters" / DSH_SESSION / "session.json").is_file()
    record = json.loads((ws / ".dsh-chapters" / DSH_SESSION / "session.json").read_text())
    assert record["harnessId"] == "laptop" and record["harness"] == "dsh"
    assert record["watermark"] > 0


def test_archive_json_report(ws: Path, chapters: Runner) -> None:
    result = chapters("archive", str(DSH_FILE), "--json", "--harness", "dsh")
    data = json.loads(result.out)
    assert data["sessionId"] == DSH_SESSION
    assert data["lines"]["total"] == DSH_LINES
    assert data["lines"]["imported"] + data["lines"]["skipped"] + data["lines"]["unknown"] + \
        data["lines"]["malformed"] == DSH_LINES
    assert data["turns"]["archived"] == data["turns"]["complete"] > 30
    assert len(data["chapters"]) == len(_chapter_files(ws))
    assert data["chapters"][0]["rule"] == "first"
    assert {c["rule"] for c in data["chapters"][1:]} <= {"below-threshold", "chapter-limit"}
    assert sum(data["redactions"].values()) >= 1
    assert data["artifacts"]["written"] >= 1


def test_rearchive_changes_no_byte(ws: Path, chapters: Runner) -> None:
    assert chapters("archive", str(DSH_FILE)).code == 0
    before = snapshot(ws / ".dsh-chapters")
    again = chapters("archive", str(DSH_FILE))
    assert again.code == 0
    assert "0 archived now" in again.out and "nothing new" in again.out
    assert snapshot(ws / ".dsh-chapters") == before


def test_appended_turns_archive_only_the_new_ones(ws: Path, chapters: Runner,
                                                  tmp_path: Path) -> None:
    lines = DSH_FILE.read_bytes().splitlines(keepends=True)
    live = tmp_path / DSH_FILE.name
    live.write_bytes(b"".join(lines[:120]))  # a session still being written
    first = json.loads(chapters("archive", str(live), "--json").out)
    assert first["clamp"] or first["turns"]["complete"] > 0
    before = snapshot(ws / ".dsh-chapters", derived=False)
    live.write_bytes(b"".join(lines))
    second = json.loads(chapters("archive", str(live), "--json").out)
    assert second["turns"]["alreadyArchived"] == first["turns"]["archived"]
    assert second["turns"]["archived"] == second["turns"]["complete"] - first["turns"]["archived"]
    assert second["watermark"]["before"] == first["watermark"]["after"]
    after = snapshot(ws / ".dsh-chapters", derived=False)
    changed = {p for p in before if after[p] != before[p]}
    # only the session record (its watermark), the signature log (appended), the reservation
    # and the store log move; no chapter or artifact of the first run changed
    assert changed <= {f"{DSH_SESSION}/session.json", f"{DSH_SESSION}/collections.jsonl",
                       f"state/reservations/{DSH_SESSION}.json", "logs/chapters.log"}
    old_sigs = (ws / ".dsh-chapters" / DSH_SESSION / "collections.jsonl").read_bytes()
    assert len(old_sigs.splitlines()) == second["turns"]["complete"]
    new_chapters = [c["path"] for c in second["chapters"]]
    assert all(p not in before for p in new_chapters)
    starts = [c["seqRange"][0] for c in second["chapters"]]
    assert min(starts) > first["watermark"]["after"]


def test_import_claude_code_from_source_then_again_adds_nothing(ws: Path,
                                                                chapters: Runner) -> None:
    result = chapters("import", "claude-code", "--source", str(CLAUDE_DIR))
    assert result.code == 0, result.err
    assert "imported 2 of 2 claude-code session(s)" in result.out
    assert "\r[" not in result.err  # not a terminal: no progress bar
    files = _chapter_files(ws)
    assert files and all(f.parent.parent.name == CLAUDE_SESSION for f in files)
    subagent = json.loads((ws / ".dsh-chapters" / CLAUDE_SESSION / "sessions" /
                           "agent-a4c1e2f.json").read_text())
    assert subagent["rootSessionId"] == CLAUDE_SESSION
    before = snapshot(ws / ".dsh-chapters")
    again = chapters("import", "claude-code", "--source", str(CLAUDE_DIR))
    assert again.code == 0 and "into 0 new chapter(s)" in again.out
    assert snapshot(ws / ".dsh-chapters") == before


def test_import_claude_code_matches_the_project_by_cwd(ws: Path, chapters: Runner,
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    projects = home / ".claude" / "projects"
    shutil.copytree(CLAUDE_DIR / "-home-dev-work-acme-api", projects / project_dir_name(str(ws)))
    shutil.copytree(CLAUDE_DIR / "-home-dev-work-acme-api", projects / "-some-other-project")
    monkeypatch.setenv("HOME", str(home))
    result = chapters("import", "claude-code", "--json")
    data = json.loads(result.out)
    assert data["sessions"] == 2 and data["imported"] == 2
    assert all(str(projects / project_dir_name(str(ws))) in r["source"] for r in data["reports"])


def test_import_codex(ws: Path, chapters: Runner) -> None:
    result = chapters("import", "codex", "--source", str(CODEX_DIR), "--json")
    data = json.loads(result.out)
    assert data["imported"] == 1 and data["chapters"] == len(_chapter_files(ws)) > 0
    assert data["reports"][0]["harness"] == "codex"


def test_import_refuses_clearly(ws: Path, chapters: Runner, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = chapters("import", "codex", "--source", str(empty))
    assert nothing.code == 1 and f"no codex session file under {empty}: it holds no file" in \
        nothing.err and "--source" in nothing.err
    # Rollouts renamed (a copy, an export): the folder's files are named, and what Codex calls
    # its session files, not "0 files" in a folder that holds some.
    renamed = tmp_path / "renamed"
    (renamed / "2026").mkdir(parents=True)
    rollout = next(CODEX_DIR.rglob("rollout-*.jsonl")).read_bytes()
    for name in ("b.jsonl", "a.jsonl"):
        (renamed / "2026" / name).write_bytes(rollout)
    wrong = chapters("import", "codex", "--source", str(renamed))
    assert wrong.code == 1 and "none of its 2 files is one (such as a.jsonl)" in wrong.err
    assert "codex names its session files rollout-*.jsonl" in wrong.err
    assert not (ws / ".dsh-chapters").exists() or not _chapter_files(ws)
    unknown = chapters("import", "no-such-agent")
    assert unknown.code == 2 and "no such reader" in unknown.err
    missing = chapters("import", "codex", "--source", str(tmp_path / "nope"))
    assert missing.code == 2 and "not a directory" in missing.err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_import_shows_a_progress_bar_on_a_terminal(ws: Path, chapters: Runner) -> None:
    import os

    inv = Invocation(cwd=ws, json=False, env=dict(os.environ), stdout=io.StringIO(),
                     stderr=_Terminal())
    args = argparse.Namespace(harness="claude-code", source=str(CLAUDE_DIR), wide=False)
    assert run_import(args, inv) == 0
    bar = inv.stderr.getvalue()
    assert "\r[" in bar and "] 2/2 " in bar and bar.endswith("\n")
    assert "[" + "#" * 30 + "]" in bar


def test_list_show_and_status(ws: Path, chapters: Runner) -> None:
    assert chapters("archive", str(DSH_FILE)).code == 0
    listed = json.loads(chapters("list", "--json").out)
    files = _chapter_files(ws)
    assert len(listed) == len(files)
    first = listed[0]
    assert set(first) >= {"number", "date", "title", "messages", "topics", "path"}
    assert first["number"] == 1 and first["messages"]["user"] >= 1 and first["topics"]
    assert (ws / first["path"]).is_file()
    text = chapters("list").out.splitlines()
    assert text[0].startswith(f"{DSH_SESSION[:8]}  ") and f"{len(files)} chapters" in text[0]
    assert text[1].startswith(f"  {first['id']} ") and first["id"] == f"{DSH_SESSION[:8]}/1"
    assert first["title"][:40] in text[1]
    assert text[-1].startswith(f"{len(files)} chapter(s) in 1 session(s) in ")
    wide = chapters("list", "--wide").out.splitlines()
    assert first["path"] in wide[1] and first["title"] in wide[1]

    by_number = chapters("show", "1")
    assert by_number.code == 0
    assert by_number.out == (ws / first["path"]).read_text()
    assert chapters("show", f"{DSH_SESSION[:12]}/001").out == by_number.out
    assert chapters("show", first["path"]).out == by_number.out
    shown = json.loads(chapters("show", "2", "--json").out)
    assert shown["path"] == listed[1]["path"] and shown["text"].startswith("---\n")
    missing = chapters("show", "999")
    assert missing.code == 1 and "no chapter '999': no chapter 999 there" in missing.err

    status = chapters("status")
    assert status.code == 0
    assert f"store      {ws / '.dsh-chapters'}" in status.out
    assert f"archive    {len(files)} chapter(s) · " in status.out
    assert "1 session(s)" in status.out and "lock       free" in status.out
    assert "projectKey " in status.out and "remote: github.com/acme/api" in status.out
    data = json.loads(chapters("status", "--json").out)
    assert data["store"]["chapters"] == len(files) and data["store"]["sessions"] == 1
    assert data["store"]["artifacts"] == len(list(ws.glob(".dsh-chapters/artifacts/*/*.txt")))
    assert data["store"]["lastArchive"]["sessionId"] == DSH_SESSION
    assert data["lock"] == {"held": False, "pid": 0, "ageSeconds": 0.0, "stale": False,
                            "path": str(ws / ".dsh-chapters" / "state" / "writer.lock")}
    assert "pool" in data


def test_status_reads_the_store_once_for_what_the_pool_lacks(
        ws: Path, chapters: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    # Counting what is not yet shared digests every store file and its mirror copy: on a
    # store of 2,769 real chapters a second count cost `chapters status` a second.
    from dsh_chapters.services import pool

    assert chapters("archive", str(DSH_FILE)).code == 0
    counted: list[str] = []
    real = pool.pending_paths

    def counting(*args: object, **kwargs: object) -> tuple[str, ...]:
        counted.append("pending")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pool, "pending_paths", counting)
    status = chapters("status")
    assert status.code == 0 and "file(s) to share" in status.out
    assert counted == ["pending"]


def test_show_asks_for_the_session_when_a_number_is_ambiguous(ws: Path,
                                                              chapters: Runner) -> None:
    assert chapters("archive", str(DSH_FILE)).code == 0
    assert chapters("import", "codex", "--source", str(CODEX_DIR)).code == 0
    ambiguous = chapters("show", "001")
    assert ambiguous.code == 2 and "'001' is chapter 1 of 2 sessions: " in ambiguous.err
    assert f"{DSH_SESSION[:8]}/1" in ambiguous.err


def test_an_empty_store_lists_and_reports_plainly(ws: Path, chapters: Runner) -> None:
    assert "no chapters in" in chapters("list").out
    status = json.loads(chapters("status", "--json").out)
    assert status["store"]["chapters"] == 0 and status["store"]["lastArchive"] is None
    assert not (ws / ".dsh-chapters").exists()  # looking never creates the store


def test_harness_names_are_checked(ws: Path, chapters: Runner, tmp_path: Path) -> None:
    wrong = chapters("archive", str(DSH_FILE), "--harness", "no-such-agent")
    assert wrong.code == 2 and "--harness no-such-agent: no such reader" in wrong.err
    assert "auto, " in wrong.err and "codex" in wrong.err
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"note": "not a codex rollout"}\n' * 3)
    forced = chapters("archive", str(notes), "--harness", "codex")
    assert forced.code == 1 and "3" in forced.err
    assert not (ws / ".dsh-chapters").exists()
