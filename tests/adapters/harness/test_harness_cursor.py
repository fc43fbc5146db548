"""The Cursor reader: agent transcripts line by line, the IDE's chats in `state.vscdb` bubble by
bubble (read-only), and which of the two `discover` takes for one conversation
(docs/formats.md, Cursor)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    HostInjection,
    Reasoning,
    ToolCall,
    ToolResult,
    TurnEnd,
    UserMessage,
)
from dsh_chapters_core.turns import split_turns
from dsh_chapters_harness.cursor import CursorReader, project_slug, prompt_time
from dsh_chapters_harness.cursor_composer import chat_path, cursor_user_dir, list_composers

from tests.fixtures import make_agent_fixtures as fx

AGENTS = Path(fx.__file__).parent / "agents"
FIXTURE = AGENTS / fx.CURSOR_FILE


# ---- agent transcripts ------------------------------------------------------------------------
def test_the_fixture_reads_as_five_turns_with_the_user_s_words_unwrapped() -> None:
    transcript = CursorReader().read(str(FIXTURE))
    assert transcript.session_id == fx.CURSOR_SESSION_ID
    assert transcript.started_at == "2026-11-20T10:15:00+01:00"
    account = transcript.account
    assert (account.unknown, account.malformed) == (0, 0)
    assert dict(account.skip_rules) == {"repeated-prompt": 1, "turn-end-when-idle": 1}
    split = split_turns(transcript.events)
    assert len(split.complete) == 5
    prompts = [e.text for e in transcript.events if isinstance(e, UserMessage)]
    assert prompts == [*fx.CURSOR_PROMPTS[:3], fx.CURSOR_PROMPTS[2], *fx.CURSOR_PROMPTS[3:]]
    assert [e.reason for e in transcript.events if isinstance(e, TurnEnd)] == [
        "", "", "aborted", "", ""]  # the fourth closed by the next prompt


def test_prompts_carry_the_time_cursor_stamped_on_them() -> None:
    events = CursorReader().read(str(FIXTURE)).events
    times = [e.time for e in events if isinstance(e, UserMessage)]
    assert times[:2] == ["2026-11-20T10:15:00+01:00", "2026-11-20T10:40:00+01:00"]
    assert prompt_time("Wednesday, Aug 5, 2026, 12:07 AM (UTC-3:30)") == \
        "2026-08-05T00:07:00-03:30"
    assert prompt_time("Tuesday, Sep 30, 2026, 1:15 PM (UTC)") == "2026-09-30T13:15:00+00:00"
    assert prompt_time("yesterday") == ""


def test_what_cursor_wraps_around_the_words_is_host_context() -> None:
    events = CursorReader().read(str(FIXTURE)).events
    injected = [e.text for e in events if isinstance(e, HostInjection)]
    assert injected[0] == fx.COMMIT_BUTTON.rstrip("\n")  # the button's instructions
    assert injected[1].startswith("<available_subagent_types>")
    assert fx.FOLLOW_UP in injected[2]  # Cursor's own follow-up after a background task
    assert not any(fx.FOLLOW_UP in e.text for e in events if isinstance(e, UserMessage))


def test_each_block_becomes_its_event_and_tool_calls_get_ids_of_their_own(
        tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"role": "user", "message": {"content": "plain words, no wrapper"}},
        {"role": "assistant", "message": {"content": [
            {"type": "thinking", "thinking": "Plan it."},
            {"type": "text", "text": "On it."},
            {"type": "tool_use", "name": "Read", "input": {"path": "/a.py"}},
            {"type": "tool_use", "name": "Shell", "input": {"command": "ls"}},
            {"type": "text", "text": "  "}]}},
        {"role": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t9", "content": [{"type": "text",
                                                                      "text": "out"}]}]}},
        {"role": "user", "message": {"content": [{"type": "text", "text": "<user_query>\nsee"
                                                  "\n</user_query>"}, {"type": "image"}]}},
        {"role": "assistant", "message": {"content": []}},
        {"role": "assistant"},
        {"type": "summary", "summary": "x"},
    ]))
    transcript = CursorReader().read(str(path))
    events = transcript.events
    assert [e.text for e in events if isinstance(e, UserMessage)] == [
        "plain words, no wrapper", "see\n\n[image]"]
    assert [e.text for e in events if isinstance(e, Reasoning)] == ["Plan it."]
    calls = [(e.call_id, e.name, e.arguments) for e in events if isinstance(e, ToolCall)]
    assert calls == [("cursor-2-2", "Read", '{"path": "/a.py"}'),
                     ("cursor-2-3", "Shell", '{"command": "ls"}')]
    assert [(e.call_id, e.text) for e in events if isinstance(e, ToolResult)] == [("t9", "out")]
    assert dict(transcript.account.skip_rules) == {"empty-message": 1}
    assert dict(transcript.account.unknown_types) == {"assistant:no-content": 1, "summary": 1}


def test_a_prompt_sent_again_after_its_turn_ended_is_a_new_prompt(tmp_path: Path) -> None:
    query = {"role": "user", "message": {"content": [{"type": "text", "text":
                                                      "<user_query>\nagain\n</user_query>"}]}}
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        query, query, {"type": "turn_ended", "status": "success"}, query]))
    transcript = CursorReader().read(str(path))
    assert len([e for e in transcript.events if isinstance(e, UserMessage)]) == 2
    assert dict(transcript.account.skip_rules) == {"repeated-prompt": 1}


def test_a_sub_agent_transcript_is_its_own_session_linked_to_its_chat() -> None:
    transcript = CursorReader().read(str(AGENTS / fx.CURSOR_SUBAGENT_FILE))
    assert transcript.session_id == fx.CURSOR_SUBAGENT_ID
    assert transcript.root_session_id == fx.CURSOR_SESSION_ID
    assert len(split_turns(transcript.events).complete) == 1


def test_sniff_tells_cursor_lines_from_claude_code_and_codex_lines() -> None:
    reader = CursorReader()
    assert reader.sniff(b'{"type":"turn_ended","status":"success"}\n')
    assert reader.sniff(b'{"role":"user","message":{"content":[]}}\n')
    claude = {"type": "user", "uuid": "u", "role": "user", "message": {"content": "x"}}
    assert not reader.sniff(json.dumps(claude).encode() + b"\n")
    assert not reader.sniff(b'{"type":"message","role":"user","content":[]}\n')
    assert not reader.sniff(b"SQLite format 3\x00" + b"\x00" * 200)  # not Cursor's schema


# ---- the IDE's database -----------------------------------------------------------------------
def make_db(path: Path, chats: dict[str, dict[str, Any]],
            bubbles: dict[str, dict[str, Any] | str | None]) -> Path:
    """A `state.vscdb` with Cursor's tables: composers and bubbles as the IDE stores them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
        conn.execute("CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, "
                     "value BLOB)")
        for chat_id, data in chats.items():
            conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)",
                         (f"composerData:{chat_id}", json.dumps(data)))
        for key, body in bubbles.items():
            value = body if body is None or isinstance(body, str) else json.dumps(body)
            conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (f"bubbleId:{key}", value))
    conn.close()
    return path


