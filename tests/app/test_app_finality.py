"""A finished session keeps its last turn; a live one holds it back (§4.3); a resumed one adds
only its new turns, in a chapter linked to the final one, and rewrites nothing."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.app.archive_workspace import Runner, make_workspace, runner, snapshot
from tests.fixtures import make_real_shapes as shapes

V1 = shapes.ROOT / "claude-code" / shapes.PROJECT_DIR / f"{shapes.V1_SESSION}.jsonl"
HEADLESS = shapes.ROOT / "claude-code" / shapes.PROJECT_DIR / f"{shapes.HEADLESS_SESSION}.jsonl"
SHAPES = shapes.ROOT / "claude-code" / shapes.PROJECT_DIR / f"{shapes.SHAPES_SESSION}.jsonl"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


@pytest.fixture
def chapters(ws: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> Runner:
    return runner(ws, monkeypatch, capsys)


@pytest.fixture
def live(tmp_path: Path) -> Path:
    """A copy of the 1.0.x session, written just now (a live file)."""
    path = tmp_path / "claude" / V1.name
    path.parent.mkdir(parents=True)
    shutil.copyfile(V1, path)
    return path


def chapter_texts(ws: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8")
            for p in sorted(ws.glob(".dsh-chapters/*/chapters/*.md"))}


def frontmatter(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text.split("---\n", 2)[1])
    assert isinstance(data, dict)
    return data


def everything(ws: Path) -> str:
    """Every chapter body (frontmatter titles repeat a first prompt by design)."""
    return "".join(text.split("---\n", 2)[2] for text in chapter_texts(ws).values())


def archive(chapters: Runner, *argv: str) -> dict[str, Any]:
    result = chapters("archive", *argv, "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert isinstance(data, dict)
    return data


def test_a_finished_1_0_session_keeps_every_prompt_and_its_last_reply(
    ws: Path, chapters: Runner, live: Path
) -> None:
    report = archive(chapters, str(live), "--final")
    assert report["final"] is True and report["clamp"] == ""
    assert "ended: incomplete-turn" in report["ended"]
    assert report["turns"] == {"complete": 3, "archived": 3, "alreadyArchived": 0}
    body = everything(ws)
    for text in (*shapes.V1_PROMPTS, *shapes.V1_REPLIES):
        assert text in body  # verbatim
    ended = [name for name, text in chapter_texts(ws).items()
             if frontmatter(text).get("ended") == "incomplete-turn"]
    assert len(ended) == 1
    last = chapter_texts(ws)[ended[0]]
    assert shapes.V1_REPLIES[2] in last
    assert "· ended: incomplete-turn" in last  # the turn heading: what the toc shows
    listing = chapters("list")
    assert "(last turn unfinished)" in listing.out
    before = snapshot(ws / ".dsh-chapters")
    again = archive(chapters, str(live), "--final")
    assert again["turns"]["archived"] == 0 and again["chapters"] == []
    assert snapshot(ws / ".dsh-chapters") == before  # nothing archived twice


def test_the_same_file_archived_live_keeps_the_clamp(
    ws: Path, chapters: Runner, live: Path
) -> None:
    report = archive(chapters, str(live))
    assert report["final"] is False and report["ended"] == ""
    assert "has not ended, so it was held back" in report["clamp"]
    assert "§" not in report["clamp"]
    text = chapters("archive", str(live))  # nothing new: the same words, in plain text
    assert "held back" in text.out and "--final" in text.out
    assert "clamp" not in text.out and "§" not in text.out
    assert report["turns"]["archived"] == 2
    body = everything(ws)
    assert shapes.V1_REPLIES[1] in body and shapes.V1_REPLIES[2] not in body
    assert not any("ended" in frontmatter(t) for t in chapter_texts(ws).values())
    # Finalized afterwards, only the tail is archived.
    final = archive(chapters, str(live), "--final")
    assert final["turns"] == {"complete": 3, "archived": 1, "alreadyArchived": 2}
    assert everything(ws).count(shapes.V1_REPLIES[2]) == 1


def test_resuming_a_finished_session_archives_only_its_new_turns(
    ws: Path, chapters: Runner, live: Path
) -> None:
    archive(chapters, str(live), "--final")
    before = snapshot(ws / ".dsh-chapters" / shapes.V1_SESSION / "chapters")
    final_path = next(n for n, t in chapter_texts(ws).items() if "ended" in frontmatter(t))
    # `claude --resume` appends to the same file: a new prompt, its reply, its end.
    last = json.loads(live.read_text().splitlines()[-1])
    resumed = [
        {**last, "type": "user", "uuid": "resume-1", "parentUuid": last["uuid"],
         "timestamp": "2026-11-23T09:00:00.000Z",
         "message": {"role": "user", "content": "One more: log how many rows were exported."}},
        {**last, "uuid": "resume-2", "parentUuid": "resume-1",
         "timestamp": "2026-11-23T09:00:05.000Z",
         "message": {**last["message"], "content": [{"type": "text", "text": "Logged: "
                                                      "`exported 12000 rows` at INFO."}],
                     "stop_reason": "end_turn"}},
    ]
    with live.open("a", encoding="utf-8") as handle:
        for record in resumed:
            handle.write(json.dumps(record) + "\n")
    report = archive(chapters, str(live))
    assert report["turns"]["archived"] == 1 and len(report["chapters"]) == 1
    # Append-only: the final chapter and every one before it are byte for byte what they were.
    after = snapshot(ws / ".dsh-chapters" / shapes.V1_SESSION / "chapters")
    assert {k: after[k] for k in before} == before and len(after) == len(before) + 1
    new_name = next(n for n in chapter_texts(ws) if n not in before)
    new = chapter_texts(ws)[new_name]
    assert frontmatter(new)["continues"] == f"{shapes.V1_SESSION}/chapters/{final_path}"
    assert "One more: log how many rows" in new and shapes.V1_REPLIES[2] not in new
    assert everything(ws).count(shapes.V1_REPLIES[2]) == 1


def test_a_resumed_turn_that_goes_on_archives_only_what_came_after(
    ws: Path, chapters: Runner, tmp_path: Path
) -> None:
    # The headless run was finalized while its last reply had no end; more of that same turn
    # arrives later (a tool call and a reply): only those events are archived, once.
    path = tmp_path / "claude" / HEADLESS.name
    path.parent.mkdir(parents=True)
    shutil.copyfile(HEADLESS, path)
    archive(chapters, str(path), "--final")
    last = json.loads(path.read_text().splitlines()[-1])
    more = {**last, "uuid": "more-1", "parentUuid": last["uuid"],
            "timestamp": "2026-11-23T09:00:00.000Z",
            "message": {**last["message"], "content": [{"type": "text", "text":
                                                        "Also: the CSV now ends with a newline."}],
                        "stop_reason": "end_turn"}}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(more) + "\n")
    report = archive(chapters, str(path))
    assert report["turns"]["archived"] == 1
    body = everything(ws)
    assert body.count(shapes.HEADLESS_PROMPT) == 1 and body.count(shapes.HEADLESS_REPLY) == 1
    assert body.count("the CSV now ends with a newline") == 1


def test_import_treats_an_idle_file_as_finished_and_a_fresh_one_as_live(
    ws: Path, chapters: Runner, tmp_path: Path
) -> None:
    source = tmp_path / "source" / shapes.PROJECT_DIR
    source.mkdir(parents=True)
    idle = source / V1.name
    fresh = source / HEADLESS.name
    three_hours_ago = time.time() - 3 * 3600  # past sessionFinalAfterMinutes (120)
    idle.write_bytes(shapes.restamped(V1.read_bytes(), three_hours_ago))
    fresh.write_bytes(shapes.restamped(HEADLESS.read_bytes()))  # records of now: live
    os.utime(idle, (three_hours_ago, three_hours_ago))
    result = chapters("import", "claude-code", "--source", str(tmp_path / "source"), "--json")
    assert result.code == 0, result.err
    reports = {r["sessionId"]: r for r in json.loads(result.out)["reports"]}
    assert reports[shapes.V1_SESSION]["final"] is True
    assert reports[shapes.V1_SESSION]["turns"]["archived"] == 3
    assert reports[shapes.HEADLESS_SESSION]["final"] is False
    assert reports[shapes.HEADLESS_SESSION]["turns"]["archived"] == 0
    assert shapes.V1_REPLIES[2] in everything(ws)
    assert shapes.HEADLESS_REPLY not in everything(ws)
    # --final: every file is over, whatever its age.
    result = chapters("import", "claude-code", "--source", str(tmp_path / "source"), "--final")
    assert result.code == 0, result.err
    assert shapes.HEADLESS_REPLY in everything(ws)


def test_import_treats_a_copy_whose_last_record_is_old_as_finished(
    ws: Path, chapters: Runner, tmp_path: Path
) -> None:
    """Copied from another machine (mtime now), the session ended when its records say: its
    last turn is archived, and a live copy's held-back turn says how to archive it."""
    source = tmp_path / "source" / shapes.PROJECT_DIR
    source.mkdir(parents=True)
    old = source / HEADLESS.name
    old.write_bytes(shapes.restamped(HEADLESS.read_bytes(), time.time() - 40 * 86400))
    live = source / V1.name
    live.write_bytes(shapes.restamped(V1.read_bytes()))
    result = chapters("import", "claude-code", "--source", str(tmp_path / "source"))
    assert result.code == 0, result.err
    assert shapes.HEADLESS_REPLY in everything(ws)
    assert "held back" in result.out and "--final" in result.out
    assert "§" not in result.out and "clamp" not in result.out


