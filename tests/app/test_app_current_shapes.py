"""Today's transcript shapes through the CLI: what the chapters hold, and the format-drift alarm.

- the chapter of a custom slash command without arguments has the command as its prompt;
- an import with `--source` names a copied transcript by its own session id, so the session
  imported again from its usual place is the same session, not a second one;
- chapters carry the session's `cwd` and `gitBranch`; an away summary and a Codex rollback are
  markers in them; a Codex thread's name is their title;
- a record type no reader knows is named in the import report with the harness version that
  wrote it, kept by `chapters doctor` (exit 1) until a reader knows it, and a re-import writes
  nothing; a DSH log of an unknown format version is refused by name and listed by the doctor.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.app.archive_workspace import Runner, make_workspace, runner, snapshot
from tests.fixtures import make_current_shapes as cs


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


@pytest.fixture
def chapters(ws: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> Runner:
    return runner(ws, monkeypatch, capsys)


def chapter_files(ws: Path) -> dict[str, str]:
    return {str(p.relative_to(ws)): p.read_text(encoding="utf-8")
            for p in sorted(ws.glob(".dsh-chapters/*/chapters/*.md"))}


def frontmatter(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text.split("---\n", 2)[1])
    assert isinstance(data, dict)
    return data


def archive(chapters: Runner, path: Path, *argv: str) -> dict[str, Any]:
    result = chapters("archive", str(path), *argv, "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert isinstance(data, dict)
    return data


def test_a_custom_command_without_arguments_is_the_chapters_prompt(
    ws: Path, chapters: Runner
) -> None:
    archive(chapters, cs.claude_path(cs.CUSTOM))
    [text] = chapter_files(ws).values()
    meta = frontmatter(text)
    assert meta["messages"]["user"] == 1 and meta["title"] == cs.CUSTOM_NAME
    assert f"**User:**\n\n```text\n{cs.CUSTOM_NAME}\n```" in text


def test_source_keeps_the_transcripts_own_session_id(
    ws: Path, chapters: Runner, tmp_path: Path
) -> None:
    """A checkpoint's `full.jsonl`, imported with --source, then the same session from its
    own file: one session, and the second import adds nothing."""
    checkpoints = tmp_path / "checkpoints" / "0c" / "2d3e4f5a6b" / "0"
    checkpoints.mkdir(parents=True)
    shutil.copyfile(cs.claude_path(cs.PER_BLOCK), checkpoints / "full.jsonl")
    first = chapters("import", "claude-code", "--source", str(tmp_path / "checkpoints"),
                     "--final", "--json")
    assert first.code == 0, first.err
    [report] = json.loads(first.out)["reports"]
    assert report["sessionId"] == cs.PER_BLOCK
    before = snapshot(ws / ".dsh-chapters")
    own = tmp_path / "claude" / "projects" / cs.PROJECT_DIR
    own.mkdir(parents=True)
    shutil.copyfile(cs.claude_path(cs.PER_BLOCK), own / f"{cs.PER_BLOCK}.jsonl")
    again = chapters("import", "claude-code", "--source", str(own), "--final", "--json")
    assert again.code == 0, again.err
    [report] = json.loads(again.out)["reports"]
    assert report["sessionId"] == cs.PER_BLOCK and report["chapters"] == []
    assert snapshot(ws / ".dsh-chapters") == before
    assert [p.name for p in (ws / ".dsh-chapters").iterdir() if p.is_dir()
            and (p / "chapters").is_dir()] == [cs.PER_BLOCK]


def test_chapters_record_the_sessions_cwd_and_branch_and_its_away_summary(
    ws: Path, chapters: Runner
) -> None:
    archive(chapters, cs.claude_path(cs.NEW_RECORDS), "--final")
    texts = chapter_files(ws).values()
    assert {(frontmatter(t)["cwd"], frontmatter(t)["gitBranch"]) for t in texts} == {
        (cs.CWD, cs.BRANCH)}
    text = "".join(texts)
    assert "— away summary at seq" in text
    assert cs.AWAY_SUMMARY not in text  # a marker, like a compaction: the recap is not a turn


def test_a_codex_thread_name_titles_its_chapters_and_a_rollback_is_marked(
    ws: Path, chapters: Runner
) -> None:
    report = archive(chapters, cs.codex_path(cs.CODEX_ROLLBACK))
    assert report["lines"]["unknown"] == 0
    texts = chapter_files(ws).values()
    assert {frontmatter(t)["title"] for t in texts} == {cs.THREAD_NAME}
    body = "".join(texts)
    assert cs.ROLLBACK_PROMPTS[0] in body and cs.ROLLBACK_PARTIAL in body  # kept verbatim
    assert "— rollback: the user undid 1 turn (seq " in body
    assert {frontmatter(t)["gitBranch"] for t in texts} == {cs.BRANCH}


FUTURE = {"type": "future-thing", "sessionId": cs.PER_BLOCK, "detail": "ours"}


def test_an_unknown_record_type_is_reported_kept_and_listed_by_the_doctor(
    ws: Path, chapters: Runner, tmp_path: Path
) -> None:
    source = tmp_path / "source" / cs.PROJECT_DIR
    source.mkdir(parents=True)
    drifted = source / f"{cs.PER_BLOCK}.jsonl"
    lines = cs.claude_path(cs.PER_BLOCK).read_text().splitlines(keepends=True)
    drifted.write_text("".join([*lines[:3], json.dumps(FUTURE) + "\n", *lines[3:],
                                json.dumps(FUTURE) + "\n"]))
    result = chapters("import", "claude-code", "--source", str(tmp_path / "source"),
                      "--final")
    assert result.code == 0, result.err
    assert "unknown record types (written by claude-code 2.1.220): future-thing 2" in result.out
    assert "`chapters doctor`" in result.out
    doctor = chapters("doctor")
    assert doctor.code == 1
    assert "unknown-record-type claude-code: future-thing" in doctor.out
    assert "2 line(s) in 1 session(s) written by claude-code 2.1.220" in doctor.out
    data = json.loads(chapters("doctor", "--json").out)
    [finding] = [f for f in data["findings"] if f["area"] == "formats"]
    assert finding["code"] == "unknown-record-type" and finding["repair"] == ""
    # Importing again writes nothing: not a chapter, not the drift record.
    before = snapshot(ws / ".dsh-chapters")
    assert chapters("import", "claude-code", "--source", str(tmp_path / "source"),
                    "--final").code == 0
    assert snapshot(ws / ".dsh-chapters") == before
    # The file without the unknown lines (a reader that knows them): the record is cleared.
    drifted.write_text("".join(lines))
    assert chapters("import", "claude-code", "--source", str(tmp_path / "source"),
                    "--final").code == 0
    assert chapters("doctor").code == 0


def test_a_dsh_log_of_an_unknown_format_version_is_refused_and_listed(
    ws: Path, chapters: Runner, tmp_path: Path
) -> None:
    lines = cs.dsh_path().read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["version"] = 3
    log = tmp_path / "dsh" / cs.DSH_CHUNKS / "session.v3.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    result = chapters("import", "dsh", "--source", str(tmp_path / "dsh"))
    assert result.code == 1
    said = " ".join(result.out.split())  # a line past 100 columns folds
    assert "format version 3" in said and "knows version 0" in said
    assert not chapter_files(ws)
    doctor = chapters("doctor")
    assert doctor.code == 1 and "unknown-format-version" in doctor.out
    assert "log format version 3" in doctor.out


def test_the_new_markers_are_the_archives_words_not_the_conversations(
    ws: Path, chapters: Runner
) -> None:
    """Search counts a passage's verbatim text, never the markup around it: an away summary's
    and a rollback's markers are markup, as a compaction's is."""
    from dsh_chapters_core.search.passages import body_passages

    archive(chapters, cs.claude_path(cs.NEW_RECORDS), "--final")
    archive(chapters, cs.codex_path(cs.CODEX_ROLLBACK))
    for text in chapter_files(ws).values():
        body = text.split("---\n", 2)[2]
        counted = {term for p in body_passages(body, 40) for term in p.tf}
        assert not {"away", "rollback", "undid"} & counted, counted
