"""The readers on what Claude Code, Codex and DSH write today (`tests/fixtures/current-shapes/`,
written by `make_current_shapes.py`): one fixture per shape an older reader got wrong, each
check failing on that reader.

Claude Code: a reply stays with its prompt when every block is its own record carrying the
final stop reason; a tool result written before its call answers it; a turn-end record that
trails the next prompt ends nothing; messages typed mid-turn are archived where typed, once;
the 2.1.x record types are imported or skipped by name; a custom command without arguments is
a prompt; a copy keeps the session's own id; branch and version are read. Codex: AGENTS.md in
every heading form is host context; sub-agent messages are marked blocks; a rollback is
marked; the thread name is the title. DSH: a chunk-only answer is assembled; `session.v<N>`
logs are found; an unknown format version is refused by name.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import zstandard
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    CompactionMarker,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolResult,
    Transcript,
    UserMessage,
)
from dsh_chapters_core.turns import split_turns
from dsh_chapters_harness.claude_code import ClaudeCodeReader
from dsh_chapters_harness.codex import CodexReader
from dsh_chapters_harness.dsh import DshReader
from dsh_chapters_harness.dsh_discovery import discover_logs, project_key

from tests.adapters.harness.transcript_shapes import assert_well_formed, of_type
from tests.fixtures import make_current_shapes as cs

CLAUDE = ClaudeCodeReader()
CODEX = CodexReader()
DSH = DshReader()


def claude(session: str) -> Transcript:
    return CLAUDE.read(str(cs.claude_path(session)))


def texts(events: object, kind: type) -> list[str]:
    return [e.text for e in events if isinstance(e, kind)]  # type: ignore[attr-defined]


def test_the_generator_reproduces_the_committed_fixtures_byte_for_byte(tmp_path: Path) -> None:
    cs.build(tmp_path)
    for path in cs.FILES:
        relative = path.relative_to(cs.ROOT)
        assert (tmp_path / relative).read_bytes() == path.read_bytes(), relative


# --- Claude Code ---------------------------------------------------------------------------


def test_a_reply_written_block_by_block_stays_with_its_prompt() -> None:
    """2.1.91+: the thinking record already says end_turn; the turn ends after the answer."""
    transcript = claude(cs.PER_BLOCK)
    spans = assert_well_formed(transcript)
    split = split_turns(transcript.events)
    assert len(split.complete) == 2 and not split.incomplete
    for span, prompt, thinking, reply in zip(spans, cs.PER_BLOCK_PROMPTS, cs.PER_BLOCK_THINKING,
                                             cs.PER_BLOCK_REPLIES, strict=True):
        assert texts(span.events, UserMessage) == [prompt]
        assert thinking in texts(span.events, Reasoning)
        assert texts(span.events, AssistantMessage) == [reply]
    assert transcript.account.unknown == 0
    assert dict(transcript.account.skip_rules)["scheduled-task"] == 1


def test_a_tool_result_written_before_its_call_answers_it() -> None:
    """The session ends on end_turn: its last turn is complete, not held back."""
    transcript = claude(cs.RESULT_FIRST)
    split = split_turns(transcript.events)
    assert len(split.complete) == 1 and not split.incomplete
    [turn] = split.complete
    assert cs.RESULT_FIRST_OUTPUT in texts(turn.events, ToolResult)
    assert cs.RESULT_FIRST_REPLY in texts(turn.events, AssistantMessage)


def test_a_turn_end_record_that_trails_the_next_prompt_ends_nothing() -> None:
    spans = assert_well_formed(claude(cs.LATE_END))
    assert [s.complete for s in spans] == [True, True]
    for span, prompt, reply in zip(spans, cs.LATE_END_PROMPTS, cs.LATE_END_REPLIES, strict=True):
        assert texts(span.events, UserMessage) == [prompt]
        assert texts(span.events, AssistantMessage) == [reply]


def test_messages_typed_mid_turn_are_archived_where_typed_once() -> None:
    """2.1.20: only queue-operation records hold them."""
    transcript = claude(cs.TYPED_OLD)
    first, second = assert_well_formed(transcript)
    users = texts(first.events, UserMessage)
    assert users == [cs.TYPED_PROMPTS[0], cs.TYPED["consumed"], cs.TYPED["edited"]]
    assert texts(second.events, UserMessage) == [cs.TYPED["sent"]]  # the prompt, not twice
    everything = " ".join(texts(transcript.events, UserMessage))
    assert cs.TYPED["draft"] + "\n" not in everything and everything.count("log every") == 1
    assert "task-notification" not in everything
    rules = dict(transcript.account.skip_rules)
    assert rules["queue-withdrawn"] == 1  # the draft taken back into the input box
    assert rules["queued-then-sent"] == 1  # its prompt record holds it
    assert rules["queued-notification"] == 1
    assert rules["queue-operation"] == 5  # remove ×3, popAll, dequeue
    assert transcript.account.unknown == 0
    # The consumed message sits where it was typed: after the first tool call, before the
    # result the model read it with.
    order = [e.text if isinstance(e, UserMessage) else type(e).__name__ for e in first.events]
    assert order.index(cs.TYPED["consumed"]) < order.index("ToolResult")


def test_a_queued_message_repeated_by_its_attachment_is_archived_once() -> None:
    """2.1.2xx: `remove` names the message and a queued_command attachment repeats it."""
    transcript = claude(cs.TYPED_NEW)
    [turn] = assert_well_formed(transcript)
    assert texts(turn.events, UserMessage) == [cs.TYPED_PROMPTS[1], cs.TYPED["new-consumed"]]
    assert dict(transcript.account.skip_rules)["queued-delivery"] == 1


def test_the_new_record_types_are_known() -> None:
    transcript = claude(cs.NEW_RECORDS)
    account = transcript.account
    assert account.unknown == 0 and account.unknown_types == ()
    rules = dict(account.skip_rules)
    for rule in ("agent-setting", "remote-control", "relocated", "worktree-state",
                 "session-latch", "frame-link", "scheduled-task", "model-fallback"):
        assert rule in rules, rule
    [recap] = [e for e in of_type(transcript, CompactionMarker) if e.kind == "away summary"]
    assert recap.text == cs.AWAY_SUMMARY
    assert account.total == len(cs.claude_path(cs.NEW_RECORDS).read_text().splitlines())


def test_a_custom_command_without_arguments_is_the_users_prompt() -> None:
    [turn] = assert_well_formed(claude(cs.CUSTOM))
    assert texts(turn.events, UserMessage) == [cs.CUSTOM_NAME]
    assert texts(turn.events, AssistantMessage) == [cs.CUSTOM_REPLY]


def test_a_copy_under_another_name_keeps_the_sessions_own_id(tmp_path: Path) -> None:
    """A checkpoint's `full.jsonl` is the same session as `~/.claude/projects/…/<id>.jsonl`."""
    copy = tmp_path / "cb" / "31ffcdfeaa" / "0" / "full.jsonl"
    copy.parent.mkdir(parents=True)
    shutil.copyfile(cs.claude_path(cs.PER_BLOCK), copy)
    transcript = CLAUDE.read(str(copy))
    assert transcript.session_id == cs.PER_BLOCK and transcript.root_session_id == ""


