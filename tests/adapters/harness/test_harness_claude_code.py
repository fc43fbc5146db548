"""The Claude Code binding on a 54-turn working day, and on the record shapes it must sort."""

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
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_harness.claude_code import ClaudeCodeReader, project_dir_name

from tests.adapters.harness.transcript_shapes import assert_well_formed, of_type, turn_spans
from tests.fixtures import (
    CLAUDE_CODE_PROJECT,
    CLAUDE_CODE_PROJECTS,
    CLAUDE_CODE_SESSION,
    CLAUDE_CODE_SESSION_ID,
    CLAUDE_CODE_SUBAGENT,
    CLAUDE_CODE_TOOL_RESULTS,
    CLAUDE_CODE_TURNS,
    FAKE_CREDENTIALS,
    PROJECT_CWD,
    fake_home,
)
from tests.fixtures.conversation_script import TURNS, pytest_durations
from tests.fixtures.make_fixtures import CLAUDE_MD, COMPACTION_SUMMARY

READER = ClaudeCodeReader()


@pytest.fixture(scope="module")
def day() -> Transcript:
    return READER.read(str(CLAUDE_CODE_SESSION))


def steps(kind: str) -> list[str]:
    return [s.text for t in TURNS for s in t.steps if s.kind == kind]


def test_the_reader_satisfies_the_port() -> None:
    assert isinstance(READER, HarnessReader)
    assert READER.name == "claude-code"


def test_header(day: Transcript) -> None:
    assert day.session_id == CLAUDE_CODE_SESSION_ID
    assert day.root_session_id == ""
    assert day.root_id == CLAUDE_CODE_SESSION_ID
    assert day.harness == "claude-code"
    assert day.cwd == PROJECT_CWD
    assert day.started_at.startswith("2026-11-20T09:14")
    assert day.source_path == str(CLAUDE_CODE_SESSION)


def test_every_line_is_accounted_and_each_metadata_type_has_its_rule(day: Transcript) -> None:
    lines = CLAUDE_CODE_SESSION.read_bytes().count(b"\n")
    assert day.account.total == lines
    rules = dict(day.account.skip_rules)
    assert rules == {
        "command-caveat": 1,
        "file-history-snapshot": CLAUDE_CODE_TURNS,
        "interrupt-marker": 1,
        "progress": 37,
        "queue-operation": 1,
        "session-title": 1,
        "turn-duration": 18,
    }
    assert day.account.unknown == day.account.malformed == 0


def test_54_turns_each_opened_by_its_prompt_and_all_complete(day: Transcript) -> None:
    spans = assert_well_formed(day)
    assert len(spans) == CLAUDE_CODE_TURNS
    assert all(span.complete for span in spans)
    assert [span.of(UserMessage)[0].text for span in spans] == [t.prompt for t in TURNS]
    for span in spans:
        start, prompt = span.events[0], span.events[1]
        assert isinstance(start, TurnStart) and isinstance(prompt, UserMessage)
        assert start.seq == prompt.seq


def test_assistant_text_and_thinking_arrive_once_each_in_order(day: Transcript) -> None:
    assert [e.text for e in of_type(day, AssistantMessage)] == steps("say")
    assert [e.text for e in of_type(day, Reasoning)] == steps("think")


def test_tool_calls_and_results_are_joined_by_tool_use_id(day: Transcript) -> None:
    calls = of_type(day, ToolCall)
    results = of_type(day, ToolResult)
    tool_steps = [s for t in TURNS for s in t.steps if s.kind not in ("think", "say")]
    assert len(calls) == len(results) == len(tool_steps)
    seen: dict[str, ToolCall] = {}
    for event in day.events:
        if isinstance(event, ToolCall):
            seen[event.call_id] = event
        elif isinstance(event, ToolResult):
            assert event.call_id in seen, "a result before its call"
            assert event.seq > seen[event.call_id].seq
    assert {c.name for c in calls} == {"Read", "Edit", "Write", "Bash", "Grep", "Glob", "Task"}
    edit = next(c for c in calls if c.name == "Edit")
    assert json.loads(edit.arguments)["file_path"].startswith(PROJECT_CWD)
    failed = [r for r in results if r.is_error]
    assert len(failed) == 1 + sum(
        1 for s in tool_steps if s.error and s.output
    )  # + the rejected call


