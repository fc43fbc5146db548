"""The Codex binding on a 34-turn rollout, on rollouts without task events, and on old ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    CompactionMarker,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    TurnStart,
    UserMessage,
)
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_harness.codex import CodexReader

from tests.adapters.harness.transcript_shapes import assert_well_formed, of_type, turn_spans
from tests.fixtures import (
    CODEX_ROLLOUT,
    CODEX_ROLLOUT_SESSION_ID,
    CODEX_ROLLOUT_TURNS,
    CODEX_SESSIONS,
    FAKE_CREDENTIALS,
    PROJECT_CWD,
    fake_home,
)
from tests.fixtures.make_fixtures import AGENTS_MD, CODEX_TURNS, COMPACTION_SUMMARY, CodexWriter

READER = CodexReader()
STEER = "also keep the default at 100 per minute, product asked for exactly that"


@pytest.fixture(scope="module")
def rollout() -> Transcript:
    return READER.read(str(CODEX_ROLLOUT))


def records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CODEX_ROLLOUT.read_text().splitlines()]


def test_the_reader_satisfies_the_port() -> None:
    assert isinstance(READER, HarnessReader)
    assert READER.name == "codex"


def test_header(rollout: Transcript) -> None:
    assert rollout.session_id == CODEX_ROLLOUT_SESSION_ID
    assert rollout.cwd == PROJECT_CWD
    assert rollout.harness == "codex"
    assert rollout.root_session_id == ""
    assert rollout.started_at.startswith("2026-11-20T13:02")


def test_every_line_is_accounted_for_and_mirrors_are_skipped(rollout: Transcript) -> None:
    recs = records()
    assert rollout.account.total == len(recs)
    mirrors = sum(
        1
        for r in recs
        if r["type"] == "event_msg"
        and r["payload"]["type"] in ("user_message", "agent_message", "agent_reasoning")
    )
    rules = dict(rollout.account.skip_rules)
    assert rules["event-mirror"] == mirrors
    assert rules["task-started"] == rules["turn-context"] == CODEX_ROLLOUT_TURNS
    assert rules["token-count"] == sum(1 for r in recs if r["payload"].get("type") == "token_count")
    assert set(rules) == {
        "event-mirror",
        "task-started",
        "turn-context",
        "token-count",
        "ghost-snapshot",
        "compaction-event",
    }
    assert rollout.account.unknown == rollout.account.malformed == 0


def test_34_turns_in_order_each_ended_by_codex(rollout: Transcript) -> None:
    spans = assert_well_formed(rollout)
    assert len(spans) == CODEX_ROLLOUT_TURNS
    assert all(span.complete for span in spans)
    assert [span.of(UserMessage)[0].text for span in spans] == [t.prompt for t in CODEX_TURNS]
    task_ends = [
        i + 1
        for i, r in enumerate(records())
        if r["type"] == "event_msg" and r["payload"]["type"] in ("task_complete", "turn_aborted")
    ]
    assert [span.events[-1].seq for span in spans] == task_ends


def test_messages_and_reasoning_come_from_response_items_once(rollout: Transcript) -> None:
    says = [s.text for t in CODEX_TURNS for s in t.steps if s.kind == "say"]
    thinks = [s.text for t in CODEX_TURNS for s in t.steps if s.kind == "think"]
    assert [e.text for e in of_type(rollout, AssistantMessage)] == says
    assert [e.text for e in of_type(rollout, Reasoning)] == thinks
    expected: list[str] = []
    for turn in CODEX_TURNS:
        expected += [turn.prompt, STEER] if "queued-prompt" in turn.extras else [turn.prompt]
    assert [e.text for e in of_type(rollout, UserMessage)] == expected


def test_a_message_while_the_task_runs_steers_that_turn(rollout: Transcript) -> None:
    span = next(s for s in turn_spans(rollout) if "Redis-backed store" in s.of(UserMessage)[0].text)
    assert [u.text for u in span.of(UserMessage)] == [span.of(UserMessage)[0].text, STEER]


def test_calls_and_outputs_are_joined_by_call_id(rollout: Transcript) -> None:
    calls = {c.call_id: c for c in of_type(rollout, ToolCall)}
    results = of_type(rollout, ToolResult)
    assert {c.name for c in calls.values()} == {"shell", "apply_patch", "local_shell"}
    for result in results:
        assert result.seq > calls[result.call_id].seq
    assert len(calls) == len(results) + 1  # the interrupted call never got its output
    assert any(r.is_error for r in results)
    patch = next(c for c in calls.values() if c.name == "apply_patch")
    assert patch.arguments.startswith("*** Begin Patch")
    shell = next(c for c in calls.values() if c.name == "local_shell")
    assert json.loads(shell.arguments)["command"][0] == "rg"
    assert any(len(r.text) > 8000 for r in results)


def test_results_are_the_unwrapped_shell_output_and_its_exit_code(rollout: Transcript) -> None:
    wrapped = {
        r["payload"]["call_id"]: json.loads(r["payload"]["output"])
        for r in records()
        if r["payload"].get("type") in ("function_call_output", "custom_tool_call_output")
    }
    results = of_type(rollout, ToolResult)
    assert len(results) == len(wrapped)
    for result in results:
        payload = wrapped[result.call_id]
        assert result.text == payload["output"]  # the inner text, not the JSON around it
        assert result.is_error is (payload["metadata"]["exit_code"] != 0)
    assert not any(r.text.startswith('{"output"') for r in results)


def test_the_aborted_turn_is_complete(rollout: Transcript) -> None:
    span = next(s for s in turn_spans(rollout) if s.of(UserMessage)[0].text == "Loop it again.")
    assert span.complete and not span.of(ToolResult)


def test_injections_commands_and_compaction(rollout: Transcript) -> None:
    kinds = [(i.kind, i.text[:22]) for i in of_type(rollout, HostInjection)]
    assert kinds == [
        (InjectionKind.RUNTIME_CONTEXT, "<permissions instructi"),
        (InjectionKind.INSTRUCTIONS, "# AGENTS.md instructio"),
        (InjectionKind.RUNTIME_CONTEXT, "<environment_context>\n"),
    ]
    assert AGENTS_MD in of_type(rollout, HostInjection)[1].text
    assert not any(isinstance(e, HostInjection) for s in turn_spans(rollout) for e in s.events)
    (run,) = of_type(rollout, CommandRun)
    assert run.command == "git log --oneline -3"
    assert run.output.startswith("Exit code: 0\nOutput:\n4be1c9d auth")
    (marker,) = of_type(rollout, CompactionMarker)
    assert marker.text == COMPACTION_SUMMARY
    user_text = "\n".join(u.text for u in of_type(rollout, UserMessage))
    assert "<environment_context>" not in user_text and "AGENTS.md" not in user_text


def test_fake_credentials_are_not_in_this_rollout_but_tool_output_is_verbatim(
    rollout: Transcript,
) -> None:
    texts = "\n".join(r.text for r in of_type(rollout, ToolResult))
    assert not any(secret in texts for secret in FAKE_CREDENTIALS)  # the env-leak task is not in it
    assert "12 passed in 0.41s" in texts


def test_a_turn_cut_before_task_complete_is_not_complete(tmp_path: Path) -> None:
    lines = CODEX_ROLLOUT.read_bytes().splitlines(keepends=True)
    last = max(i for i, r in enumerate(records()) if r["payload"].get("type") == "task_complete")
    path = tmp_path / CODEX_ROLLOUT.name
    path.write_bytes(b"".join(lines[:last]))
    spans = turn_spans(READER.read(str(path)))
    assert len(spans) == CODEX_ROLLOUT_TURNS and not spans[-1].complete


# --- rollouts of CLIs without task events, and before the envelope ------------------------------
def rollout_file(tmp_path: Path, items: list[dict[str, Any]], *, envelope: bool = True) -> str:
    lines = []
    meta = {
        "id": "0199aaaa-1111-7222-8333-444455556666",
        "timestamp": "2025-09-01T10:00:00.000Z",
        "cwd": "/w",
        "instructions": "old AGENTS.md text",
        "git": {},
    }
    lines.append(
        {"timestamp": meta["timestamp"], "type": "session_meta", "payload": meta}
        if envelope
        else meta
    )
    for item in items:
        lines.append(
            {"timestamp": "2025-09-01T10:00:01.000Z", "type": "response_item", "payload": item}
            if envelope
            else item
        )
    if not envelope:
        lines.insert(1, {"record_type": "state"})
    path = tmp_path / "rollout-2025-09-01T10-00-00-0199aaaa-1111-7222-8333-444455556666.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def call(call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "name": "shell",
        "arguments": '{"command":["ls"]}',
        "call_id": call_id,
    }


def output(call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "call_id": call_id,
        "output": "Exit code: 0\nOutput:\na.txt",
    }


def test_without_task_events_the_next_prompt_and_a_final_reply_end_turns(tmp_path: Path) -> None:
    t = READER.read(
        rollout_file(
            tmp_path,
            [
                user("list"),
                call("c1"),
                output("c1"),
                assistant("a.txt"),
                user("thanks"),
                assistant("welcome"),
            ],
        )
    )
    spans = assert_well_formed(t)
    assert [s.complete for s in spans] == [True, True]
    assert spans[0].events[-1].seq == 5  # after the reply's line, not at the next prompt
    assert of_type(t, HostInjection)[0].text == "old AGENTS.md text"


def test_without_task_events_a_call_waiting_for_output_keeps_the_turn_open(tmp_path: Path) -> None:
    t = READER.read(rollout_file(tmp_path, [user("list"), assistant("looking"), call("c1")]))
    assert not turn_spans(t)[-1].complete
    t = READER.read(rollout_file(tmp_path, [user("list"), call("c1"), output("c1")]))
    assert not turn_spans(t)[-1].complete


def test_a_rollout_before_the_envelope_is_read(tmp_path: Path) -> None:
    t = READER.read(rollout_file(tmp_path, [user("hello"), assistant("hi")], envelope=False))
    assert t.session_id == "0199aaaa-1111-7222-8333-444455556666"
    assert [type(e).__name__ for e in t.events] == [
        "HostInjection",
        "TurnStart",
        "UserMessage",
        "AssistantMessage",
        "TurnEnd",
    ]
    assert dict(t.account.skip_rules) == {"legacy-state": 1}


def test_unknown_items_and_events_are_counted_by_type(tmp_path: Path) -> None:
    path = rollout_file(tmp_path, [user("hi"), {"type": "hologram", "x": 1}])
    with open(path, "a") as f:
        f.write(
            json.dumps({"timestamp": "t", "type": "event_msg", "payload": {"type": "telepathy"}})
            + "\n"
        )
        f.write(json.dumps({"timestamp": "t", "type": "spaceship", "payload": {}}) + "\n")
    account = READER.read(path).account
    assert dict(account.unknown_types) == {
        "event_msg:telepathy": 1,
        "response_item:hologram": 1,
        "spaceship": 1,
    }
    assert account.total == 5


# --- discovery --------------------------------------------------------------------------------
def test_discover_filters_rollouts_by_their_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    elsewhere = home / ".codex" / "sessions" / "2026" / "11" / "21"
    elsewhere.mkdir(parents=True)
    rollout_file(elsewhere, [user("hi")])  # cwd /w
    mine = home / ".codex" / "sessions" / CODEX_ROLLOUT.relative_to(CODEX_SESSIONS)
    assert READER.discover(None, PROJECT_CWD) == [str(mine)]
    assert READER.discover(None, PROJECT_CWD + "/") == [str(mine)]
    assert READER.discover(None, "/w") == [str(next(elsewhere.iterdir()))]


def test_discover_with_a_source_takes_every_rollout(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(CODEX_SESSIONS, root)
    (root / "notes.jsonl").write_text("{}\n")
    assert READER.discover(str(root), "/anywhere") == [
        str(root / CODEX_ROLLOUT.relative_to(CODEX_SESSIONS))
    ]


def test_the_fixture_writer_and_reader_agree_on_tool_steps(rollout: Transcript) -> None:
    flat = [s for t in CODEX_TURNS for s in CodexWriter.flat(t) if s.kind not in ("think", "say")]
    assert len(of_type(rollout, ToolCall)) == len(flat)
    assert sum(isinstance(e, TurnStart) for e in rollout.events) == CODEX_ROLLOUT_TURNS
