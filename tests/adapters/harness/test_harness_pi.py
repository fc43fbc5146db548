"""The pi reader on pi's and Oh My Pi's session files (tests/fixtures/other_agents): every entry
type, a message typed while the agent works, the stop reasons that end a turn, discovery by
the folder pi names after the project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dsh_chapters_core.errors import InputError
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
    UserMessage,
)
from dsh_chapters_core.turns import split_turns
from dsh_chapters_harness.dsh import DshReader
from dsh_chapters_harness.pi import PiReader, agent_dir, session_folder

from tests.fixtures import other_agents as fx

READER = PiReader()
NAME = f"2026-07-14T16-11-12-625Z_{fx.PI_SESSION}.jsonl"


def read(tmp_path: Path, data: bytes) -> Transcript:
    path = tmp_path / NAME
    path.write_bytes(data)
    return READER.read(str(path))


def of(transcript: Transcript, kind: type) -> list:
    return [e for e in transcript.events if isinstance(e, kind)]


@pytest.fixture(params=[False, True], ids=["pi", "oh-my-pi"])
def sample(request: pytest.FixtureRequest) -> fx.Sample:
    return fx.pi_session(oh_my_pi=request.param)


def test_prompts_and_replies_are_verbatim(tmp_path: Path, sample: fx.Sample) -> None:
    transcript = read(tmp_path, sample.data)
    assert tuple(e.text for e in of(transcript, UserMessage)) == sample.prompts
    assert tuple(e.text for e in of(transcript, AssistantMessage)) == sample.replies
    assert transcript.session_id == fx.PI_SESSION and transcript.cwd == fx.PROJECT


def test_a_message_typed_while_the_agent_works_stays_in_its_turn(tmp_path: Path) -> None:
    split = split_turns(read(tmp_path, fx.pi_session().data).events)
    first = [e.text for e in split.complete[0].events if isinstance(e, UserMessage)]
    assert first == [fx.P_PROMPT_1, fx.P_STEER]


def test_stop_reasons_end_turns(tmp_path: Path, sample: fx.Sample) -> None:
    """`stop`, `length` and `aborted` end pi's loop; `toolUse` and a failed request do not."""
    transcript = read(tmp_path, sample.data)
    split = split_turns(transcript.events)
    assert len(split.complete) == sample.turns
    assert [e.reason for e in of(transcript, TurnEnd)] == ["", "", "aborted"]
    second = [e for e in split.complete[1].events if isinstance(e, AssistantMessage | ToolCall)]
    assert [type(e).__name__ for e in second] == ["ToolCall", "AssistantMessage",
                                                  "AssistantMessage"]


def test_tools_thinking_commands_and_summaries(tmp_path: Path) -> None:
    transcript = read(tmp_path, fx.pi_session().data)
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in of(transcript, ToolCall)] == [
        ("call_1", "grep", {"pattern": "delay"}), ("call_2", "edit", {"path": "src/retry.py"})]
    assert [(r.call_id, r.text, r.is_error) for r in of(transcript, ToolResult)] == [
        ("call_1", "src/retry.py:4", False), ("call_2", "failed", True)]
    assert [r.text for r in of(transcript, Reasoning)] == ["Search for delay."]
    assert [(c.command, c.output) for c in of(transcript, CommandRun)] == [("git status",
                                                                            "clean")]
    assert [m.text for m in of(transcript, CompactionMarker)] == [
        "Retry delay made exponential.", "An abandoned attempt with a fixed delay."]
    assert [(i.kind, i.text) for i in of(transcript, HostInjection)] == [
        (InjectionKind.PLUGIN_NOTICE, "<system-reminder>2 todo items open.</system-reminder>"),
        (InjectionKind.PLUGIN_NOTICE, "extension says hi")]


def test_every_line_is_accounted(tmp_path: Path, sample: fx.Sample) -> None:
    account = read(tmp_path, sample.data).account
    assert account.total == sample.data.count(b"\n")
    assert account.unknown == account.malformed == 0
    rules = set(dict(account.skip_rules))
    assert {"settings-change", "extension-state", "label", "session-name",
            "failed-request"} <= rules


def test_oh_my_pi_entries(tmp_path: Path) -> None:
    transcript = read(tmp_path, fx.pi_session(oh_my_pi=True).data)
    rules = dict(transcript.account.skip_rules)
    assert rules["title"] == 2 and rules["credential-pin"] == 1
    assert rules["rule-injection-record"] == 1
    injected = [(i.kind, i.text[:20]) for i in of(transcript, HostInjection)]
    assert (InjectionKind.INSTRUCTIONS, "<system-conventions>") in injected
    assert (InjectionKind.RUNTIME_CONTEXT, "<system-reminder>Sto") in injected


def test_unknown_entries_and_roles_are_counted_by_name(tmp_path: Path) -> None:
    lines = fx.pi_lines()
    lines.append({"type": "hologram", "id": "ffffffff", "parentId": None,
                  "timestamp": "2026-07-14T17:00:00.000Z"})
    lines.append({"type": "message", "id": "fffffff0", "parentId": None,
                  "timestamp": "2026-07-14T17:00:00.000Z", "message": {"role": "oracle"}})
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    assert dict(read(tmp_path, data).account.unknown_types) == {"hologram": 1,
                                                                  "message:oracle": 1}


def test_a_forked_session_descends_from_its_parent(tmp_path: Path) -> None:
    lines = fx.pi_lines()
    lines[0]["parentSession"] = f"/home/dev/.pi/agent/sessions/--x--/2026-07-01_{'a' * 8}.jsonl"
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    assert read(tmp_path, data).root_session_id == "a" * 8


def test_sniff_tells_pi_from_dsh_logs() -> None:
    """Both headers are `type: session`; DSH's has an integer `createdAt`, pi's a timestamp."""
    dsh_head = (b'{"type":"session","id":"abababab-cdcd-4efe-8ada-badabadabada",'
                b'"createdAt":800,"cwd":"/tmp/x","delegationDepth":0}\n'
                b'{"type":"request/header","seq":0,"time":2,"data":{"reason":"initial"}}\n')
    assert not READER.sniff(dsh_head) and DshReader().sniff(dsh_head)
    assert READER.sniff(fx.pi_session().data[:4096])
    assert READER.sniff(fx.pi_session(oh_my_pi=True).data[:4096])
    assert not DshReader().sniff(fx.pi_session().data[:4096])
    assert not READER.sniff(fx.gemini_jsonl().data[:4096])


def test_garbage_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a pi session"):
        read(tmp_path, b'{"type": "message"}\n')


def test_discover_by_the_folder_pi_names_after_the_project(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    project = "/home/dev/work/acme-api"
    assert session_folder(project) == "--home-dev-work-acme-api--"
    assert session_folder("C:\\work\\api") == "--C--work-api--"
    sessions = agent_dir() / "sessions"
    own = sessions / session_folder(project)
    own.mkdir(parents=True)
    (own / NAME).write_bytes(fx.pi_session().data)
    moved = sessions / "--somewhere-else--"
    moved.mkdir()
    (moved / "b.jsonl").write_bytes(fx.pi_session().data)  # its header records the project
    other = [dict(line) for line in fx.pi_lines()]
    other[0]["cwd"] = "/srv/other"
    (moved / "c.jsonl").write_text("".join(json.dumps(line) + "\n" for line in other))
    found = READER.discover(None, project)
    assert found == [str(own / NAME), str(moved / "b.jsonl")]
    assert len(READER.discover(str(sessions), project)) == 3