def test_an_externalized_output_is_read_in_full_from_tool_results(day: Transcript) -> None:
    (saved,) = CLAUDE_CODE_TOOL_RESULTS.iterdir()
    full = saved.read_text()
    assert full == pytest_durations(900)
    result = next(r for r in of_type(day, ToolResult) if r.call_id == saved.stem)
    assert result.text == full
    assert "<persisted-output>" in CLAUDE_CODE_SESSION.read_text()
    assert "<persisted-output>" not in result.text


def test_a_large_tool_result_stays_inline(day: Transcript) -> None:
    raw = CLAUDE_CODE_SESSION.read_text()
    inline = [
        r
        for r in of_type(day, ToolResult)
        if len(r.text) > 8000 and json.dumps(r.text)[1:-1] in raw
    ]
    assert inline


def test_fake_credentials_reach_tool_results_for_redaction(day: Transcript) -> None:
    texts = "\n".join(r.text for r in of_type(day, ToolResult))
    for secret in FAKE_CREDENTIALS[:3]:
        assert secret in texts
    assert FAKE_CREDENTIALS[3] in texts


def test_injections_are_screened_never_user_text(day: Transcript) -> None:
    injections = of_type(day, HostInjection)
    kinds = [i.kind for i in injections]
    assert kinds.count(InjectionKind.INSTRUCTIONS) == 2  # CLAUDE.md reminder, nested CLAUDE.md
    assert InjectionKind.SKILL_CATALOG in kinds
    assert InjectionKind.PLUGIN_NOTICE in kinds
    assert CLAUDE_MD in injections[0].text
    assert injections[0].seq == of_type(day, UserMessage)[0].seq  # the reminder block of prompt 1
    user_text = "\n".join(u.text for u in of_type(day, UserMessage))
    assert "<system-reminder>" not in user_text and "claudeMd" not in user_text
    assert "chapters-notice" not in user_text


def test_commands_are_command_runs_with_their_output(day: Transcript) -> None:
    runs = [(r.command, r.output) for r in of_type(day, CommandRun)]
    assert runs == [
        ("/model opus", "Set model to opus (claude-opus-4-1-20250805)"),
        ("/compact", "Compacted (ctrl+o to see full summary)"),
        ("!git status --short", " M docs/deploy.md\n?? scratch.txt"),
        (
            "/cost",
            "Total cost: $6.41\nTotal duration (API): 21m 4.2s\n"
            "Total code changes: 214 lines added, 61 lines removed",
        ),
    ]
    for span in turn_spans(day):
        assert not span.of(CommandRun), "a command inside a turn"
    user_text = "\n".join(u.text for u in of_type(day, UserMessage))
    assert (
        "<command-name>" not in user_text
        and "Caveat:" not in user_text
        and "<bash-input>" not in user_text
    )


def test_the_compaction_is_one_marker_carrying_the_summary(day: Transcript) -> None:
    (marker,) = of_type(day, CompactionMarker)
    assert marker.text == COMPACTION_SUMMARY
    assert COMPACTION_SUMMARY not in "\n".join(u.text for u in of_type(day, UserMessage))


def test_the_interrupted_turn_is_complete_and_its_call_was_rejected(day: Transcript) -> None:
    span = next(s for s in turn_spans(day) if s.of(UserMessage)[0].text == "Loop it again.")
    assert span.complete
    (result,) = span.of(ToolResult)
    assert result.is_error and "doesn't want to proceed" in result.text
    assert not span.of(AssistantMessage)


def test_a_message_typed_during_a_turn_stays_in_that_turn(day: Transcript) -> None:
    span = next(s for s in turn_spans(day) if "Redis-backed store" in s.of(UserMessage)[0].text)
    assert [u.text for u in span.of(UserMessage)][1].startswith(
        "also keep the default at 100 per minute"
    )


def test_the_subagent_is_its_own_session_rooted_in_the_parent() -> None:
    sub = READER.read(str(CLAUDE_CODE_SUBAGENT))
    assert sub.session_id == CLAUDE_CODE_SUBAGENT.stem
    assert sub.root_session_id == CLAUDE_CODE_SESSION_ID
    spans = assert_well_formed(sub)
    assert len(spans) == 1 and spans[0].complete
    task = next(s for t in TURNS for s in t.steps if s.kind == "task")
    assert spans[0].of(UserMessage)[0].text == task.sub_prompt
    assert spans[0].of(AssistantMessage)[-1].text == task.output
    assert sub.account.total == CLAUDE_CODE_SUBAGENT.read_bytes().count(b"\n")