def test_the_branch_cwd_and_harness_version_are_read() -> None:
    transcript = claude(cs.PER_BLOCK)
    assert (transcript.cwd, transcript.git_branch) == (cs.CWD, cs.BRANCH)
    assert transcript.harness_version == "2.1.220"


# --- Codex ---------------------------------------------------------------------------------


def codex(session: str) -> Transcript:
    return CODEX.read(str(cs.codex_path(session)))


def test_agents_md_without_for_and_its_neighbours_are_host_context() -> None:
    transcript = codex(cs.CODEX_AGENTS)
    [turn] = assert_well_formed(transcript)
    assert texts(turn.events, UserMessage) == [cs.AGENTS_PROMPT]
    kinds = {e.kind for e in of_type(transcript, HostInjection)}
    assert {InjectionKind.INSTRUCTIONS, InjectionKind.PLUGIN_NOTICE,
            InjectionKind.RUNTIME_CONTEXT} <= kinds
    assert transcript.account.unknown == 0
    assert (transcript.git_branch, transcript.harness_version) == (cs.BRANCH, "0.142.5")


def test_a_multi_agent_runs_sub_agent_messages_are_marked_blocks() -> None:
    transcript = codex(cs.CODEX_MULTI)
    assert transcript.account.unknown == 0, transcript.account.unknown_types
    [turn] = assert_well_formed(transcript)
    users = texts(turn.events, UserMessage)
    assert users[0] == cs.MULTI_PROMPT
    assert users[1] == f"[message from agent /root/docs_audit to /root]\n\n{cs.SUB_REPORT}"
    assert users[2] == f"[message from agent /root/tests_audit to /root]\n\n{cs.SUB_NOTE}"
    assert texts(turn.events, AssistantMessage) == [cs.MULTI_REPLY]
    rules = dict(transcript.account.skip_rules)
    assert {"world-state", "agent-communication", "event-status"} <= set(rules)


def test_a_rollback_keeps_the_undone_turn_and_marks_it() -> None:
    transcript = codex(cs.CODEX_ROLLBACK)
    assert transcript.account.unknown == 0, transcript.account.unknown_types
    undone, again = assert_well_formed(transcript)
    assert texts(undone.events, UserMessage) == [cs.ROLLBACK_PROMPTS[0]]  # verbatim, kept
    assert texts(undone.events, AssistantMessage) == [cs.ROLLBACK_PARTIAL]
    assert texts(again.events, UserMessage) == [cs.ROLLBACK_PROMPTS[1]]
    prompt_seq = of_type(transcript, UserMessage)[0].seq
    [marker] = [e for e in of_type(transcript, CompactionMarker) if e.kind.startswith("rollback")]
    assert marker.kind == f"rollback: the user undid 1 turn (seq {prompt_seq}–{marker.seq - 1})"
    assert transcript.title == cs.THREAD_NAME


