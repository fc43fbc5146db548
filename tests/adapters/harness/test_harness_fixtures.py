"""The committed fixtures are what the generator writes, and have the shape the issue asks for."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures import (
    CLAUDE_CODE_SESSION,
    CLAUDE_CODE_SUBAGENT,
    CLAUDE_CODE_TOOL_RESULTS,
    CLAUDE_CODE_TURNS,
    CODEX_ROLLOUT,
    CODEX_ROLLOUT_TURNS,
    DSH_LOG,
    DSH_LOG_TURNS,
    FAKE_CREDENTIALS,
    FIXTURES,
)
from tests.fixtures.conversation_script import TURNS
from tests.fixtures.make_fixtures import build

HARNESS_DIRS = ("claude-code", "codex", "dsh")


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for d in HARNESS_DIRS
        for p in sorted((root / d).rglob("*"))
        if p.is_file()
    }


def test_the_generator_reproduces_the_committed_fixtures_byte_for_byte(tmp_path: Path) -> None:
    build(tmp_path)
    assert files_under(tmp_path) == files_under(FIXTURES)
    build(tmp_path)  # a rerun changes nothing and leaves no stale file
    assert files_under(tmp_path) == files_under(FIXTURES)


def test_sizes_turns_and_tasks() -> None:
    assert sum(len(b) for b in files_under(FIXTURES).values()) < 2 * 1024 * 1024
    assert CLAUDE_CODE_TURNS >= 50 and CODEX_ROLLOUT_TURNS >= 30 and DSH_LOG_TURNS >= 30
    assert len({t.task for t in TURNS}) == 6
    assert CLAUDE_CODE_SUBAGENT.is_file()
    assert len(list(CLAUDE_CODE_TOOL_RESULTS.iterdir())) == 1


def test_the_claude_code_session_carries_every_record_kind_the_issue_lists() -> None:
    raw = CLAUDE_CODE_SESSION.read_text()
    for needle in (
        '"type":"summary"',
        '"type":"system"',
        '"type":"file-history-snapshot"',
        '"type":"progress"',
        '"type":"attachment"',
        '"type":"thinking"',
        '"type":"tool_use"',
        '"type":"tool_result"',
        '"toolUseResult"',
        "This session is being continued from a previous conversation",
        "# claudeMd",
        "<command-name>",
        "<local-command-stdout>",
        "<persisted-output>",
        '"isMeta":true',
        '"subtype":"compact_boundary"',
    ):
        assert needle in raw, needle
    assert '"isSidechain":true' in CLAUDE_CODE_SUBAGENT.read_text()


def test_fake_credentials_sit_in_tool_output() -> None:
    text = CLAUDE_CODE_SESSION.read_text()
    github, aws_id, _, fixture_key = FAKE_CREDENTIALS
    assert len(github) == 40 and github.startswith("ghp_")
    assert len(aws_id) == 20 and aws_id.startswith("AKIA")
    assert github in text and aws_id in text and fixture_key in text
    assert github in DSH_LOG.read_text()
    assert CODEX_ROLLOUT.stat().st_size > 100_000
