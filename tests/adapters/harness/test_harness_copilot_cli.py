"""The Copilot CLI reader: what each event of `events.jsonl` becomes, where the agent loop ends a
turn, and which sessions `discover` finds (docs/formats.md, Copilot CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
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
from dsh_chapters_core.turns import split_turns
from dsh_chapters_harness.copilot_cli import (
    EPHEMERAL,
    SKIP_RULES,
    CopilotCliReader,
    belongs_to,
    copilot_home,
)

from tests.fixtures import make_agent_fixtures as fx

FIXTURE = Path(fx.__file__).parent / "agents" / fx.COPILOT_FILE
CWD = fx.CWD


def _event(kind: str, data: dict[str, Any], n: int, **top: Any) -> dict[str, Any]:
    return {"type": kind, "data": data, "id": f"id-{n}", "timestamp": f"2026-11-20T09:00:{n:02d}Z",
            "parentId": f"id-{n - 1}" if n else None, **top}


START = ("session.start", {"sessionId": "s-1", "version": 1, "producer": "copilot-agent",
                           "copilotVersion": "1.0.68", "startTime": "2026-11-20T09:00:00Z",
                           "context": {"cwd": f"{CWD}/src", "gitRoot": CWD}})


def _read(tmp_path: Path, *events: tuple[Any, ...], name: str = "events.jsonl") -> Transcript:
    """A session file of START and `events`, each `(type, data)` or `(type, data, top keys)`."""
    lines = []
    for n, item in enumerate((START, *events)):
        top = item[2] if len(item) == 3 else {}
        lines.append(json.dumps(_event(item[0], item[1], n, **top)) + "\n")
    path = tmp_path / "s-1" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return CopilotCliReader().read(str(path))


def _prompt(text: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return "user.message", {"content": text, "transformedContent": text, "attachments": [],
                            **extra}


def _message(content: str, tools: tuple[str, ...] = (), **extra: Any) -> tuple[str, dict[str, Any]]:
    return "assistant.message", {"messageId": "m", "content": content, "toolRequests": [
        {"toolCallId": call, "name": "bash", "arguments": {"command": "ls"}} for call in tools],
        **extra}


def _complete(call: str, text: str = "ok", success: bool = True) -> tuple[str, dict[str, Any]]:
    data: dict[str, Any] = {"toolCallId": call, "success": success}
    data["result" if success else "error"] = {"content": text} if success else {"message": text}
    return "tool.execution_complete", data


LOOP = ("assistant.turn_start", {"turnId": "0"})
LOOP_END = ("assistant.turn_end", {"turnId": "0"})


def test_the_fixture_reads_as_its_four_turns_each_prompt_with_its_answer() -> None:
    transcript = CopilotCliReader().read(str(FIXTURE))
    assert transcript.session_id == fx.COPILOT_SESSION_ID and transcript.cwd == CWD
    assert transcript.started_at == "2026-11-20T09:00:00.000Z"
    account = transcript.account
    assert (account.unknown, account.malformed) == (0, 0)
    assert dict(account.skip_rules) == {
        "hook-audit": 20, "loop-boundary": 12, "tool-start": 4, "permission": 2,
        "session-settings": 2, "session-notice": 1, "skill-invoked": 1, "compaction-phase": 1,
        "encrypted-reasoning": 1, "usage": 1}
    split = split_turns(transcript.events)
    assert len(split.complete) == 4 and not split.incomplete
    first = [e for e in split.complete[0].events if isinstance(e, UserMessage | AssistantMessage)]
    assert [e.text for e in first] == [fx.COPILOT_PROMPTS[0], fx.COPILOT_REPLIES[0]]
    steering = [e for e in split.complete[1].events if isinstance(e, UserMessage)]
    assert [e.text for e in steering] == [fx.COPILOT_PROMPTS[1], fx.COPILOT_STEERING]
    ends = [e for e in transcript.events if isinstance(e, TurnEnd)]
    assert [e.reason for e in ends] == ["", "", "aborted", ""]


def test_the_user_s_words_are_content_never_the_transformed_text() -> None:
    events = CopilotCliReader().read(str(FIXTURE)).events
    prompts = [e.text for e in events if isinstance(e, UserMessage)]
    assert prompts[0] == fx.COPILOT_PROMPTS[0]
    assert not any("<current_datetime>" in text for text in prompts)


def test_an_empty_content_falls_back_to_the_transformed_text_without_its_wrappers(
        tmp_path: Path) -> None:
    transcript = _read(tmp_path, ("user.message", {
        "content": "", "transformedContent": "<current_datetime>2026-11-20T10:00:00Z"
        "</current_datetime>\n\nList the open issues\n\n<reminder>todos: none</reminder>"}))
    assert [e.text for e in transcript.events if isinstance(e, UserMessage)] == [
        "List the open issues"]


def test_host_context_is_screened_and_never_a_prompt(tmp_path: Path) -> None:
    transcript = _read(
        tmp_path,
        ("system.message", {"role": "system", "content": "You are the Copilot CLI."}),
        ("system.message", {"role": "developer", "content": "Follow AGENTS.md."}),
        ("user.message", {"content": "<skill-context>steps</skill-context>",
                          "source": "skill-pdf"}),
        ("user.message", {"content": "<system_reminder>AGENTS.md rules</system_reminder>",
                          "source": "instruction-discovery"}),
        ("user.message", {"content": "", "transformedContent": "<system_reminder>tools"
                          "</system_reminder>", "source": "system", "delivery": "steering"}),
        ("user.message", {"content": "Continue with the next todo.",
                          "isAutopilotContinuation": True}),
        ("system.notification", {"content": "<system_notification>Shell done"
                                 "</system_notification>", "kind": {"type": "shell_completed"}}),
    )
    kinds = [(e.kind, e.text[:12]) for e in transcript.events if isinstance(e, HostInjection)]
    assert kinds == [
        (InjectionKind.RUNTIME_CONTEXT, "You are the "),
        (InjectionKind.INSTRUCTIONS, "Follow AGENT"),
        (InjectionKind.SKILL_CATALOG, "<skill-conte"),
        (InjectionKind.INSTRUCTIONS, "<system_remi"),
        (InjectionKind.RUNTIME_CONTEXT, "<system_remi"),
        (InjectionKind.RUNTIME_CONTEXT, "Continue wit"),
        (InjectionKind.RUNTIME_CONTEXT, "<system_noti"),
    ]
    assert not any(isinstance(e, TurnStart | UserMessage) for e in transcript.events)


def test_a_call_that_asks_for_no_tool_ends_the_turn_one_that_does_keeps_it_going(
        tmp_path: Path) -> None:
    transcript = _read(tmp_path, _prompt("Run the tests"), LOOP, _message("Running.", ("c1",)),
                       ("tool.execution_start", {"toolCallId": "c1", "toolName": "bash"}),
                       _complete("c1", "2 passed"), LOOP_END, LOOP, _message("Both pass."),
                       LOOP_END)
    events = transcript.events
    assert [type(e).__name__ for e in events] == [
        "TurnStart", "UserMessage", "AssistantMessage", "ToolCall", "ToolResult",
        "AssistantMessage", "TurnEnd"]
    call, result = events[3], events[4]
    assert isinstance(call, ToolCall) and (call.call_id, call.name) == ("c1", "bash")
    assert json.loads(call.arguments) == {"command": "ls"}
    assert isinstance(result, ToolResult) and (result.text, result.is_error) == ("2 passed", False)
    assert events[-1].seq == 10  # the line of the turn_end of the call that answered


def test_a_loop_still_waiting_for_a_tool_is_not_over(tmp_path: Path) -> None:
    transcript = _read(tmp_path, _prompt("Run the tests"), LOOP, _message("Running.", ("c1",)),
                       LOOP_END)
    assert split_turns(transcript.events).complete == ()


def test_a_failed_tool_keeps_its_error_text(tmp_path: Path) -> None:
    transcript = _read(tmp_path, _prompt("Run it"), LOOP, _message("", ("c1",)),
                       _complete("c1", "exit status 1", success=False))
    result = next(e for e in transcript.events if isinstance(e, ToolResult))
    assert (result.text, result.is_error) == ("exit status 1", True)


def test_a_result_without_content_takes_its_display_text_or_its_blocks(tmp_path: Path) -> None:
    transcript = _read(tmp_path, _prompt("Look"), LOOP, _message("", ("c1", "c2")),
                       ("tool.execution_complete", {"toolCallId": "c1", "success": True,
                                                    "result": {"content": "",
                                                               "detailedContent": "diff"}}),
                       ("tool.execution_complete", {"toolCallId": "c2", "success": True,
                                                    "result": {"content": "", "contents": [
                                                        {"type": "text", "text": "a"},
                                                        {"type": "image", "data": "…"},
                                                        {"type": "text", "text": "b"}]}}))
    assert [e.text for e in transcript.events if isinstance(e, ToolResult)] == ["diff", "a\n\nb"]


def test_abort_ends_the_running_turn_and_is_skipped_when_idle(tmp_path: Path) -> None:
    transcript = _read(tmp_path, ("abort", {"reason": "user_initiated"}), _prompt("Go"), LOOP,
                       _message("", ("c1",)), ("abort", {"reason": "user_initiated"}))
    ends = [e for e in transcript.events if isinstance(e, TurnEnd)]
    assert [(e.seq, e.reason) for e in ends] == [(6, "aborted")]
    assert dict(transcript.account.skip_rules)["abort-when-idle"] == 1


def test_a_shutdown_mid_turn_ends_it_as_interrupted(tmp_path: Path) -> None:
    transcript = _read(tmp_path, _prompt("Go"), LOOP, _message("Working.", ("c1",)),
                       ("session.shutdown", {"shutdownType": "routine"}))
    assert [e.reason for e in transcript.events if isinstance(e, TurnEnd)] == ["interrupted"]
    idle = _read(tmp_path, ("session.shutdown", {"shutdownType": "routine"}), name="b.jsonl")
    assert dict(idle.account.skip_rules) == {"usage": 1}


def test_a_message_typed_while_the_agent_works_stays_in_its_turn(tmp_path: Path) -> None:
    transcript = _read(tmp_path, _prompt("Fix the test", delivery="idle"), LOOP,
                       _message("", ("c1",)), _prompt("Use the fake clock", delivery="steering"),
                       _complete("c1"), LOOP_END, LOOP, _message("Done."), LOOP_END,
                       _prompt("Thanks, now commit", delivery="steering"))
    split = split_turns(transcript.events)
    first = [e.text for e in split.complete[0].events if isinstance(e, UserMessage)]
    assert first == ["Fix the test", "Use the fake clock"]
    assert [e.text for e in split.incomplete if isinstance(e, UserMessage)] == [
        "Thanks, now commit"]  # steering with no turn running opens one


def test_reasoning_comes_from_the_message_or_its_own_event_once(tmp_path: Path) -> None:
    transcript = _read(tmp_path, _prompt("Why?"), LOOP,
                       ("assistant.reasoning", {"reasoningId": "r1", "content": "Think first."}),
                       _message("Because.", reasoningText="Think first."),
                       _message("More.", reasoningText="Then this."), LOOP_END)
    assert [e.text for e in transcript.events if isinstance(e, Reasoning)] == [
        "Think first.", "Then this."]


def test_compaction_and_handoff_become_markers_with_their_summary(tmp_path: Path) -> None:
    transcript = _read(tmp_path,
                       ("session.compaction_complete", {"success": True,
                                                        "summaryContent": "We fixed X."}),
                       ("session.compaction_complete", {"success": False, "error": "quota"}),
                       ("session.handoff", {"handoffTime": "t", "sourceType": "remote",
                                            "summary": "Remote work on Y.", "context": "PR 12"}))
    markers = [e.text for e in transcript.events if isinstance(e, CompactionMarker)]
    assert markers == ["We fixed X.", "Remote work on Y.\n\nPR 12"]
    assert dict(transcript.account.skip_rules)["compaction-failed"] == 1


def test_user_requested_and_sub_agent_tools_are_calls_too(tmp_path: Path) -> None:
    transcript = _read(
        tmp_path, _prompt("Explore"), LOOP, _message("", ("task1",)),
        ("tool.user_requested", {"toolCallId": "u1", "toolName": "bash",
                                 "arguments": {"command": "make"}}),
        ("tool.execution_start", {"toolCallId": "u1", "toolName": "bash"}),
        ("subagent.started", {"toolCallId": "task1", "agentName": "explore",
                              "agentDisplayName": "Explore", "agentDescription": "d"}),
        ("assistant.turn_start", {"turnId": "0"}, {"agentId": "sub-1"}),
        ("assistant.message", {"messageId": "s", "content": "Found 3 files.", "toolRequests": [
            {"toolCallId": "s1", "name": "grep", "arguments": {}}],
            "parentToolCallId": "task1"}),
        ("tool.execution_start", {"toolCallId": "s1", "toolName": "grep",
                                  "parentToolCallId": "task1"}),
        ("assistant.turn_end", {"turnId": "0"}, {"agentId": "sub-1"}),
        _complete("task1", "3 files"), LOOP_END)
    calls = [(e.call_id, e.name) for e in transcript.events if isinstance(e, ToolCall)]
    assert calls == [("task1", "bash"), ("u1", "bash"), ("s1", "grep")]
    # The sub-agent's loop never ends the main turn; its call waits for nothing of ours.
    assert [e.seq for e in transcript.events if isinstance(e, TurnEnd)] == []
    assert "Found 3 files." in [e.text for e in transcript.events
                                if isinstance(e, AssistantMessage)]


def test_every_skip_rule_and_ephemeral_type_is_read_without_unknowns(tmp_path: Path) -> None:
    events = [(kind, {"x": 1}) for kind in sorted(SKIP_RULES)]
    events += [(kind, {"x": 1}) for kind in sorted(EPHEMERAL)]
    transcript = _read(tmp_path, *events)
    account = transcript.account
    assert (account.unknown, account.malformed) == (0, 0)
    assert account.total == 1 + len(SKIP_RULES) + len(EPHEMERAL)
    assert dict(account.skip_rules)["ephemeral-event"] == len(EPHEMERAL)


def test_an_unknown_type_is_counted_by_its_name(tmp_path: Path) -> None:
    transcript = _read(tmp_path, ("session.teleported", {"x": 1}), ("user.message", "oops"))
    assert dict(transcript.account.unknown_types) == {"session.teleported": 1,
                                                      "user.message": 1}


def test_the_session_id_falls_back_to_the_folder_and_the_flat_file(tmp_path: Path) -> None:
    record = json.dumps(_event("user.message", {"content": "hi"}, 1)) + "\n"
    folder = tmp_path / "session-state" / "abc" / "events.jsonl"
    folder.parent.mkdir(parents=True)
    folder.write_text(record)
    flat = tmp_path / "session-state" / "def.jsonl"
    flat.write_text(record)
    assert CopilotCliReader().read(str(folder)).session_id == "abc"
    assert CopilotCliReader().read(str(flat)).session_id == "def"


def test_a_file_of_another_format_is_refused_with_numbers(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "user", "uuid": "u"}\n{"role": "user", "message": {}}\n')
    with pytest.raises(InputError, match="2 lines") as raised:
        CopilotCliReader().read(str(path))
    assert "Copilot CLI" in raised.value.message


def _session(home: Path, session_id: str, cwd: str, git_root: str = "",
             flat: bool = False) -> Path:
    start = _event("session.start", {"sessionId": session_id, "context": {
        "cwd": cwd, **({"gitRoot": git_root} if git_root else {})}}, 0)
    path = (home / "session-state" / f"{session_id}.jsonl" if flat
            else home / "session-state" / session_id / "events.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(start) + "\n")
    (path.parent / "workspace.yaml").write_text(f"cwd: {cwd}\n")
    return path


def test_discover_finds_this_project_s_sessions_by_cwd_or_git_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "copilot"
    monkeypatch.setenv("COPILOT_HOME", str(home))
    project = tmp_path / "acme"
    project.mkdir()
    mine = _session(home, "a", str(project))
    nested = _session(home, "b", str(project / "src"), git_root=str(project))
    legacy = _session(home, "c", str(project), flat=True)
    _session(home, "d", str(tmp_path / "other"))
    (home / "session-state" / "a" / "checkpoints").mkdir()
    (home / "session-state" / "a" / "checkpoints" / "x.jsonl").write_text("{}\n")
    assert copilot_home() == home
    found = CopilotCliReader().discover(None, str(project))
    assert sorted(found) == sorted(map(str, (mine, nested, legacy)))
    assert belongs_to(nested, str(project)) and not belongs_to(nested, str(tmp_path))
    everything = CopilotCliReader().discover(str(home), str(project))
    assert len(everything) == 4  # --source: every session file, whoever's project


def test_copilot_home_defaults_to_dot_copilot() -> None:
    assert copilot_home({}) == Path.home() / ".copilot"
    assert copilot_home({"COPILOT_HOME": "/srv/cp"}) == Path("/srv/cp")
