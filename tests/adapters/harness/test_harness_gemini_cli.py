"""The Gemini CLI reader on sessions in both shapes Gemini writes (tests/fixtures/other_agents):
every record type, the turn rules, host context screened, discovery of a project's chats."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    UserMessage,
)
from dsh_chapters_core.turns import split_turns
from dsh_chapters_harness.gemini_cli import GeminiCliReader, project_chats, project_hash

from tests.fixtures import other_agents as fx

READER = GeminiCliReader()


def read(tmp_path: Path, data: bytes, name: str = "session-2026-01-10T02-08-3c1d5e2a.json"
         ) -> Transcript:
    path = tmp_path / name
    path.write_bytes(data)
    return READER.read(str(path))


def of(transcript: Transcript, kind: type) -> list:
    return [e for e in transcript.events if isinstance(e, kind)]


@pytest.fixture(params=["document", "jsonl"])
def sample(request: pytest.FixtureRequest) -> tuple[str, fx.Sample]:
    if request.param == "document":
        return "session-2026-01-10T02-08-3c1d5e2a.json", fx.gemini_document()
    return "session-2026-01-10T02-08-3c1d5e2a.jsonl", fx.gemini_jsonl()


def test_both_shapes_give_the_same_events(tmp_path: Path) -> None:
    """The move from the document to JSON lines keeps every event and its seq, so a session
    migrated to `.jsonl` continues its archive where the `.json` left it."""
    document = read(tmp_path, fx.gemini_document().data)
    lines = read(tmp_path, fx.gemini_jsonl().data, "session-2026-01-10T02-08-3c1d5e2a.jsonl")
    assert document.events == lines.events
    assert document.session_id == lines.session_id == fx.GEMINI_SESSION
    assert document.started_at == "2026-01-10T02:08:26.108Z"


def test_prompts_and_replies_are_verbatim(tmp_path: Path, sample: tuple[str, fx.Sample]) -> None:
    name, s = sample
    transcript = read(tmp_path, s.data, name)
    assert [e.text for e in of(transcript, UserMessage)] == list(s.prompts)
    assert [e.text for e in of(transcript, AssistantMessage)] == [
        fx.G_REPLY_1, "Writing the test first.", fx.G_REPLY_2, fx.G_REPLY_3]


def test_host_context_is_screened(tmp_path: Path, sample: tuple[str, fx.Sample]) -> None:
    """The next-speaker check's "Please continue." and an @file's content are the CLI's."""
    name, s = sample
    transcript = read(tmp_path, s.data, name)
    injected = of(transcript, HostInjection)
    assert [i.kind for i in injected] == [InjectionKind.RUNTIME_CONTEXT] * 2
    assert injected[0].text == "System: Please continue."
    assert injected[1].text == fx.G_FILES_3.lstrip("\n")
    assert not any("Please continue" in u.text for u in of(transcript, UserMessage))


def test_tool_calls_thoughts_and_results(tmp_path: Path, sample: tuple[str, fx.Sample]) -> None:
    name, s = sample
    transcript = read(tmp_path, s.data, name)
    calls = of(transcript, ToolCall)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("read_file", {"file_path": "src/orders.py"}),
        ("run_shell_command", {"command": "pytest -k empty"}),
        ("replace", {"file_path": "src/orders.py", "old_string": "a", "new_string": "b"})]
    results = of(transcript, ToolResult)
    assert [(r.call_id, r.text, r.is_error) for r in results] == [
        (calls[0].call_id, "def total(cart):\n  ...", False),
        (calls[1].call_id, "exit status 1", True),
        (calls[2].call_id, "cancelled by the user", True)]
    [thought] = of(transcript, Reasoning)
    assert thought.text == "Tracing the division\n\nThe count can be zero."


def test_every_line_is_accounted_by_a_named_rule(tmp_path: Path) -> None:
    s = fx.gemini_document()
    account = read(tmp_path, s.data).account
    lines = s.data.count(b"\n") + 1
    assert account.total == lines and account.unknown == account.malformed == 0
    rules = dict(account.skip_rules)
    assert rules["ui-notice"] == sum(len(json.dumps(m, indent=2).splitlines())
                                     for m in fx._gemini_messages()
                                     if m["type"] in ("info", "warning", "error"))
    assert set(rules) == {"ui-notice", "metadata", "document-structure"}
    jsonl = fx.gemini_jsonl()
    account = read(tmp_path, jsonl.data, "s.jsonl").account
    assert account.total == jsonl.data.count(b"\n") and account.unknown == 0
    assert dict(account.skip_rules) == {
        "ui-notice": 3, "tool-response-echo": 1, "metadata-update": 14,
        "history-checkpoint": 1, "rewind": 1}


