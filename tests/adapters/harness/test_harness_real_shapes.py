"""The readers on records in the shapes real Claude Code and Codex versions write.

Fixtures: `tests/fixtures/real-shapes/` (written by `make_real_shapes.py`, our own text in the
real keys): a 1.0.x session with `stop_reason: null` and no turn-end record, a headless 2.1.x
run, two records on one line, a custom slash command with arguments, `pr-link`, `agent-name`,
and a Codex rollout with tool search.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    PullRequestLink,
    ToolCall,
    ToolResult,
    Transcript,
    UserMessage,
)
from dsh_chapters_core.turns import INCOMPLETE_TURN, split_turns
from dsh_chapters_harness.claude_code import ClaudeCodeReader, claude_config_dir
from dsh_chapters_harness.codex import CodexReader, codex_home
from dsh_chapters_harness.transcript_lines import LineLedger, iter_line_records

from tests.adapters.harness.transcript_shapes import assert_well_formed, of_type, turn_spans
from tests.fixtures import make_real_shapes as shapes

CLAUDE = ClaudeCodeReader()
CODEX = CodexReader()
PROJECT = shapes.ROOT / "claude-code" / shapes.PROJECT_DIR
V1 = PROJECT / f"{shapes.V1_SESSION}.jsonl"
HEADLESS = PROJECT / f"{shapes.HEADLESS_SESSION}.jsonl"
SHAPES = PROJECT / f"{shapes.SHAPES_SESSION}.jsonl"
ROLLOUT = shapes.ROOT / shapes.CODEX_FILE


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_generator_reproduces_the_committed_fixtures(tmp_path: Path) -> None:
    shapes.build(tmp_path)
    assert files(tmp_path) == files(shapes.ROOT)
    assert len(files(shapes.ROOT)) == 4


def texts(transcript: Transcript, kind: type[UserMessage] | type[AssistantMessage]) -> list[str]:
    return [e.text for e in of_type(transcript, kind)]


# --- finality: sessions whose last turn never says it ended -------------------------------------
def test_a_1_0_session_closes_each_turn_at_the_next_prompt_and_leaves_the_last_open() -> None:
    transcript = CLAUDE.read(str(V1))
    spans = assert_well_formed(transcript)
    assert texts(transcript, UserMessage) == list(shapes.V1_PROMPTS)
    assert texts(transcript, AssistantMessage) == list(shapes.V1_REPLIES)
    assert [s.complete for s in spans] == [True, True, False]  # null stop reasons everywhere
    assert transcript.account.unknown == transcript.account.malformed == 0
    split = split_turns(transcript.events)
    assert len(split.complete) == 2 and split.clamped
    final = split.final_turn()
    assert final is not None and final.ended == INCOMPLETE_TURN
    assert [e.text for e in final.events if isinstance(e, AssistantMessage)] == [
        shapes.V1_REPLIES[2]]


def test_a_headless_run_is_one_turn_that_only_finality_can_close() -> None:
    transcript = CLAUDE.read(str(HEADLESS))
    spans = turn_spans(transcript)
    assert len(spans) == 1 and not spans[0].complete
    assert spans[0].of(AssistantMessage)[-1].text == shapes.HEADLESS_REPLY
    final = split_turns(transcript.events).final_turn()
    assert final is not None and len(of_type(transcript, ToolResult)) == 1


def test_a_tail_of_host_context_only_is_not_a_turn_to_finalize() -> None:
    transcript = CLAUDE.read(str(SHAPES))  # ends on turn_duration: nothing unfinished
    assert split_turns(transcript.events).final_turn() is None


# --- two records on one line ------------------------------------------------------------------
def test_two_records_on_one_line_are_both_read_and_the_line_is_counted_split() -> None:
    transcript = CLAUDE.read(str(SHAPES))
    account = transcript.account
    lines = SHAPES.read_bytes().count(b"\n")
    assert account.total == lines  # every line accounted for, once
    assert account.malformed == 0 and account.split == 1 and account.split_records == 2
    [number] = account.split_lines
    joined = SHAPES.read_text().splitlines()[number - 1]
    assert '"type":"assistant"' in joined and '}{"type":"summary"' in joined  # no newline
    assert shapes.SPLIT_REPLY in texts(transcript, AssistantMessage)


@pytest.mark.parametrize(("raw", "split", "malformed"), [
    (b'{"a":1}{"b":2}\n', 1, 0),
    (b'{"a":1}  \t{"b":2} {"c":3}\n', 1, 0),
    (b'{"a":1}{"b":\n', 0, 1),  # the second record is cut: the line is malformed
    (b'{"a":1} [2]\n', 0, 1),  # not an object after the first
    (b'{"a":1} trailing words\n', 0, 1),
])
def test_split_only_whole_objects(raw: bytes, split: int, malformed: int) -> None:
    ledger = LineLedger()
    got = list(iter_line_records(io.BytesIO(raw), ledger))
    assert (len(got), ledger.account().malformed) == (split, malformed)
    if split:
        assert len(got[0][1]) == raw.count(b"{")


# --- slash commands, pr-link, agent-name ---------------------------------------------------
def test_a_custom_commands_arguments_open_a_turn_as_the_users_words() -> None:
    transcript = CLAUDE.read(str(SHAPES))
    first = of_type(transcript, UserMessage)[0]
    assert first.text == f"{shapes.CUSTOM_COMMAND} {shapes.CUSTOM_ARGS}"
    spans = turn_spans(transcript)
    assert spans[0].of(UserMessage)[0] == first and spans[0].complete
    assert spans[0].of(AssistantMessage)[-1].text == shapes.CUSTOM_REPLY


def test_builtin_commands_and_their_arguments_stay_out_of_the_conversation() -> None:
    transcript = CLAUDE.read(str(SHAPES))
    assert not any(shapes.COMPACT_ARGS in text for text in texts(transcript, UserMessage))
    [run] = [c for c in of_type(transcript, CommandRun) if c.command.startswith("/compact")]
    assert run.command == f"/compact {shapes.COMPACT_ARGS}"


def test_pr_link_is_metadata_and_agent_name_is_skipped_by_rule() -> None:
    transcript = CLAUDE.read(str(SHAPES))
    links = of_type(transcript, PullRequestLink)
    assert [link.url for link in links] == [shapes.PR_URL, shapes.PR_URL]  # written twice
    rules = dict(transcript.account.skip_rules)
    assert rules["agent-name"] == 1
    assert transcript.account.unknown_types == ()


def test_other_bookkeeping_records_seen_in_the_wild_are_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    records = [
        {"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user",
                                                                        "content": "hi"}},
        {"type": "cost-state", "sessionId": "s", "modelUsage": {}},
        {"type": "tag", "tag": "release", "sessionId": "s"},
        {"type": "file-history-delta", "sessionId": "s"},
        {"type": "teleported-from", "remoteSessionId": "r", "branch": "main", "messageCount": 0},
        {"type": "a-type-from-a-future-version", "sessionId": "s"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    account = CLAUDE.read(str(path)).account
    assert account.skipped == 4 and account.unknown == 1  # still counted and shown, never fatal
    assert dict(account.unknown_types) == {"a-type-from-a-future-version": 1}


# --- Codex tool search --------------------------------------------------------------------------
def test_codex_tool_search_is_a_tool_call_and_its_result() -> None:
    transcript = CODEX.read(str(ROLLOUT))
    assert transcript.account.unknown == 0 and transcript.account.malformed == 0
    calls = of_type(transcript, ToolCall)
    assert [c.name for c in calls] == ["tool_search", "calendar_create_event"]
    assert json.loads(calls[0].arguments)["query"] == shapes.TOOL_SEARCH_QUERY
    results = {r.call_id: r for r in of_type(transcript, ToolResult)}
    assert "calendar_create_event" in results[calls[0].call_id].text
    [span] = turn_spans(transcript)
    assert span.complete


def test_a_server_side_tool_search_without_call_ids_pairs_in_order(tmp_path: Path) -> None:
    lines = [line for line in ROLLOUT.read_text().splitlines()]
    records = [json.loads(line) for line in lines]
    for record in records:
        payload = record["payload"]
        if payload.get("type") in ("tool_search_call", "tool_search_output"):
            payload["call_id"] = None
            payload["execution"] = "server"
    path = tmp_path / ROLLOUT.name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    transcript = CODEX.read(str(path))
    call = of_type(transcript, ToolCall)[0]
    result = of_type(transcript, ToolResult)[0]
    assert call.call_id and result.call_id == call.call_id


# --- where the sessions are -------------------------------------------------------------------
def test_claude_config_dir_and_codex_home_are_honoured_for_discovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = tmp_path / "claude-alt"
    (claude / "projects" / shapes.PROJECT_DIR).mkdir(parents=True)
    (claude / "projects" / shapes.PROJECT_DIR / V1.name).write_bytes(V1.read_bytes())
    codex = tmp_path / "codex-alt"
    (codex / "sessions").mkdir(parents=True)
    (codex / "sessions" / ROLLOUT.name).write_bytes(ROLLOUT.read_bytes())
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    assert CLAUDE.discover(None, shapes.CWD) == []
    assert CODEX.discover(None, shapes.CWD) == []
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("CODEX_HOME", str(codex))
    assert claude_config_dir() == claude and codex_home() == codex
    assert CLAUDE.discover(None, shapes.CWD) == [
        str(claude / "projects" / shapes.PROJECT_DIR / V1.name)]
    assert CODEX.discover(None, shapes.CWD) == [str(codex / "sessions" / ROLLOUT.name)]
