"""The OpenCode reader on one session held in each of OpenCode's three places (its SQLite
database, its JSON storage before 1.2, an `opencode export`): the same events from each, every
part type, the turn rules, host context screened, discovery by the session's directory."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

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
    UserMessage,
)
from dsh_chapters_core.turns import split_turns
from dsh_chapters_harness.opencode import OpenCodeReader, backing_file, data_dir

from tests.fixtures import other_agents as fx

READER = OpenCodeReader()


def of(transcript: Transcript, kind: type) -> list:
    return [e for e in transcript.events if isinstance(e, kind)]


def export(tmp_path: Path, data: bytes | None = None) -> Transcript:
    path = tmp_path / "full.jsonl"
    path.write_bytes(fx.opencode_export().data if data is None else data)
    return READER.read(str(path))


@pytest.fixture(params=["export", "database", "storage"])
def transcript(request: pytest.FixtureRequest, tmp_path: Path) -> Transcript:
    if request.param == "export":
        return export(tmp_path)
    if request.param == "database":
        database = fx.opencode_database(tmp_path / "opencode.db")
        return READER.read(f"{database}#{fx.OC_SESSION}")
    return READER.read(str(fx.opencode_storage(tmp_path)))


def test_the_three_places_give_the_same_events(tmp_path: Path) -> None:
    from_export = export(tmp_path)
    database = fx.opencode_database(tmp_path / "opencode.db")
    from_database = READER.read(f"{database}#{fx.OC_SESSION}")
    from_storage = READER.read(str(fx.opencode_storage(tmp_path / "legacy")))
    assert from_export.events == from_database.events == from_storage.events
    assert {t.session_id for t in (from_export, from_database, from_storage)} == {fx.OC_SESSION}
    assert from_database.cwd == fx.PROJECT and from_database.started_at.startswith("2026-")


def test_prompts_and_replies_are_verbatim(transcript: Transcript) -> None:
    assert tuple(e.text for e in of(transcript, UserMessage)) == fx.O_PROMPTS
    assert tuple(e.text for e in of(transcript, AssistantMessage)) == fx.O_REPLIES


def test_synthetic_and_ignored_text_is_host_context(transcript: Transcript) -> None:
    injected = [(i.kind, i.text[:20]) for i in of(transcript, HostInjection)]
    assert injected == [(InjectionKind.RUNTIME_CONTEXT, "Called the Read tool"),
                        (InjectionKind.RUNTIME_CONTEXT, "Continue if you have"),
                        (InjectionKind.PLUGIN_NOTICE, "▣ DCP | -72.1K remov")]


def test_tools_reasoning_and_the_compaction(transcript: Transcript) -> None:
    calls = of(transcript, ToolCall)
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_1", "read", {"filePath": "src/cart.py"}), ("call_2", "bash", {"command": "pytest"})]
    assert [(r.call_id, r.text, r.is_error) for r in of(transcript, ToolResult)] == [
        ("call_1", "1\tdef total(cart):", False), ("call_2", "Command exited with code 1", True)]
    assert [r.text for r in of(transcript, Reasoning)] == ["Looking at the page first."]
    assert [m.text for m in of(transcript, CompactionMarker)] == ["", fx.O_SUMMARY]


def test_a_turn_ends_where_opencodes_loop_does(transcript: Transcript) -> None:
    """Complete at a finish other than tool-calls/unknown, or an error (the abort)."""
    split = split_turns(transcript.events)
    assert len(split.complete) == 4 and not split.incomplete
    prompts = [[e.text for e in t.events if isinstance(e, UserMessage)] for t in split.complete]
    assert prompts == [[p] for p in fx.O_PROMPTS]
    ends = [e for e in transcript.events if isinstance(e, TurnEnd)]
    assert [e.reason for e in ends] == ["", "", "", "aborted"]


def test_a_step_that_calls_tools_keeps_the_turn_open(tmp_path: Path) -> None:
    info, messages = fx.opencode_session()
    data = json.dumps({"info": info, "messages": messages[:2]}, indent=2).encode()
    split = split_turns(export(tmp_path, data).events)
    assert not split.complete and split.incomplete


def test_every_line_of_an_export_is_accounted(tmp_path: Path) -> None:
    data = fx.opencode_export().data
    account = export(tmp_path).account
    assert account.total == data.count(b"\n") and account.unknown == account.malformed == 0
    assert set(dict(account.skip_rules)) == {
        "document-structure", "step-boundary", "file-attachment", "agent-mention",
        "empty-reasoning", "file-patch", "snapshot", "retry-notice", "compaction-reasoning",
        "empty-text"}


def test_every_row_of_the_database_is_accounted(tmp_path: Path) -> None:
    database = fx.opencode_database(tmp_path / "opencode.db")
    account = READER.read(f"{database}#{fx.OC_SESSION}").account
    _, messages = fx.opencode_session()
    assert account.total == 1 + len(messages) + sum(len(m["parts"]) for m in messages)
    assert account.unknown == account.malformed == 0


def test_an_unknown_part_type_is_counted_by_name(tmp_path: Path) -> None:
    info, messages = fx.opencode_session()
    messages[2]["parts"].append({"type": "hologram", "id": "prt_x"})
    data = json.dumps({"info": info, "messages": messages}, indent=2).encode()
    lines = len(json.dumps(messages[2]["parts"][-1], indent=2).splitlines())
    assert dict(export(tmp_path, data).account.unknown_types) == {"part:hologram": lines}


def test_a_half_written_export_keeps_only_whole_messages(tmp_path: Path) -> None:
    data = fx.opencode_export().data
    cut = data[: data.index(fx.O_REPLY_2.encode())]
    transcript = export(tmp_path, cut)
    assert [e.text for e in of(transcript, AssistantMessage)] == [fx.O_REPLY_1]
    account = transcript.account
    assert account.total + account.truncated_tail == cut.count(b"\n") + 1
    assert "unfinished-write" in dict(account.skip_rules) and account.malformed == 0


def test_a_revert_keeps_the_seq_of_what_follows(tmp_path: Path) -> None:
    """OpenCode deletes reverted messages: a seq from each message's own time never reuses
    a number already archived."""
    info, messages = fx.opencode_session()
    whole = export(tmp_path, json.dumps({"info": info, "messages": messages}).encode())
    reverted = messages[:1] + messages[3:]
    after = export(tmp_path, json.dumps({"info": info, "messages": reverted}).encode())
    late = [e for e in of(whole, UserMessage) if e.seq >= (fx.T0 + 10_000) * 1000]
    assert len(late) == 3
    assert [e.seq for e in late] == [e.seq for e in of(after, UserMessage)][1:]


def test_sniff_and_refusals(tmp_path: Path) -> None:
    assert READER.sniff(fx.opencode_export().data[:4096])
    assert not READER.sniff(fx.gemini_document().data[:4096])
    assert not READER.sniff(fx.pi_session().data[:4096])
    database = fx.opencode_database(tmp_path / "opencode.db")
    with pytest.raises(InputError, match="has no session ses_nothere"):
        READER.read(f"{database}#ses_nothere")
    with pytest.raises(InputError):
        export(tmp_path, b'{"info": {"id": 3}, "messages": []}\n')


def test_the_database_is_only_read(tmp_path: Path) -> None:
    database = fx.opencode_database(tmp_path / "opencode.db")
    before = database.read_bytes()
    os.chmod(database, 0o444)
    READER.read(f"{database}#{fx.OC_SESSION}")
    assert database.read_bytes() == before


def test_discover_finds_this_projects_sessions(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    root = data_dir()
    root.mkdir(parents=True)
    project = tmp_path / "acme-api"
    project.mkdir()
    database = fx.opencode_database(root / "opencode.db", directory=str(project), others=2)
    legacy = fx.opencode_storage(root, directory=str(project))
    found = READER.discover(None, str(project))
    assert found == [f"{database}#{fx.OC_SESSION}", str(legacy)]
    assert READER.discover(None, "/srv/nobody") == []
    exported = tmp_path / "exports"
    exported.mkdir()
    (exported / "full.jsonl").write_bytes(fx.opencode_export().data)
    (exported / "other.json").write_text('{"a": 1}')
    assert READER.discover(str(exported), str(project)) == [str(exported / "full.jsonl")]
    assert len(READER.discover(str(root), str(project))) == 3 + 1  # all db sessions + storage


def test_the_backing_file_of_a_database_session_is_its_write_ahead_log(tmp_path: Path) -> None:
    database = fx.opencode_database(tmp_path / "opencode.db")
    connection = sqlite3.connect(database)  # held open: the log stays beside the database
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("UPDATE session SET title = 'x'")
    connection.commit()
    assert backing_file(f"{database}#{fx.OC_SESSION}") == f"{database}-wal"
    connection.close()
    assert backing_file(str(tmp_path / "full.jsonl")) == str(tmp_path / "full.jsonl")