def test_a_turn_ends_at_the_next_prompt_and_the_last_stays_in_flight(
        tmp_path: Path, sample: tuple[str, fx.Sample]) -> None:
    """Gemini writes no end of turn, and a reply can still gain tool calls: the last turn is
    archived when the session is over, never before."""
    name, s = sample
    split = split_turns(read(tmp_path, s.data, name).events)
    assert len(split.complete) == 2
    assert [e.text for e in split.complete[1].events if isinstance(e, UserMessage)] == [
        fx.G_PROMPT_2]
    assert any(isinstance(e, UserMessage) and e.text == fx.G_TYPED_3 for e in split.incomplete)
    assert split.final_turn() is not None


def test_a_reply_that_gains_its_tool_calls_later_is_read_in_its_last_version(
        tmp_path: Path) -> None:
    lines = fx.gemini_jsonl().data.splitlines(keepends=True)
    pending_only = b"".join(lines[:4])  # metadata, u1, its update, g1 before its call ended
    transcript = read(tmp_path, pending_only, "s.jsonl")
    assert [c.name for c in of(transcript, ToolCall)] == ["read_file"]
    assert of(transcript, ToolResult) == []
    assert not split_turns(transcript.events).complete


def test_a_rewind_never_drops_what_was_read(tmp_path: Path) -> None:
    """`$rewindTo` hides messages from Gemini's own history; the archive keeps them."""
    transcript = read(tmp_path, fx.gemini_jsonl().data, "s.jsonl")
    assert fx.G_REPLY_3 in [e.text for e in of(transcript, AssistantMessage)]


def test_a_checkpoint_adds_only_messages_not_seen(tmp_path: Path) -> None:
    meta = {"sessionId": "s1", "projectHash": fx.GEMINI_HASH, "startTime": "2026-01-10T00:00:00Z"}
    said = {"id": "u9", "timestamp": "2026-01-10T00:00:01.000Z", "type": "user",
            "content": "A prompt only the checkpoint holds"}
    data = (json.dumps(meta) + "\n" + json.dumps({"$set": {"messages": [said]}}) + "\n").encode()
    transcript = read(tmp_path, data, "s.jsonl")
    assert [e.text for e in of(transcript, UserMessage)] == [said["content"]]
    assert transcript.account.imported == 2


def test_typed_words_come_from_display_content(tmp_path: Path) -> None:
    meta = {"sessionId": "s2", "projectHash": fx.GEMINI_HASH, "startTime": "2026-05-01T00:00:00Z"}
    user = {"id": "u1", "timestamp": "2026-05-01T00:00:01.000Z", "type": "user",
            "content": [{"text": "Explain <session_context>x</session_context> please"}],
            "displayContent": [{"text": "Explain this please"}]}
    context = {"id": "u0", "timestamp": "2026-05-01T00:00:00.500Z", "type": "user",
               "content": "<session_context>\ncwd: /x\n</session_context>"}
    data = "".join(json.dumps(r) + "\n" for r in (meta, context, user)).encode()
    transcript = read(tmp_path, data, "s.jsonl")
    assert [e.text for e in of(transcript, UserMessage)] == ["Explain this please"]
    assert [i.text for i in of(transcript, HostInjection)] == [
        context["content"], user["content"][0]["text"]]


def test_model_parts_content_of_newer_versions(tmp_path: Path) -> None:
    """A history sync writes a reply's content as parts: thought parts are reasoning, function
    calls stay in the tool calls."""
    meta = {"sessionId": "s3", "projectHash": fx.GEMINI_HASH, "startTime": "2026-06-01T00:00:00Z"}
    reply = {"id": "g1", "timestamp": "2026-06-01T00:00:02.000Z", "type": "gemini",
             "content": [{"text": "Let me think.", "thought": True},
                         {"text": "Here is the answer."},
                         {"functionCall": {"name": "ls", "args": {}}}]}
    data = "".join(json.dumps(r) + "\n" for r in (meta, reply)).encode()
    transcript = read(tmp_path, data, "s.jsonl")
    assert [e.text for e in of(transcript, Reasoning)] == ["Let me think."]
    assert [e.text for e in of(transcript, AssistantMessage)] == ["Here is the answer."]