# --- turn completeness on a live, growing file ------------------------------------------------
def prefix(tmp_path: Path, lines: int) -> str:
    path = tmp_path / CLAUDE_CODE_PROJECT.name / CLAUDE_CODE_SESSION.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(CLAUDE_CODE_SESSION.read_bytes().splitlines(keepends=True)[:lines]))
    return str(path)


def records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CLAUDE_CODE_SESSION.read_text().splitlines()]


def test_a_turn_waiting_on_a_tool_result_is_not_complete(tmp_path: Path) -> None:
    index = next(
        i
        for i, r in enumerate(records())
        if r.get("type") == "assistant" and r["message"]["stop_reason"] == "tool_use"
    )
    spans = turn_spans(READER.read(prefix(tmp_path, index + 1)))
    assert not spans[-1].complete


def test_a_reply_still_streaming_is_not_complete_and_the_final_one_is(tmp_path: Path) -> None:
    recs = records()
    final = next(
        i
        for i, r in enumerate(recs)
        if r.get("type") == "assistant" and r["message"]["stop_reason"] == "end_turn" and i > 20
    )
    thinking = next(
        i
        for i, r in enumerate(recs)
        if r.get("type") == "assistant" and r["message"]["content"][0]["type"] == "thinking"
    )
    assert not turn_spans(READER.read(prefix(tmp_path, thinking + 1)))[-1].complete
    assert turn_spans(READER.read(prefix(tmp_path, final + 1)))[-1].complete


