"""The core's harness reader kit, run against our own readers through their public port, on
the committed fixtures of one working day (tests/fixtures)."""

from __future__ import annotations

import pytest
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_core.testing.harness_contract import (
    HARNESS_CHECKS,
    KIT_VERSION,
    HarnessCheck,
    HarnessSample,
    run_harness_check,
)
from dsh_chapters_harness.claude_code import ClaudeCodeReader
from dsh_chapters_harness.codex import CodexReader
from dsh_chapters_harness.dsh import DshReader

from tests.fixtures import DSH_LOG, FIXTURES
from tests.fixtures.conversation_script import TURNS
from tests.fixtures.make_fixtures import (
    CLAUDE_PROJECT_DIR,
    CLAUDE_SESSION_ID,
    CODEX_FILE,
    CODEX_TURNS,
    DSH_TURNS,
)


def _sample(relative: str, turns: int, prompts: tuple[str, ...]) -> HarnessSample:
    return HarnessSample(
        filename=relative.rsplit("/", 1)[-1] if "/" in relative else relative,
        data=(FIXTURES / relative).read_bytes(),
        texts=prompts,
        turns=turns,
    )


READERS: dict[str, tuple[type[HarnessReader], HarnessSample]] = {
    "dsh": (DshReader, _sample(DSH_LOG.relative_to(FIXTURES).as_posix(), len(DSH_TURNS),
                               tuple(t.prompt for t in DSH_TURNS[:5]))),
    "claude-code": (ClaudeCodeReader, _sample(
        f"claude-code/{CLAUDE_PROJECT_DIR}/{CLAUDE_SESSION_ID}.jsonl", len(TURNS),
        tuple(t.prompt for t in TURNS[:5]))),
    "codex": (CodexReader, _sample(CODEX_FILE, len(CODEX_TURNS),
                                   tuple(t.prompt for t in CODEX_TURNS[:5]))),
}


def test_the_kit_is_versioned() -> None:
    assert KIT_VERSION.count(".") == 1 and all(p.isdigit() for p in KIT_VERSION.split("."))
    assert len(HARNESS_CHECKS) == 7 and all(check.doc for check in HARNESS_CHECKS)


@pytest.mark.parametrize("reader_name", sorted(READERS))
@pytest.mark.parametrize("check", HARNESS_CHECKS, ids=lambda c: c.name)
def test_our_readers_pass_the_harness_kit(check: HarnessCheck, reader_name: str) -> None:
    reader, sample = READERS[reader_name]
    run_harness_check(check, reader, sample)