def test_unknown_message_types_are_counted_by_name(tmp_path: Path) -> None:
    meta = {"sessionId": "s4", "projectHash": fx.GEMINI_HASH, "startTime": "2026-06-01T00:00:00Z"}
    odd = {"id": "x1", "timestamp": "2026-06-01T00:00:02.000Z", "type": "planner", "content": ""}
    data = "".join(json.dumps(r) + "\n" for r in (meta, odd, {"what": 1})).encode()
    account = read(tmp_path, data, "s.jsonl").account
    assert dict(account.unknown_types) == {"message:planner": 1, "<no type>": 1}


def test_a_half_rewritten_document_reads_what_is_whole(tmp_path: Path) -> None:
    """Gemini up to 0.38 rewrites the file in place: a read caught mid-write sees a prefix."""
    data = fx.gemini_document().data
    cut = data[: data.index(b'"id": "u4"')]
    transcript = read(tmp_path, cut)
    account = transcript.account
    assert account.total + account.truncated_tail == cut.count(b"\n") + 1
    assert account.malformed == 0 and dict(account.skip_rules)["unfinished-write"] >= 1
    assert [e.text for e in of(transcript, UserMessage)] == [fx.G_PROMPT_1, fx.G_PROMPT_2]
    damaged = data.replace(b'"type": "error"', b'"type": "error" !', 1)
    account = read(tmp_path, damaged).account
    assert account.malformed > 0 and "unfinished-write" not in dict(account.skip_rules)


def test_subagent_sessions_descend_from_their_parent(tmp_path: Path) -> None:
    meta = {"sessionId": "child-1", "projectHash": fx.GEMINI_HASH, "kind": "subagent",
            "startTime": "2026-06-01T00:00:00Z"}
    folder = tmp_path / "chats" / "parent-session-id"
    folder.mkdir(parents=True)
    transcript = read(folder, (json.dumps(meta) + "\n").encode(), "child-1.jsonl")
    assert transcript.root_session_id == "parent-session-id"


def test_garbage_is_refused_with_numbers(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a Gemini CLI session"):
        read(tmp_path, b'{"a": 1}\n{"b": 2}\n', "x.jsonl")


def test_sniff_claims_both_shapes_and_nothing_else() -> None:
    assert READER.sniff(fx.gemini_document().data[:4096])
    assert READER.sniff(fx.gemini_jsonl().data[:4096])
    assert not READER.sniff(fx.opencode_export().data[:4096])
    assert not READER.sniff(fx.pi_session().data[:4096])


# ---- where Gemini keeps a project's sessions ------------------------------------------------
def test_project_chats_by_hash_registry_and_marker(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"GEMINI_CLI_HOME": str(home)}
    project = str(tmp_path / "acme-api")
    Path(project).mkdir()
    tmp = home / ".gemini" / "tmp"
    (tmp / "acme-api" ).mkdir(parents=True)
    (tmp / "acme-api" / ".project_root").write_text(project)
    (tmp / "other").mkdir()
    (tmp / "other" / ".project_root").write_text("/srv/other")
    (home / ".gemini" / "projects.json").write_text(json.dumps(
        {"projects": {project: "acme-api-2", "/srv/other": "other"}}))
    folders = project_chats(project, env)
    assert project_hash(project) == hashlib.sha256(project.encode()).hexdigest()
    assert tmp / project_hash(project) / "chats" in folders
    assert tmp / "acme-api" / "chats" in folders and tmp / "acme-api-2" / "chats" in folders
    assert tmp / "other" / "chats" not in folders


def test_discover_reads_the_jsonl_a_document_was_migrated_into(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("GEMINI_CLI_HOME", str(home))
    project = str(tmp_path / "acme-api")
    Path(project).mkdir()
    chats = home / ".gemini" / "tmp" / project_hash(project) / "chats"
    chats.mkdir(parents=True)
    (chats / "session-a.json").write_bytes(fx.gemini_document().data)
    (chats / "session-a.jsonl").write_bytes(fx.gemini_jsonl().data)
    (chats / "session-b.json").write_bytes(fx.gemini_document().data)
    (chats / "notes.json").write_text('{"not": "a session"}')
    (chats / "parent-id").mkdir()
    (chats / "parent-id" / "child.jsonl").write_bytes(fx.gemini_jsonl().data)
    elsewhere = home / ".gemini" / "tmp" / project_hash("/srv/other") / "chats"
    elsewhere.mkdir(parents=True)
    (elsewhere / "session-c.json").write_bytes(fx.gemini_document().data)
    found = [Path(p).relative_to(chats).as_posix() for p in READER.discover(None, project)]
    assert found == ["parent-id/child.jsonl", "session-a.jsonl", "session-b.json"]
    assert len(READER.discover(str(home), project)) == 4
