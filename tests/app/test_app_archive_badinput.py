"""Bad input: a clear message with numbers, exit 1, and the store unchanged byte for byte."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from tests.app.archive_workspace import (
    CODEX_FILE,
    DSH_FILE,
    DSH_SESSION,
    Runner,
    make_workspace,
    runner,
    snapshot,
)

FIFTY_MB = 50 * 1024 * 1024


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


@pytest.fixture
def chapters(ws: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> Runner:
    run = runner(ws, monkeypatch, capsys)
    assert run("archive", str(CODEX_FILE)).code == 0  # a store with something to lose
    return run


def _refused(chapters: Runner, ws: Path, path: Path, *extra: str) -> str:
    before = snapshot(ws / ".dsh-chapters")
    result = chapters("archive", str(path), *extra)
    assert result.code == 1, result.out
    assert result.out == ""
    assert snapshot(ws / ".dsh-chapters") == before
    message = result.err
    assert message.startswith("chapters: ") and "\n  next: " in message
    assert re.search(r"\d", message)
    assert len(message) < 2000  # never the input echoed back
    return message


def test_a_file_that_is_not_a_transcript(chapters: Runner, ws: Path, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# acme-api\n\nSome notes about the service.\n" * 40)
    message = _refused(chapters, ws, readme)
    size = readme.stat().st_size
    assert "not a transcript" in message
    assert f"{size} of {size} bytes (120 complete lines)" in message
    other = tmp_path / "events.jsonl"
    other.write_text("".join(json.dumps({"event": "deploy", "n": i}) + "\n" for i in range(30)))
    message = _refused(chapters, ws, other)
    assert "not a transcript" in message and "(30 complete lines)" in message


def test_an_empty_file(chapters: Runner, ws: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert "empty (0 bytes)" in _refused(chapters, ws, empty)
    forced = _refused(chapters, ws, empty, "--harness", "dsh")
    assert "0" in forced


def test_a_50_mb_single_line(chapters: Runner, ws: Path, tmp_path: Path) -> None:
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as handle:
        handle.write(b'{"type": "user/message", "seq": 1, "data": {"text": "')
        handle.write(b"a" * (FIFTY_MB - 100))
    message = _refused(chapters, ws, huge)
    assert f"of {huge.stat().st_size} bytes (0 complete lines)" in message
    forced = _refused(chapters, ws, huge, "--harness", "dsh")
    assert str(huge.stat().st_size) in forced or "line" in forced
    garbage_line = tmp_path / "garbage-line.jsonl"
    garbage_line.write_bytes(b"z" * FIFTY_MB + b"\n")
    message = _refused(chapters, ws, garbage_line)
    assert f"its first {1 << 20} of {FIFTY_MB + 1} bytes (0 complete lines)" in message


def test_a_truncated_final_line_archives_the_complete_lines_and_says_so(
    chapters: Runner, ws: Path, tmp_path: Path,
) -> None:
    data = DSH_FILE.read_bytes()
    live = tmp_path / DSH_FILE.name
    live.write_bytes(data[: len(data) - 40])  # the last record is half written
    complete = data[: len(data) - 40].count(b"\n")
    before = snapshot(ws / ".dsh-chapters", derived=False)
    result = chapters("archive", str(live))
    assert result.code == 0, result.err
    assert f"read stopped after line {complete}, the last complete one" in " ".join(
        result.out.split())  # a long line folds at 100 columns
    after = snapshot(ws / ".dsh-chapters", derived=False)
    assert all(after[path] == digest for path, digest in before.items()
               if path != "logs/chapters.log")
    assert any(p.startswith(f"{DSH_SESSION}/chapters/") for p in after)
    only_tail = tmp_path / "only-tail.jsonl"
    only_tail.write_bytes(data[: data.index(b"\n") // 2])  # one half line, nothing complete
    _refused(chapters, ws, only_tail)


def test_binary_garbage(chapters: Runner, ws: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(random.Random(3).randbytes(1 << 20))
    assert "not a transcript" in _refused(chapters, ws, garbage)
    forced = _refused(chapters, ws, garbage, "--harness", "claude-code")
    assert re.search(r"\d+ (lines|bytes)", forced)


def test_a_directory_or_a_missing_file(chapters: Runner, ws: Path, tmp_path: Path) -> None:
    assert "is a directory, not a session file" in _refused(chapters, ws, tmp_path)
    missing = chapters("archive", str(tmp_path / "nope.jsonl"))
    assert missing.code == 1 and "missing" in missing.err