CHAT = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70"


def _chat(workspace: str, headers: list[tuple[str, int]], **extra: Any) -> dict[str, Any]:
    return {"_v": 10, "composerId": CHAT, "name": "Retry loop", "createdAt": 1795165200000,
            "status": "completed", "workspaceIdentifier": {"id": "w", "uri": {
                "fsPath": workspace, "external": f"file://{workspace}"}},
            "fullConversationHeadersOnly": [{"bubbleId": b, "type": t} for b, t in headers],
            **extra}


def _db_with_one_chat(root: Path, workspace: str, **extra: Any) -> Path:
    headers = [("b1", 1), ("b2", 2), ("b3", 2), ("b4", 2), ("b5", 2), ("gone", 2), ("bad", 2),
               ("b6", 7), ("b7", 1), ("b8", 2)]
    bubbles: dict[str, dict[str, Any] | str | None] = {
        f"{CHAT}:b1": {"_v": 3, "type": 1, "bubbleId": "b1", "text": "Why does the retry "
                       "loop stop after one attempt?", "createdAt": "2026-11-20T09:00:01Z"},
        f"{CHAT}:b2": {"_v": 3, "type": 2, "bubbleId": "b2", "text": "",
                       "thinking": {"text": "Check the settings key."}},
        f"{CHAT}:b3": {"_v": 3, "type": 2, "bubbleId": "b3", "text": "", "capabilityType": 15,
                       "toolFormerData": {"tool": 40, "toolCallId": "toolu_1",
                                          "name": "read_file",
                                          "rawArgs": "{\"target_file\": \"src/client.py\"}",
                                          "result": "{\"contents\": \"limit = 1\"}",
                                          "status": "completed"}},
        f"{CHAT}:b4": {"_v": 3, "type": 2, "bubbleId": "b4", "text": "",
                       "toolFormerData": {"tool": 15, "toolCallId": "toolu_2",
                                          "name": "run_terminal_cmd",
                                          "params": "{\"command\": \"pytest\"}",
                                          "result": {"output": "1 failed"},
                                          "status": "error"}},
        f"{CHAT}:b5": {"_v": 3, "type": 2, "bubbleId": "b5",
                       "text": "It reads `max_retries`; the key is `retry_limit`."},
        f"{CHAT}:gone": None,  # Cursor pruned this bubble's body
        f"{CHAT}:bad": "{not json",
        f"{CHAT}:b6": {"_v": 3, "type": 7, "bubbleId": "b6"},
        f"{CHAT}:b7": {"_v": 3, "type": 1, "bubbleId": "b7", "text": "Fix it"},
        f"{CHAT}:b8": {"_v": 3, "type": 2, "bubbleId": "b8", "text": "Fixed."},
        f"{CHAT}:zz": {"_v": 3, "type": 2, "text": "a bubble no header orders"},
    }
    return make_db(root / "globalStorage" / "state.vscdb",
                   {CHAT: _chat(workspace, headers, **extra)}, bubbles)


