"""The readers' boundary (input_guard): non-regular files are refused before a byte is read, a
held line stops at readerLineMaxBytes with the numbers, nesting past readerJsonMaxDepth is a
malformed line, and lone surrogates become U+FFFD instead of failing the write later."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import UserMessage
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_harness import input_guard
from dsh_chapters_harness.claude_code import ClaudeCodeReader
from dsh_chapters_harness.codex import CodexReader
from dsh_chapters_harness.dsh import DshReader

from tests.fixtures import ALL_TRANSCRIPTS

READERS: dict[str, HarnessReader] = {
    "claude-code": ClaudeCodeReader(),
    "codex": CodexReader(),
    "dsh": DshReader(),
}
NAMES = sorted(READERS)


@pytest.mark.parametrize("name", NAMES)
def test_devices_fifos_and_directories_are_refused_before_reading(
    tmp_path: Path, name: str
) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # an open() without O_NONBLOCK would block here forever
    with pytest.raises(InputError, match="is a FIFO, not a"):
        READERS[name].read(str(fifo))
    with pytest.raises(InputError, match="is a character device, not a"):
        READERS[name].read("/dev/zero")
    with pytest.raises(InputError, match="is a directory"):
        READERS[name].read(str(tmp_path))


@pytest.mark.parametrize("name", NAMES)
def test_a_held_line_stops_at_the_cap_with_the_numbers(tmp_path: Path, name: str) -> None:
    lines = ALL_TRANSCRIPTS[name].read_bytes().splitlines(keepends=True)
    big = b'{"type": "x", "pad": "' + b"y" * 5000 + b'"}\n'
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"".join(lines[:3]) + big)
    with input_guard.limits(input_guard.GuardLimits(line_max_bytes=4096)), pytest.raises(
        InputError, match=r"line 4 is over readerLineMaxBytes = 4096 bytes \(read \d+ bytes"
    ):
        READERS[name].read(str(path))


def test_deep_nesting_is_malformed_and_lone_surrogates_are_replaced(tmp_path: Path) -> None:
    lines = ALL_TRANSCRIPTS["dsh"].read_bytes().splitlines(keepends=True)
    deep = b'{"type": "user/message", "x": ' + b"[" * 300 + b"]" * 300 + b"}\n"
    deeper = b'{"type": "user/message", "x": ' + b"[" * 50000 + b"]" * 50000 + b"}\n"
    records = [json.loads(line) for line in lines]
    # A person's message (DSH's `source.kind: user`), not a host injection.
    first_user = next(i for i, r in enumerate(records) if r.get("type") == "user/message"
                      and (r["data"].get("source") or {}).get("kind") == "user")
    records[first_user]["data"]["content"] = [{"type": "text", "text": "before \ud800 after"}]
    text = [json.dumps(r).encode() + b"\n" for r in records]
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"".join(text[:first_user + 1]) + deep + deeper
                     + b"".join(text[first_user + 1:]))
    transcript = READERS["dsh"].read(str(path))
    assert transcript.account.malformed == 2
    messages = [e.text for e in transcript.events if isinstance(e, UserMessage)]
    assert "before \ufffd after" in messages
    assert all(m.encode("utf-8") for m in messages)  # writable as UTF-8


def test_session_ids_are_plain_bounded_names() -> None:
    input_guard.check_session_id("5f0c2a9e-8d3b-4e61-9a7c-2b1d4e6f8a10", "p")
    for bad, why in (("x" * 5000, "over sessionIdMaxChars = 200"), ("../up", "cannot name"),
                     ("config.toml", "cannot name"), ("a/b", "cannot name")):
        with pytest.raises(InputError, match=why):
            input_guard.check_session_id(bad, "p")