def test_a_pr_link_becomes_the_chapters_pr_links_and_a_split_line_is_reported(
    ws: Path, chapters: Runner
) -> None:
    report = archive(chapters, str(SHAPES))
    assert report["lines"]["split"] == 1 and report["lines"]["malformed"] == 0
    linked = [frontmatter(t)["prLinks"] for t in chapter_texts(ws).values()
              if "prLinks" in frontmatter(t)]
    assert linked == [[shapes.PR_URL]]  # written twice in the transcript, kept once
    assert shapes.SPLIT_REPLY in everything(ws)
    assert f"{shapes.CUSTOM_COMMAND} {shapes.CUSTOM_ARGS}" in everything(ws)
    text = chapters("archive", str(SHAPES)).out
    assert "1 split (line " in text


@pytest.mark.parametrize("reason", ["clear", "logout", "prompt_input_exit", "other"])
def test_the_session_end_hook_archives_the_unfinished_last_turn_for_every_reason(
    ws: Path, chapters: Runner, live: Path, reason: str
) -> None:
    from dsh_chapters.bootstrap import bootstrap
    from dsh_chapters.hooks import HookPayload, run_hook

    app = bootstrap(ws, dict(os.environ))
    payload = HookPayload.parse(json.dumps({
        "session_id": shapes.V1_SESSION, "transcript_path": str(live), "cwd": str(ws),
        "hook_event_name": "SessionEnd", "reason": reason}))
    result = run_hook(app, payload)
    assert "error" not in result.fields, result.fields
    assert result.fields["turnsArchived"] == 3
    assert shapes.V1_REPLIES[2] in everything(ws)