def test_a_chat_reads_bubble_by_bubble_in_the_chat_s_order(tmp_path: Path) -> None:
    db = _db_with_one_chat(tmp_path, "/home/dev/work/acme-api")
    transcript = CursorReader().read(chat_path(db, CHAT))
    assert transcript.session_id == CHAT and transcript.cwd == "/home/dev/work/acme-api"
    assert transcript.started_at == "2026-11-20T09:00:00Z"
    events = transcript.events
    assert [type(e).__name__ for e in events] == [
        "TurnStart", "UserMessage", "Reasoning", "ToolCall", "ToolResult", "ToolCall",
        "ToolResult", "AssistantMessage", "TurnEnd", "TurnStart", "UserMessage",
        "AssistantMessage", "TurnEnd"]
    calls = [(e.call_id, e.name, e.arguments) for e in events if isinstance(e, ToolCall)]
    assert calls == [("toolu_1", "read_file", '{"target_file": "src/client.py"}'),
                     ("toolu_2", "run_terminal_cmd", '{"command": "pytest"}')]
    results = [(e.text, e.is_error) for e in events if isinstance(e, ToolResult)]
    assert results == [('{"contents": "limit = 1"}', False), ('{"output": "1 failed"}', True)]
    assert events[1].time == "2026-11-20T09:00:01Z"
    account = transcript.account
    assert account.total == 11  # the chat's own record and its ten bubbles
    assert dict(account.skip_rules) == {"bubble-pruned": 1}
    assert dict(account.unknown_types) == {"bubble:type-7": 1}
    assert account.malformed_lines == (8,)


def test_a_chat_still_answering_keeps_its_last_turn_open(tmp_path: Path) -> None:
    db = _db_with_one_chat(tmp_path, "/w", status="generating")
    transcript = CursorReader().read(chat_path(db, CHAT))
    split = split_turns(transcript.events)
    assert len(split.complete) == 1 and split.incomplete


def test_legacy_inline_chats_read_the_same(tmp_path: Path) -> None:
    data = {"composerId": CHAT, "status": "completed", "conversation": [
        {"bubbleId": "x1", "type": 1, "text": "old question"},
        {"bubbleId": "x2", "type": 2, "text": "old answer"}]}
    db = make_db(tmp_path / "state.vscdb", {CHAT: data}, {})
    events = CursorReader().read(chat_path(db, CHAT)).events
    assert [e.text for e in events if isinstance(e, UserMessage | AssistantMessage)] == [
        "old question", "old answer"]


