"""The read doors read only documents, and lines are one thing everywhere.

- Every internal file of the store (`config.toml`, `state/`, `logs/`, `cache/`, `session.json`,
  `collections.jsonl`, the edits file) and of the mirror (`.git/config`, `.git/HEAD`,
  `project.yml`, collections) is refused by every door: `chapters show`, `chapters artifact`
  (read, toc, search), the MCP tools `chapters_read` and `chapters_artifact` through a real
  client session, and the viewer's `/chapter/…`; none of their bytes comes back.
- Every path a search returns, a mirror path included, opens at the line its anchor names in
  every door: `show --line`, `artifact --offset`, `chapters_read {line}` and the viewer's
  `?line=`, with `\\r` inside the chapter (a line is what `\\n` ends).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine, project_clone, sample_session_text
from tests.acceptance.steps_common import session_id_for as sid_of
from tests.reliability import doors

CONFIG_MARK = "zzconfigmark"


def _linked_machine(tmp_path: Path, *, artifacts: bool = False) -> Machine:
    a = project_clone(tmp_path, "box-a")
    a.ok("link", str(tmp_path / "drive" / "widgets.git"))
    a.set_config(f"# {CONFIG_MARK}")
    if artifacts:
        a.set_config("toolResultDeferFloorTokens = 20")  # tool output goes to artifacts
    return a


def _internal_files(m: Machine) -> dict[str, str]:
    """Workspace- or root-relative path -> a string of its content that must never come back."""
    sid = m.sessions["a-1"]
    key = m.app().identity.project_key
    found = {
        ".dsh-chapters/config.toml": CONFIG_MARK,
        "config.toml": CONFIG_MARK,
        ".dsh-chapters/state/sync.json": '"lastPushAt"',
        "state/sync.json": '"lastPushAt"',
        f".dsh-chapters/{sid}/session.json": '"watermark"',
        f".dsh-chapters/{sid}/collections.jsonl": '"seqs"',
        ".dsh-chapters/logs/chapters.log": '"archive"',
        ".dsh-chapters/cache/core-rules.json": '"generation"',
        f".dsh-chapters/edits/{m.name}/curation.jsonl": '"topic-alias"',
        ".dsh-knowledge/.git/config": "[remote",
        ".dsh-knowledge/.git/HEAD": "refs/heads/main",
        ".git/config": "[remote",
        ".dsh-knowledge/project.yml": "projectKey",
        f".dsh-knowledge/collections/{key}/{sid}.jsonl": '"seqs"',
    }
    for path, marker in found.items():
        full = m.workspace / path
        if not full.exists():
            full = m.store / path
        assert full.is_file(), path
        assert marker in full.read_text(errors="replace"), (path, marker)
    return found


@pytest.mark.slow
def test_every_read_door_refuses_every_internal_file(tmp_path: Path, record: Any) -> None:
    a = _linked_machine(tmp_path, artifacts=True)
    a.archive("a-1")
    a.ok("topic", "merge", "loop", "retry")  # an edits file
    a.ok("sync")
    a.ok("search", "retry")
    internal = _internal_files(a)
    answers: list[tuple[str, doors.Answer]] = []
    for path in internal:
        for argv in (("show", path), ("show", path, "--line", "1"), ("artifact", path),
                     ("artifact", path, "toc"), ("artifact", path, "search", "a")):
            answers.append((path, doors.cli(a, *argv)))
    calls: list[tuple[str, dict[str, Any]]] = []
    for path in internal:
        calls += [("chapters_read", {"path": path}),
                  ("chapters_artifact", {"pathOrSha": path}),
                  ("chapters_artifact", {"pathOrSha": path, "action": "toc"})]
    mcp_answers = doors.mcp(a, calls, tmp_path / "mcp.log")
    answers += [(next(p for p in internal if json.dumps(p) in ans.door), ans)
                for ans in mcp_answers]
    viewer_answers = doors.viewer(a, [doors.chapter_route(p) for p in internal])
    answers += list(zip(internal, viewer_answers, strict=True))
    for path, answer in answers:
        assert not answer.ok, f"{answer.door} served {path}: {answer.text[:300]}"
        assert internal[path] not in answer.text, f"{answer.door} gave back bytes of {path}"
    # and the documents themselves still open, through the same doors
    chapter = next(p for p in a.store_files() if "/chapters/001-" in p)
    artifact = next(p for p in a.store_files() if p.startswith("artifacts/"))
    for ok in (doors.cli(a, "show", f".dsh-chapters/{chapter}"),
               doors.cli(a, "artifact", artifact.rsplit("/", 1)[-1][:-4]),
               *doors.mcp(a, [("chapters_read", {"path": f".dsh-chapters/{chapter}"})],
                          tmp_path / "mcp.log"),
               *doors.viewer(a, [doors.chapter_route(f".dsh-chapters/{chapter}")])):
        assert ok.ok, f"{ok.door}: {ok.text[:300]}"
    record("internal files refused", f"{len(internal)} paths x {len(answers) // len(internal)} "
           "door calls (show, artifact read/toc/search, MCP chapters_read and "
           "chapters_artifact, viewer /chapter/): all refused, 0 bytes of them served")


def _session_with_carriage_returns(m: Machine, label: str) -> Path:
    """The demo session under a new id, its first tool output printing a progress bar with
    `\\r` inside a line, then a line holding a word found nowhere else."""
    sid = m.sessions.setdefault(label, sid_of(label))
    text = sample_session_text(sid)
    old = "def fetch(url, attempts=3):\\n"
    assert old in text
    text = text.replace(old, "progress 10%\\rprogress 55%\\rprogress 100% done\\n"
                             "zebraquux fetch starts here\\n" + old, 1)
    path = m.workspace.parent / f"{label}.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
def test_every_door_opens_a_search_path_at_its_anchor_line(tmp_path: Path, record: Any) -> None:
    a = _linked_machine(tmp_path)
    a.ok("archive", str(_session_with_carriage_returns(a, "cr-1")))
    a.ok("sync")
    answer = a.ok("search", "--json", "zebraquux").json()
    match = answer["matches"][0]
    path, anchor = match["path"], match["anchor"]
    line, snippet = int(anchor["line"]), anchor["text"].strip()
    assert path.startswith(".dsh-knowledge/chapters/"), path  # a mirror path, as search gave
    assert snippet.startswith("zebraquux"), snippet
    file = (a.workspace / path).read_bytes().decode()  # no newline translation
    assert "\r" in file
    first_lines: dict[str, str] = {}
    shown = a.ok("show", path, "--line", str(line)).out
    first_lines["chapters show --line"] = shown.split("\n", 1)[0]
    paged = a.ok("artifact", path, "--offset", str(line - 1), "--limit", "2", "--json").json()
    first_lines["chapters artifact --offset"] = paged["lines"][0]
    (read,) = doors.mcp(a, [("chapters_read", {"path": path, "line": line, "limit": 2})],
                        tmp_path / "mcp.log")
    assert read.ok, read.text
    first_lines["mcp chapters_read {line}"] = json.loads(read.text.split("\n")[-1])["lines"][0]
    (page,) = doors.viewer(a, [doors.chapter_route(path, line)])
    assert page.ok, page.text[:300]
    first_lines["viewer /chapter/?line="] = json.loads(page.text)["text"].split("\n")[line - 1]
    for door, text in first_lines.items():
        assert text.startswith(snippet), f"{door} opens line {line} as {text!r}, not {snippet!r}"
    # the anchor's line counts `\r` as text: the progress bar is one line before it
    assert re.search(r"progress 10%\rprogress 55%\rprogress 100% done\n" + re.escape(snippet),
                     file)
    record("anchor lines", f"a mirror path from search opened at its anchor's line {line} by "
           f"{len(first_lines)} doors ({', '.join(first_lines)}), with \\r inside the chapter")
