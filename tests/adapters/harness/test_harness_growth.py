"""A live transcript grows between two archives: every turn complete in the shorter read is the
very same turn (same events, same seqs) in the longer one, so re-archiving adds only new turns."""

from __future__ import annotations

from pathlib import Path

import pytest
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_harness.claude_code import ClaudeCodeReader
from dsh_chapters_harness.codex import CodexReader
from dsh_chapters_harness.dsh import DshReader

from tests.adapters.harness.transcript_shapes import turn_spans
from tests.fixtures import ALL_TRANSCRIPTS, CLAUDE_CODE_TOOL_RESULTS

READERS: dict[str, HarnessReader] = {
    "claude-code": ClaudeCodeReader(),
    "codex": CodexReader(),
    "dsh": DshReader(),
}
STRIDE = 5  # every 5th cut point keeps this test fast; the fixtures' shapes repeat every turn


@pytest.mark.parametrize("name", sorted(READERS))
def test_completed_turns_of_every_prefix_are_unchanged_in_the_full_read(
    tmp_path: Path, name: str
) -> None:
    source = ALL_TRANSCRIPTS[name]
    reader = READERS[name]
    full = [s for s in turn_spans(reader.read(str(source))) if s.complete]
    lines = source.read_bytes().splitlines(keepends=True)
    path = tmp_path / source.name
    if name == "claude-code":  # the externalized output lives beside the session
        target = tmp_path / source.stem / "tool-results"
        target.mkdir(parents=True)
        for item in CLAUDE_CODE_TOOL_RESULTS.iterdir():
            (target / item.name).write_bytes(item.read_bytes())
    checked = 0
    for cut in range(10, len(lines), STRIDE):
        # a cut mid-line as well: the live writer's partial record is not a line yet
        path.write_bytes(b"".join(lines[:cut]) + lines[cut][:7])
        spans = turn_spans(reader.read(str(path)))
        done = [s for s in spans if s.complete]
        assert [s.events for s in done] == [s.events for s in full[: len(done)]], (
            f"cut at line {cut}"
        )
        checked += len(done)
    assert checked > 0