def test_codex_stop_archives_completed_turns_and_prints_nothing(
    ws: Path, chapters: Runner, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import io

    from dsh_chapters.cli import main

    rollout = shapes.ROOT / shapes.CODEX_FILE
    payload = {"session_id": shapes.CODEX_SESSION, "transcript_path": str(rollout),
               "cwd": str(ws), "hook_event_name": "Stop", "model": "gpt-5-codex",
               "permission_mode": "default", "stop_hook_active": False, "turn_id": "t1",
               "last_assistant_message": "Booked."}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(payload)))
    capsys.readouterr()
    assert main(["-C", str(ws), "hook", "--agent", "codex"]) == 0
    out = capsys.readouterr()
    assert out.out == ""  # Codex reads a Stop hook's stdout as its decision
    assert "Booked: Release review, Friday" in everything(ws)
    log = [json.loads(line) for line in
           (ws / ".dsh-chapters" / "logs" / "chapters.log").read_text().splitlines()]
    [stop] = [e for e in log if e.get("hookEvent") == "Stop"]
    assert stop["turnsArchived"] == 1 and "error" not in stop


def test_codex_session_start_prints_the_notice_in_codexs_envelope(
    ws: Path, chapters: Runner, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import io

    from dsh_chapters.cli import main

    # codex-rs/hooks/schema: session-start input {session_id, transcript_path, cwd,
    # hook_event_name, model, permission_mode, source}; output hookSpecificOutput envelope.
    payload = {"session_id": shapes.CODEX_SESSION, "transcript_path": None, "cwd": str(ws),
               "hook_event_name": "SessionStart", "model": "gpt-5-codex",
               "permission_mode": "default", "source": "startup"}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(payload)))
    capsys.readouterr()
    assert main(["-C", str(ws), "hook", "--agent", "codex"]) == 0
    envelope = json.loads(capsys.readouterr().out)
    output = envelope["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    assert "# Continuation notice" in output["additionalContext"]
