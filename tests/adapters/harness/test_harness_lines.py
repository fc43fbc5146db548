"""Reading and line accounting, for every reader: truncated tails, bad bytes, bad lines, and the
inputs that are not transcripts at all (empty, garbage, a 50 MB line)."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import LineAccount, UserMessage
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_harness.claude_code import ClaudeCodeReader
from dsh_chapters_harness.codex import CodexReader
from dsh_chapters_harness.dsh import DshReader
from dsh_chapters_harness.transcript_lines import decode_counting

from tests.fixtures import ALL_TRANSCRIPTS

READERS: dict[str, HarnessReader] = {
    "claude-code": ClaudeCodeReader(),
    "codex": CodexReader(),
    "dsh": DshReader(),
}
NAMES = sorted(READERS)
MB = 1 << 20


def lines_of(name: str) -> list[bytes]:
    return ALL_TRANSCRIPTS[name].read_bytes().splitlines(keepends=True)


def write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(data)
    return str(path)


def assert_accounted(account: LineAccount, lines: int) -> None:
    assert account.total == lines
    assert account.skipped == sum(n for _, n in account.skip_rules)
    assert account.unknown == sum(n for _, n in account.unknown_types)
    assert account.malformed == len(account.malformed_lines)


@pytest.mark.parametrize("name", NAMES)
def test_every_fixture_line_is_accounted_for(name: str) -> None:
    transcript = READERS[name].read(str(ALL_TRANSCRIPTS[name]))
    assert_accounted(transcript.account, len(lines_of(name)))
    assert transcript.account.unknown == 0
    assert transcript.account.malformed == 0
    assert not transcript.account.truncated_tail


@pytest.mark.parametrize("name", NAMES)
def test_a_truncated_last_line_stops_the_read_at_the_last_complete_line(
    tmp_path: Path, name: str
) -> None:
    lines = lines_of(name)
    partial = lines[40][: len(lines[40]) // 2]  # a live session's half-written record
    path = write(tmp_path, name, b"".join(lines[:40]) + partial)
    account = READERS[name].read(path).account
    assert account.truncated_tail
    assert_accounted(account, 40)


@pytest.mark.parametrize("name", NAMES)
def test_a_complete_last_record_without_newline_is_read(tmp_path: Path, name: str) -> None:
    lines = lines_of(name)
    path = write(tmp_path, name, b"".join(lines[:39]) + lines[39].rstrip(b"\n"))
    account = READERS[name].read(path).account
    assert not account.truncated_tail
    assert_accounted(account, 40)


@pytest.mark.parametrize("name", NAMES)
def test_malformed_lines_are_counted_with_their_line_numbers(tmp_path: Path, name: str) -> None:
    lines = lines_of(name)
    lines.insert(2, b"this is not json\n")
    lines.insert(6, b"[1, 2, 3]\n")  # JSON, but not an object
    lines.insert(9, b'{"unterminated": \n')
    lines.insert(12, b"\n")
    path = write(tmp_path, name, b"".join(lines))
    account = READERS[name].read(path).account
    assert account.malformed_lines == (3, 7, 10)
    assert ("blank-line", 1) in account.skip_rules
    assert_accounted(account, len(lines))


@pytest.mark.parametrize("name", NAMES)
def test_non_utf8_bytes_become_replacement_characters_and_are_counted(
    tmp_path: Path, name: str
) -> None:
    raw = ALL_TRANSCRIPTS[name].read_bytes()
    marker = b"Run the orders tests."
    assert marker in raw
    path = write(tmp_path, name, raw.replace(marker, b"Run the \xff\xfe orders \xc3 tests.", 1))
    transcript = READERS[name].read(path)
    assert transcript.account.replaced_bytes == 3
    assert transcript.account.malformed == 0
    prompts = [e.text for e in transcript.events if isinstance(e, UserMessage)]
    assert "Run the \ufffd\ufffd orders \ufffd tests." in prompts


def test_decode_counting_counts_bytes_not_characters() -> None:
    assert decode_counting("héllo".encode()) == ("héllo", 0)
    assert decode_counting(b"a\xffb\xfe\xfdc") == ("a\ufffdb\ufffd\ufffdc", 3)


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_file_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError, match=r"empty \(0 bytes\)") as caught:
        READERS[name].read(write(tmp_path, name, b""))
    assert caught.value.hint


@pytest.mark.parametrize("name", NAMES)
def test_a_file_of_blank_lines_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError, match="no records: 3 blank lines"):
        READERS[name].read(write(tmp_path, name, b"\n  \n\n"))


@pytest.mark.parametrize("name", NAMES)
def test_a_file_that_is_not_a_transcript_is_refused_with_numbers(tmp_path: Path, name: str) -> None:
    text = b"# Notes\n\nThis is a markdown file.\n- one\n- two\n"
    with pytest.raises(InputError) as caught:
        READERS[name].read(write(tmp_path, name, text))
    message = str(caught.value)
    assert "read 5 lines" in message and f"({len(text)} bytes)" in message
    assert "4 not JSON objects (lines 1, 3, 4, 5)" in message
    assert "1 blank" in message
    assert "next:" in message


@pytest.mark.parametrize("name", NAMES)
def test_another_harness_transcript_is_refused_naming_the_types_found(name: str) -> None:
    other = next(n for n in NAMES if n != name)
    with pytest.raises(InputError) as caught:
        READERS[name].read(str(ALL_TRANSCRIPTS[other]))
    message = str(caught.value)
    assert "of unknown record types" in message
    assert f"read {len(lines_of(other))} lines" in message
    assert "--harness" in caught.value.hint


@pytest.mark.parametrize("name", NAMES)
def test_binary_garbage_is_refused(tmp_path: Path, name: str) -> None:
    garbage = random.Random(7).randbytes(MB)
    path = write(tmp_path, name, garbage)
    with pytest.raises(InputError, match="not JSON objects") as caught:
        READERS[name].read(path)
    assert f"{MB} bytes" in str(caught.value) or "truncated" in str(caught.value)


@pytest.mark.parametrize("name", NAMES)
def test_a_directory_or_a_missing_file_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError, match="is a directory"):
        READERS[name].read(str(tmp_path))
    with pytest.raises(InputError, match="cannot read"):
        READERS[name].read(str(tmp_path / "gone.jsonl"))


def _peak_while(call: object) -> int:
    tracemalloc.start()
    try:
        assert callable(call)
        call()
    except InputError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


@pytest.mark.parametrize("name", NAMES)
def test_a_50_mb_single_line_is_refused_within_a_few_times_its_size(
    tmp_path: Path, name: str
) -> None:
    size = 50 * MB
    junk = write(tmp_path, "junk", b"A" * size + b"\n")
    with pytest.raises(InputError, match=rf"read 1 lines \({size + 1} bytes\)"):
        READERS[name].read(junk)
    assert _peak_while(lambda: READERS[name].read(junk)) < size // 10  # streamed, never held

    unfinished = write(tmp_path, "unfinished", b'{"type": "' + b"x" * size)
    with pytest.raises(InputError, match=rf"no complete line: {size + 10} bytes"):
        READERS[name].read(unfinished)

    blob = write(tmp_path, "blob", b'{"type": "blob", "data": "' + b"x" * size + b'"}\n')
    with pytest.raises(InputError, match="unknown record types"):
        READERS[name].read(blob)
    assert _peak_while(lambda: READERS[name].read(blob)) < 3 * size
