"""`--harness auto`: each fixture is recognized by its own reader only; the entry points load."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_harness.claude_code import ClaudeCodeReader
from dsh_chapters_harness.codex import CodexReader
from dsh_chapters_harness.detect import detect_harness
from dsh_chapters_harness.discovery import read_head
from dsh_chapters_harness.dsh import DshReader

from tests.fixtures import ALL_TRANSCRIPTS, CLAUDE_CODE_SUBAGENT

READERS: list[HarnessReader] = [DshReader(), ClaudeCodeReader(), CodexReader()]


@pytest.mark.parametrize("name", sorted(ALL_TRANSCRIPTS))
def test_only_the_right_reader_sniffs_each_fixture(name: str) -> None:
    head = read_head(ALL_TRANSCRIPTS[name])
    assert [r.name for r in READERS if r.sniff(head)] == [name]


@pytest.mark.parametrize("name", sorted(ALL_TRANSCRIPTS))
def test_detect_names_the_reader_in_any_order(name: str) -> None:
    assert detect_harness(str(ALL_TRANSCRIPTS[name]), READERS) == name
    assert detect_harness(str(ALL_TRANSCRIPTS[name]), list(reversed(READERS))) == name


def test_a_subagent_file_is_claude_code() -> None:
    assert detect_harness(str(CLAUDE_CODE_SUBAGENT), READERS) == "claude-code"


@pytest.mark.parametrize("name", sorted(ALL_TRANSCRIPTS))
def test_a_head_cut_mid_line_still_sniffs_on_its_complete_lines(name: str) -> None:
    head = read_head(ALL_TRANSCRIPTS[name], 6000)
    assert [r.name for r in READERS if r.sniff(head)] == [name]


def test_detect_refuses_what_no_reader_recognizes(tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"hello": "world"}\nplain text\n')
    with pytest.raises(
        InputError, match=r"first 30 bytes \(2 complete lines\) match none of: dsh, claude-code"
    ):
        detect_harness(str(notes), READERS)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        detect_harness(str(empty), READERS)
    with pytest.raises(InputError, match="directory"):
        detect_harness(str(tmp_path), READERS)
    with pytest.raises(InputError, match="does not exist"):
        detect_harness(str(tmp_path / "gone.jsonl"), READERS)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(InputError) as caught:
        detect_harness(str(garbage), READERS)
    assert "--harness" in caught.value.hint


def test_the_entry_points_load_readers_that_satisfy_the_port() -> None:
    found = {ep.name: ep for ep in entry_points(group="dsh_chapters.harnesses")}
    assert {"dsh", "claude-code", "codex"} <= set(found)
    for name in ("dsh", "claude-code", "codex"):
        reader = found[name].load()()
        assert isinstance(reader, HarnessReader)
        assert reader.name == name
