"""The service behind `chapters watch`, in process: which files are this project's, what a pass
archives, when an idle session is finalized (once), and that another project's writes cost
one look each."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from dsh_chapters.bootstrap import bootstrap
from dsh_chapters.services.live_archive import LiveArchive, seconds_until_idle
from dsh_chapters_harness.claude_code import project_dir_name

from tests.app.archive_workspace import make_workspace
from tests.fixtures import make_real_shapes as shapes

V1 = shapes.ROOT / "claude-code" / shapes.PROJECT_DIR / f"{shapes.V1_SESSION}.jsonl"
ROLLOUT = shapes.ROOT / shapes.CODEX_FILE


def rollout_for(cwd: str) -> str:
    lines = ROLLOUT.read_text().splitlines()
    meta = json.loads(lines[0])
    meta["payload"]["cwd"] = cwd
    return "".join(line + "\n" for line in [json.dumps(meta), *lines[1:]])


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LiveArchive:
    ws = make_workspace(tmp_path / "acme-api")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "laptop")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    (tmp_path / "claude" / "projects" / project_dir_name(str(ws))).mkdir(parents=True)
    (tmp_path / "codex" / "sessions").mkdir(parents=True)
    return LiveArchive(bootstrap(ws, dict(os.environ)), ("claude-code", "codex"))


def claude_dir(live: LiveArchive, project: str | None = None) -> Path:
    root = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "projects"
    path = root / (project or project_dir_name(str(live.app.workspace)))
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_a_pass_archives_this_projects_files_and_sorts_new_ones(live: LiveArchive) -> None:
    ours = claude_dir(live) / V1.name
    ours.write_bytes(shapes.restamped(V1.read_bytes()))  # a live session: records of now
    live.discover()
    [done] = live.pass_over()
    assert done.report is not None and done.report.turns_archived == 2  # live: the clamp
    assert done.report.clamp
    sessions = Path(os.environ["CODEX_HOME"]) / "sessions"
    mine = sessions / "rollout-2026-11-22T08-30-00-aaaa.jsonl"
    theirs = sessions / "rollout-2026-11-22T08-30-00-bbbb.jsonl"
    pending = sessions / "rollout-2026-11-22T08-30-00-cccc.jsonl"
    mine.write_text(rollout_for(str(live.app.workspace)))
    theirs.write_text(rollout_for("/somewhere/else"))
    pending.write_text('{"timestamp": "2026-11-22T08:30:00.000Z", "type": "session_me')
    other = claude_dir(live, "-somewhere-else") / "x.jsonl"
    other.write_bytes(V1.read_bytes())
    done = live.pass_over({str(mine), str(theirs), str(pending), str(other)})
    assert [(d.harness, Path(d.path).name) for d in done] == [("codex", mine.name)]
    assert live.foreign == {str(theirs), str(other)}  # asked once; `pending` is asked again
    assert str(pending) not in live.files
    pending.write_text(rollout_for(str(live.app.workspace)))
    done = live.pass_over({str(pending)})
    assert [Path(d.path).name for d in done] == [pending.name]
    assert live.sync_point() == ""  # no pool linked: nothing to push, nothing pending


def test_an_idle_session_is_finalized_once(live: LiveArchive) -> None:
    ours = claude_dir(live) / V1.name
    ours.write_bytes(shapes.restamped(V1.read_bytes()))
    live.discover()
    live.pass_over()
    wait = seconds_until_idle(live)
    assert wait is not None and 0 < wait <= 120 * 60
    hours_ago = time.time() - 3 * 3600
    os.utime(ours, (hours_ago, hours_ago))
    [done] = live.pass_over(set())  # an idle tick
    assert done.report is not None and done.report.ended and done.report.turns_archived == 1
    assert live.pass_over(set()) == []  # finalized at this mtime: not read again
    assert seconds_until_idle(live) is None


def test_a_file_written_now_whose_records_are_old_is_a_session_that_is_over(
    live: LiveArchive,
) -> None:
    """A transcript copied in (mtime now) whose last record is days old ended long ago."""
    ours = claude_dir(live) / V1.name
    ours.write_bytes(shapes.restamped(V1.read_bytes(), time.time() - 3 * 86400))
    live.discover()
    [done] = live.pass_over()
    assert done.report is not None and done.report.final
    assert done.report.turns_archived == 3 and not done.report.clamp


def test_archives_push_with_the_sync_debounce_and_a_deferred_push_goes_out_later(
    live: LiveArchive, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_chapters.cli import main

    ws = live.app.workspace
    (ws / ".dsh-chapters").mkdir(exist_ok=True)
    (ws / ".dsh-chapters" / "config.toml").write_text("syncDebounceMs = 1500\n")
    assert main(["-C", str(ws), "link", str(tmp_path / "pool.git")]) == 0
    capsys.readouterr()
    live = LiveArchive(bootstrap(ws, dict(os.environ)), live.harnesses)  # sees the link
    ours = claude_dir(live) / V1.name
    lines = V1.read_text().splitlines(keepends=True)
    ours.write_text("".join(lines[:6]))  # the first turn is complete once the second begins
    live.discover()
    live.pass_over()
    first = live.sync_point()
    assert "pushed" in first and not live.push_pending  # no push yet: it goes out now
    ours.write_text("".join(lines))
    live.pass_over({str(ours)})
    deferred = live.sync_point()
    assert "push deferred until" in deferred and live.push_pending  # §5.2: coalesced
    time.sleep(1.6)
    later = live.sync_point()  # the next wake-up after the window
    assert "pushed" in later and not live.push_pending


def test_watch_with_no_session_folder_says_which_it_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_chapters.cli import main

    ws = make_workspace(tmp_path / "acme-api")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "no-claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-codex"))
    assert main(["-C", str(ws), "watch"]) == 1
    err = capsys.readouterr().err
    assert "none of the 10 session folder(s) exists" in err and "no-codex" in err
    assert "next: run the agent once" in err
    assert main(["-C", str(ws), "watch", "--harness", "nobody"]) == 2