# --- record shapes, one at a time -------------------------------------------------------------
class Session:
    """A hand-built transcript: each call appends one record."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def add(self, kind: str, **fields: Any) -> Session:
        record = {
            "type": kind,
            "uuid": f"u{len(self.lines)}",
            "sessionId": "s-1",
            "cwd": "/w",
            "timestamp": f"2026-11-20T10:00:{len(self.lines):02d}.000Z",
            "isSidechain": False,
        }
        record.update(fields)
        self.lines.append(record)
        return self

    def user(self, content: Any, **fields: Any) -> Session:
        return self.add("user", message={"role": "user", "content": content}, **fields)

    def assistant(self, *blocks: dict[str, Any], stop: str | None = None, **fields: Any) -> Session:
        return self.add(
            "assistant",
            message={
                "id": "m",
                "role": "assistant",
                "model": "claude-x",
                "content": list(blocks),
                "stop_reason": stop,
            },
            **fields,
        )

    def read(self, tmp_path: Path) -> Transcript:
        path = tmp_path / "s-1.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in self.lines))
        return READER.read(str(path))


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_null_stop_reasons_complete_at_turn_duration_with_nothing_pending(tmp_path: Path) -> None:
    s = Session().user("hi").assistant(text("hello"))
    assert not turn_spans(s.read(tmp_path))[-1].complete
    s.add("system", subtype="turn_duration", durationMs=900)
    t = s.read(tmp_path)
    assert turn_spans(t)[-1].complete
    assert next(e for e in t.events if isinstance(e, TurnEnd)).seq == 2  # the reply's line


def test_a_pending_tool_use_keeps_the_turn_open_even_past_turn_duration(tmp_path: Path) -> None:
    s = (
        Session()
        .user("run it")
        .assistant(
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
            stop="tool_use",
        )
        .add("system", subtype="stop_hook_summary")
    )
    assert not turn_spans(s.read(tmp_path))[-1].complete
    s.user([{"type": "tool_result", "tool_use_id": "t1", "content": [text("a.txt")]}])
    s.assistant(text("one file"), stop="end_turn")
    spans = turn_spans(s.read(tmp_path))
    assert len(spans) == 1 and spans[0].complete
    assert spans[0].of(ToolResult)[0].text == "a.txt"


def test_a_new_prompt_forgets_tool_uses_that_were_never_answered(tmp_path: Path) -> None:
    s = (
        Session()
        .user("run it")
        .assistant({"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}, stop="tool_use")
        .user("never mind, just say hi")
        .assistant(text("hi"), stop="end_turn")
    )
    assert [span.complete for span in turn_spans(s.read(tmp_path))] == [True, True]


def test_an_api_error_ends_the_turn(tmp_path: Path) -> None:
    s = Session().user("hi").assistant(text("API Error: 529 overloaded"), isApiErrorMessage=True)
    t = s.read(tmp_path)
    assert turn_spans(t)[-1].complete
    assert ("api-error-message", 1) in t.account.skip_rules


def test_sidechain_duplicates_unknown_types_and_subtypes_are_counted(tmp_path: Path) -> None:
    s = Session().user("hi").assistant(text("hello"), stop="end_turn")
    s.add(
        "assistant",
        message={"role": "assistant", "content": [text("subagent work")]},
        isSidechain=True,
    )
    s.lines.append(dict(s.lines[0]))  # the same uuid again
    s.add("system", subtype="brand_new_thing")
    s.add("telemetry", payloadSize=3)
    s.add("attachment", attachment={"content": "no type"})
    t = s.read(tmp_path)
    assert dict(t.account.skip_rules) == {"sidechain-inline": 1, "duplicate-record": 1}
    assert dict(t.account.unknown_types) == {
        "system:brand_new_thing": 1,
        "telemetry": 1,
        "attachment:no-type": 1,
    }
    assert t.account.total == len(s.lines)
    assert [u.text for u in of_type(t, UserMessage)] == ["hi"]


def test_images_and_reminder_blocks_in_a_prompt(tmp_path: Path) -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    reminder = "<system-reminder>\nThe date is 2026-11-20.\n</system-reminder>"
    t = Session().user([image, text("what is this?"), text(reminder)]).read(tmp_path)
    (prompt,) = of_type(t, UserMessage)
    assert prompt.text == "[image: image/png]\n\nwhat is this?"
    (injection,) = of_type(t, HostInjection)
    assert injection.kind is InjectionKind.RUNTIME_CONTEXT and injection.text == reminder


def test_hooks_that_make_the_agent_go_on_open_a_new_turn(tmp_path: Path) -> None:
    s = (
        Session()
        .user("fix it")
        .assistant(text("fixed"), stop="end_turn")
        .user("Stop hook feedback:\nrun the linter first", isMeta=True)
        .assistant(text("linter is clean"), stop="end_turn")
    )
    spans = turn_spans(s.read(tmp_path))
    assert [len(span.of(UserMessage)) for span in spans] == [1, 0]
    assert all(span.complete for span in spans)


def test_a_bare_continuation_message_is_a_compaction_not_a_prompt(tmp_path: Path) -> None:
    t = (
        Session()
        .user(
            "This session is being continued from a previous conversation that ran out of "
            "context. Summary: …"
        )
        .read(tmp_path)
    )
    assert not of_type(t, UserMessage)
    assert of_type(t, CompactionMarker)[0].text.startswith("This session is being continued")


# --- discovery --------------------------------------------------------------------------------
def test_project_dir_name_replaces_every_non_alphanumeric_character() -> None:
    assert project_dir_name("/home/dev/work/acme-api") == "-home-dev-work-acme-api"
    assert project_dir_name("/Users/jo/my_app.v2 (copy)") == "-Users-jo-my-app-v2--copy-"


def test_discover_finds_the_projects_sessions_parent_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    other = home / ".claude" / "projects" / "-home-dev-work-other"
    other.mkdir()
    shutil.copy(CLAUDE_CODE_SESSION, other / "0000.jsonl")
    found = READER.discover(None, PROJECT_CWD)
    project = home / ".claude" / "projects" / CLAUDE_CODE_PROJECT.name
    assert found == [
        str(project / CLAUDE_CODE_SESSION.name),
        str(project / CLAUDE_CODE_SESSION_ID / "subagents" / CLAUDE_CODE_SUBAGENT.name),
    ]
    assert READER.discover(None, "/home/dev/work/nowhere") == []


def test_discover_with_a_source_takes_every_session_under_it(tmp_path: Path) -> None:
    found = READER.discover(str(CLAUDE_CODE_PROJECTS), "/anywhere")
    assert found == [str(CLAUDE_CODE_SESSION), str(CLAUDE_CODE_SUBAGENT)]
    assert READER.discover(str(tmp_path / "missing"), "/anywhere") == []


def test_discover_matches_a_long_project_dir_by_its_first_200_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = "/home/dev/" + "/".join(["a-rather-long-directory-name"] * 9)
    name = project_dir_name(cwd)
    assert len(name) > 200
    directory = tmp_path / ".claude" / "projects" / (name[:200] + "-k3j9x1")
    directory.mkdir(parents=True)
    shutil.copy(CLAUDE_CODE_SESSION, directory / "s.jsonl")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert READER.discover(None, cwd) == [str(directory / "s.jsonl")]