# --- DSH -----------------------------------------------------------------------------------


def test_a_chunk_only_answer_is_assembled_and_its_finish_ends_the_turn() -> None:
    transcript = DSH.read(str(cs.dsh_path()))
    first, second = assert_well_formed(transcript)
    assert first.complete and second.complete  # the second has no turn/end: its finish ends it
    assert texts(first.events, UserMessage) == [cs.DSH_PROMPTS[0]]
    assert texts(first.events, Reasoning) == [cs.DSH_THINKING]
    assert texts(first.events, AssistantMessage) == [cs.DSH_ANSWERS[0]]  # from block-end
    assert texts(second.events, AssistantMessage) == [cs.DSH_ANSWERS[1]]  # from the deltas
    assert transcript.account.imported > 0 and transcript.account.unknown == 0


def test_a_chunk_only_log_read_right_after_a_finish_keeps_that_turn_open(
    tmp_path: Path,
) -> None:
    """A live log read between the finish chunk and the message DSH may still write."""
    lines = cs.dsh_path().read_text().splitlines(keepends=True)
    upto = next(i for i, line in enumerate(lines) if '"finish"' in line and '"turn":2' in line)
    prefix = tmp_path / "session.jsonl"
    prefix.write_text("".join(lines[:upto + 1]))
    spans = assert_well_formed(DSH.read(str(prefix)))
    assert [s.complete for s in spans] == [True, False]


def _zstd_log(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    compressor = zstandard.ZstdCompressor()
    with path.open("wb") as out:
        out.write(compressor.compress(lines[0].encode()))
        out.write(compressor.compress("".join(lines[1:]).encode()))


def test_discovery_takes_the_highest_generation_of_a_versioned_log_name(tmp_path: Path) -> None:
    lines = cs.dsh_path().read_text().splitlines(keepends=True)
    session = tmp_path / "dsh-home" / "sessions" / project_key(cs.CWD) / cs.DSH_CHUNKS
    _zstd_log(session / "session.jsonl.zstd", lines[:4])
    _zstd_log(session / "session.v2.jsonl.zstd", lines[:8])
    _zstd_log(session / "session.v3.jsonl.zstd", lines)
    found = discover_logs(None, cs.CWD, {"DSH_HOME": str(tmp_path / "dsh-home")})
    assert found == [str(session / "session.v3.jsonl.zstd")]
    assert discover_logs(str(tmp_path / "dsh-home"), cs.CWD) == found  # --source too
    transcript = DSH.read(found[0])
    assert transcript.session_id == cs.DSH_CHUNKS
    assert cs.DSH_ANSWERS[1] in texts(transcript.events, AssistantMessage)


def test_a_format_version_the_reader_does_not_know_is_refused_by_name(tmp_path: Path) -> None:
    lines = cs.dsh_path().read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["version"] = 3
    log = tmp_path / "session.v3.jsonl.zstd"
    _zstd_log(log, [json.dumps(header) + "\n", *lines[1:]])
    with pytest.raises(InputError) as raised:
        DSH.read(str(log))
    assert "format version 3" in raised.value.message
    assert "knows version 0" in raised.value.message
    assert raised.value.data["formatVersion"] == 3


def test_the_chunk_only_log_reads_the_same_compressed(tmp_path: Path) -> None:
    lines = cs.dsh_path().read_text().splitlines(keepends=True)
    log = tmp_path / cs.DSH_CHUNKS / "session.jsonl.zstd"
    _zstd_log(log, lines)
    plain, packed = DSH.read(str(cs.dsh_path())), DSH.read(str(log))
    assert plain.events == packed.events
    assert io.BytesIO(log.read_bytes()).read(4) == b"\x28\xb5\x2f\xfd"


def test_the_watcher_follows_compressed_and_versioned_dsh_logs(tmp_path: Path) -> None:
    """`chapters watch` wakes for `session.jsonl.zstd` and `session.v3.jsonl.zstd` writes,
    DSH's default encoding, as for plain `.jsonl` transcripts."""
    import threading

    from dsh_chapters_harness.watch import WatchTiming, session_changes

    session = tmp_path / "--home-dev-work-acme-api--" / cs.DSH_CHUNKS
    session.mkdir(parents=True)
    stop = threading.Event()
    changes = session_changes([tmp_path], WatchTiming(debounce_ms=200, tick_ms=500), stop)
    assert next(changes) is None  # the watch is live
    for name in ("session.v3.jsonl.zstd", "session.jsonl.zstd", "notes.txt"):
        (session / name).write_bytes(b"\x28\xb5\x2f\xfd")
    seen: set[str] = set()
    for _ in range(40):  # 40 idle ticks of 0.5 s at most
        seen |= {Path(p).name for p in next(changes) or ()}
        if {"session.v3.jsonl.zstd", "session.jsonl.zstd"} <= seen:
            break
    stop.set()
    assert seen == {"session.v3.jsonl.zstd", "session.jsonl.zstd"}