def test_the_database_is_never_written(tmp_path: Path) -> None:
    db = _db_with_one_chat(tmp_path, "/w")
    before = (hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns)
    os.chmod(db, 0o444)
    CursorReader().read(chat_path(db, CHAT))
    CursorReader().discover(str(tmp_path), "/w")
    assert (hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["state.vscdb"]


def test_a_database_path_alone_reads_its_only_chat_or_names_them(tmp_path: Path) -> None:
    db = _db_with_one_chat(tmp_path, "/w")
    assert CursorReader().read(str(db)).session_id == CHAT
    assert CursorReader().sniff(db.read_bytes()[:4096])
    other = "1a2b3c4d-0000-4000-8000-000000000001"
    two = make_db(tmp_path / "two" / "state.vscdb",
                  {CHAT: _chat("/w", [("b1", 1)]), other: _chat("/w", [("b1", 1)])},
                  {f"{CHAT}:b1": {"type": 1, "text": "a"}, f"{other}:b1": {"type": 1,
                                                                          "text": "b"}})
    with pytest.raises(InputError, match="holding 2 chats") as raised:
        CursorReader().read(str(two))
    assert "#<chat id>" in (raised.value.hint or "")
    with pytest.raises(InputError, match="no Cursor chat"):
        CursorReader().read(chat_path(two, "nope"))


def test_a_file_that_is_no_database_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "state.vscdb"
    broken.write_bytes(b"SQLite format 3\x00cursorDiskKV" + b"\x01" * 100)
    with pytest.raises(InputError):
        CursorReader().read(chat_path(broken, CHAT))


# ---- discovery --------------------------------------------------------------------------------
def _transcript(projects: Path, slug: str, name: str, *records: dict[str, Any]) -> Path:
    path = projects / slug / "agent-transcripts" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


USER = {"role": "user", "message": {"content": [{"type": "text",
                                                 "text": "<user_query>\nhi\n</user_query>"}]}}
ENDED = {"type": "turn_ended", "status": "success"}


def test_discover_takes_the_project_s_transcripts_and_its_ide_chats_once_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr("sys.platform", "linux")
    project = tmp_path / "work" / "acme-api"
    project.mkdir(parents=True)
    slug = project_slug(str(project))
    assert slug == str(project).lstrip("/").replace("/", "-").replace("_", "-")
    projects = tmp_path / "home" / ".cursor" / "projects"
    cli = _transcript(projects, slug, "11111111-1111-4111-8111-111111111111.jsonl", USER, ENDED)
    shell_id = "22222222-2222-4222-8222-222222222222"
    _transcript(projects, slug, f"{shell_id}/{shell_id}.jsonl", ENDED)  # IDE: markers only
    both_id = "33333333-3333-4333-8333-333333333333"
    both = _transcript(projects, slug, f"{both_id}/{both_id}.jsonl", USER, ENDED)
    sub = _transcript(projects, slug, f"{both_id}/subagents/sub.jsonl", USER)
    _transcript(projects, "some-other-project", "x.jsonl", USER)
    db = make_db(cursor_user_dir() / "globalStorage" / "state.vscdb", {
        shell_id: _chat(str(project), [("b", 1)]),
        both_id: _chat(str(project), [("b", 1)]),
        "44444444-4444-4444-8444-444444444444": _chat("/elsewhere", [("b", 1)], trackedGitRepos=[
            {"repoPath": str(project)}]),
        "55555555-5555-4555-8555-555555555555": _chat("/elsewhere", [("b", 1)]),
        "66666666-6666-4666-8666-666666666666": _chat(str(project), []),  # never used
    }, {})
    assert db == tmp_path / "config" / "Cursor" / "User" / "globalStorage" / "state.vscdb"
    found = CursorReader().discover(None, str(project))
    assert found == [str(cli), str(both), str(sub), chat_path(db, shell_id),
                     chat_path(db, "44444444-4444-4444-8444-444444444444")]


def test_discover_under_a_source_takes_every_transcript_and_every_chat(tmp_path: Path) -> None:
    source = tmp_path / "copy"
    one = _transcript(source, "a", "t.jsonl", USER)
    (source / "notes.jsonl").write_text('{"type": "user", "uuid": "u"}\n')
    db = _db_with_one_chat(source / "ide", "/w")
    assert CursorReader().discover(str(source), "/anything") == [str(one), chat_path(db, CHAT)]


def test_the_ide_s_user_folder_follows_the_platform() -> None:
    home = {"HOME": "/h"}
    assert cursor_user_dir(home) in {Path("/h/.config/Cursor/User"),
                                     Path("/h/Library/Application Support/Cursor/User")}


def test_list_composers_skips_chats_without_messages(tmp_path: Path) -> None:
    db = _db_with_one_chat(tmp_path, "/w")
    chats = list_composers(db)
    assert [(c.composer_id, c.workspace, c.messages) for c in chats] == [(CHAT, "/w", 10)]


def test_a_chat_row_that_is_not_json_is_passed_over_by_discovery(tmp_path: Path) -> None:
    db = _db_with_one_chat(tmp_path, "/w")
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)",
                     ("composerData:broken", "{not json"))
        conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)",
                     ("composerData:blob", json.dumps(_chat("/w", [("b1", 1)])).encode()))
    conn.close()
    chats = sorted((c.composer_id, c.messages) for c in list_composers(db))
    assert chats == [(CHAT, 10), ("blob", 1)]
