"""The core's harness reader kit on the Cursor, Copilot CLI and Aider readers, through their
public port, on the committed fixtures (tests/fixtures/make_agent_fixtures.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_core.testing.harness_contract import (
    HARNESS_CHECKS,
    HarnessCheck,
    HarnessSample,
    run_harness_check,
)
from dsh_chapters_harness.aider import AiderReader
from dsh_chapters_harness.copilot_cli import CopilotCliReader
from dsh_chapters_harness.cursor import CursorReader

from tests.fixtures import make_agent_fixtures as fx

AGENTS = Path(fx.__file__).parent / "agents"

READERS: dict[str, tuple[type[HarnessReader], HarnessSample]] = {
    "copilot-cli": (CopilotCliReader, HarnessSample(
        filename=f"{fx.COPILOT_SESSION_ID}/events.jsonl",
        data=(AGENTS / fx.COPILOT_FILE).read_bytes(),
        texts=(*fx.COPILOT_PROMPTS, fx.COPILOT_STEERING, *fx.COPILOT_REPLIES),
        turns=4)),
    "cursor": (CursorReader, HarnessSample(
        filename=f"{fx.CURSOR_SESSION_ID}.jsonl",
        data=(AGENTS / fx.CURSOR_FILE).read_bytes(),
        texts=(*fx.CURSOR_PROMPTS, *fx.CURSOR_REPLIES),
        turns=5)),
    "aider": (AiderReader, HarnessSample(
        filename=".aider.chat.history.md",
        data=(AGENTS / fx.AIDER_FILE).read_bytes(),
        texts=(*fx.AIDER_PROMPTS, *fx.AIDER_REPLIES),
        turns=3)),
}


@pytest.mark.parametrize("reader_name", sorted(READERS))
@pytest.mark.parametrize("check", HARNESS_CHECKS, ids=lambda c: c.name)
def test_the_new_readers_pass_the_harness_kit(check: HarnessCheck, reader_name: str) -> None:
    reader, sample = READERS[reader_name]
    run_harness_check(check, reader, sample)


def test_the_committed_fixtures_are_what_the_script_writes() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        written = fx.write_all(Path(scratch))
        for path in written:
            relative = path.relative_to(scratch)
            assert (AGENTS / relative).read_bytes() == path.read_bytes(), relative
        committed = {p.relative_to(AGENTS) for p in AGENTS.rglob("*") if p.is_file()}
        assert committed == {p.relative_to(scratch) for p in written}
