"""The DSH binding on logs in the shape DSH's JSONL backend writes (tests/fixtures/dsh/README.md).

Rewritten for the real format: the earlier tests asserted an invented one (`session/start`,
ISO times, `data.text`, `runId`), which DSH never wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import zstandard
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
    TurnStart,
    UserMessage,
)
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_harness.dsh import DshReader, iso_time
from dsh_chapters_harness.dsh_discovery import encode_segment, project_key

from tests.adapters.harness.transcript_shapes import assert_well_formed, of_type, turn_spans
from tests.fixtures import (
    DSH_LOG,
    DSH_LOG_SESSION_ID,
    DSH_LOG_TURNS,
    DSH_SESSIONS,
    FAKE_CREDENTIALS,
    PROJECT_CWD,
)
from tests.fixtures.dsh_logs import RUNTIME
from tests.fixtures.dsh_sessions import (
    COMMANDS_ID,
    COMPACTION_ID,
    FORK_CHILD_ID,
    FORK_PARENT_ID,
    INSTRUCTIONS_ID,
    INTERRUPTED_ID,
    MAIN_SUMMARY,
    OTHER_ID,
    SUBAGENT_ID,
    log_path,
    records,
)
from tests.fixtures.make_fixtures import DSH_TURNS, NOTICE, SKILLS

READER = DshReader()
SMALL = {"compaction": COMPACTION_ID, "instructions": INSTRUCTIONS_ID,
         "fork-parent": FORK_PARENT_ID, "fork-child": FORK_CHILD_ID, "subagent": SUBAGENT_ID,
         "commands": COMMANDS_ID, "interrupted": INTERRUPTED_ID}


def small(name: str) -> Path:
    return log_path(DSH_SESSIONS, SMALL[name])


@pytest.fixture(scope="module")
def log() -> Transcript:
    return READER.read(str(DSH_LOG))


def test_the_reader_satisfies_the_port() -> None:
    assert isinstance(READER, HarnessReader)
    assert READER.name == "dsh"


def test_header_gives_id_cwd_and_start(log: Transcript) -> None:
    header = records(DSH_LOG)[0]
    assert log.session_id == DSH_LOG_SESSION_ID == header["id"]
    assert log.cwd == PROJECT_CWD
    assert log.started_at == iso_time(header["createdAt"]) == "2026-11-21T08:30:00.000Z"
    assert log.root_session_id == ""


@pytest.mark.parametrize("path", [DSH_LOG, *(small(n) for n in SMALL)], ids=["main", *SMALL])
def test_every_line_is_accounted_and_none_is_unknown_or_malformed(path: Path) -> None:
    t = READER.read(str(path))
    assert t.account.total == len(records(path))
    assert t.account.unknown == t.account.malformed == 0, t.account
    assert not t.account.truncated_tail


def test_36_turns_at_the_logs_own_seqs(log: Transcript) -> None:
    spans = assert_well_formed(log)
    assert len(spans) == DSH_LOG_TURNS
    assert all(span.complete for span in spans)
    assert [span.of(UserMessage)[0].text for span in spans] == [t.prompt for t in DSH_TURNS]
    recs = records(DSH_LOG)[1:]
    assert [e.seq for e in log.events if isinstance(e, TurnStart)] == [
        r["seq"] for r in recs if r["type"] == "turn/start"]
    assert [e.seq for e in log.events if isinstance(e, TurnEnd)] == [
        r["seq"] for r in recs if r["type"] == "turn/end"]


def test_texts_come_verbatim_from_the_assembled_messages_never_twice(log: Transcript) -> None:
    assert [e.text for e in of_type(log, AssistantMessage)] == [
        s.text for t in DSH_TURNS for s in t.steps if s.kind == "say"]
    assert [e.text for e in of_type(log, Reasoning)] == [
        s.text for t in DSH_TURNS for s in t.steps if s.kind == "think"]
    rules = dict(log.account.skip_rules)
    rows = [r for r in records(DSH_LOG) if r["type"] in ("text-chunks", "reasoning-chunks")]
    assert rows and rules["stream-chunk"] == sum(
        1 for r in records(DSH_LOG) if r["type"] in ("assistant/chunk", "text-chunks",
                                                    "reasoning-chunks", "tool-call-chunks"))


def test_tool_calls_pair_with_their_results(log: Transcript) -> None:
    calls = {c.call_id: c for c in of_type(log, ToolCall)}
    results = of_type(log, ToolResult)
    assert len(calls) == len(results) == sum(
        1 for t in DSH_TURNS for s in t.steps if s.kind not in ("think", "say"))
    assert all(calls[r.call_id].seq == r.seq - 1 for r in results)
    texts = "\n".join(r.text for r in results)
    assert all(secret in texts for secret in FAKE_CREDENTIALS)


def test_injections_are_sources_and_never_in_a_turns_conversation(log: Transcript) -> None:
    injections = of_type(log, HostInjection)
    kinds = [i.kind for i in injections[:4]]
    assert kinds == [InjectionKind.INSTRUCTIONS, InjectionKind.SKILL_CATALOG,
                     InjectionKind.RUNTIME_CONTEXT, InjectionKind.PLUGIN_NOTICE]
    assert injections[1].text == SKILLS and injections[2].text == RUNTIME
    assert injections[3].text == NOTICE
    assert "Instructions from: tests/AGENTS.md" in injections[4].text
    for span in turn_spans(log):
        said = [e.text for e in span.of(UserMessage)]
        assert not any(NOTICE in s or "Instructions from" in s or RUNTIME in s for s in said)


def test_commands_and_the_manual_compaction(log: Transcript) -> None:
    runs = of_type(log, CommandRun)
    assert {r.command for r in runs} == {"/permission workspace-write", "/compact"}
    assert all(r.output for r in runs)
    (marker,) = of_type(log, CompactionMarker)
    assert marker.text == MAIN_SUMMARY
    assert dict(log.account.skip_rules)["compaction-checkpoint"] == 1


def test_the_aborted_turn_ends_at_its_turn_end(log: Transcript) -> None:
    span = next(s for s in turn_spans(log) if s.of(UserMessage)[0].text == "Loop it again.")
    assert span.complete
    assert span.of(ToolResult)[0].is_error


def test_compaction_takes_the_summary_from_compaction_summary_and_prune_keeps_the_original(
) -> None:
    t = READER.read(str(small("compaction")))
    (marker,) = of_type(t, CompactionMarker)
    summary = next(r for r in records(small("compaction")) if r["type"] == "compaction/summary")
    assert marker.text == summary["data"]["summary"][0]["text"]
    texts = [e.text for e in of_type(t, UserMessage)]
    assert texts == ["Note three facts about the billing schema before we refactor it.",
                     "Read the invoices migration and tell me its columns."]
    results = of_type(t, ToolResult)
    assert [r.text for r in results] == ["0001_init.py\n0002_invoices.py\n",
                                         "1: op.create_table('invoices', id, customer_id, cents)"]
    rules = dict(t.account.skip_rules)
    assert rules["pruned-replacement"] == rules["compaction-prune"] == 1
    assert rules["compaction-checkpoint"] == 1 and rules["compaction-phase"] == 2
    assert [s.complete for s in turn_spans(t)] == [True, True]


def test_agents_md_is_an_injection_not_a_prompt() -> None:
    t = READER.read(str(small("instructions")))
    (span,) = turn_spans(t)
    assert [e.text for e in span.of(UserMessage)] == [
        "Open docs/plan.txt with the read tool, then say FINISHED."]
    instructions = [i for i in of_type(t, HostInjection) if i.kind is InjectionKind.INSTRUCTIONS]
    assert [("Instructions from: AGENTS.md" in i.text) for i in instructions] == [True, False]
    assert [e.text for e in of_type(t, AssistantMessage)] == ["FINISHED"]


def test_a_fork_child_holds_only_what_follows_its_seed_and_links_its_parent() -> None:
    parent = READER.read(str(small("fork-parent")))
    child = READER.read(str(small("fork-child")))
    header = records(small("fork-child"))[0]
    assert child.root_session_id == FORK_PARENT_ID == header["parentSession"]
    (span,) = turn_spans(child)
    assert [e.text for e in span.of(UserMessage)] == [
        "Which release name was mentioned before? Reply with that word only."]
    assert [e.text for e in of_type(child, AssistantMessage)] == ["HAZELNUT"]
    assert min(e.seq for e in child.events) > header["seedLength"]
    seeded = dict(child.account.skip_rules)["fork-seed"]
    assert seeded == len(records(small("fork-parent"))) - 1  # every parent line, nothing else
    assert [e.text for e in of_type(parent, AssistantMessage)] == ["OK"]


def test_a_subagent_is_its_own_session_linked_to_its_parent() -> None:
    t = READER.read(str(small("subagent")))
    assert t.session_id == SUBAGENT_ID and t.root_session_id == FORK_PARENT_ID
    assert [e.text for e in of_type(t, AssistantMessage)] == ["3"]
    assert len(turn_spans(t)) == 1


def test_commands_are_records_never_conversation() -> None:
    t = READER.read(str(small("commands")))
    assert [(r.command, r.output) for r in of_type(t, CommandRun)] == [
        ("/permission read-only", "Permission preset now read-only."),
        ("/plan sketch a --dry-run flag", "Plan mode is on."),
        ("/permission sideways", "error: Unknown preset: sideways."),
    ]
    for span in turn_spans(t):
        assert not span.of(CommandRun)
    assert [e.text for e in of_type(t, UserMessage)] == ["List what the Makefile can build."]


def test_every_turn_end_reason_ends_its_turn() -> None:
    t = READER.read(str(small("interrupted")))
    spans = turn_spans(t)
    assert [s.complete for s in spans] == [True, True, True]
    assert spans[0].of(ToolResult)[0].is_error
    assert [e.text for e in spans[1].of(AssistantMessage)] == ["Checking what the suite left beh"]


# -- logs written here --------------------------------------------------------------------
CREATED = 1_795_336_200_000


def header(**extra: Any) -> dict[str, Any]:
    return {"type": "session", "version": 0, "id": "s-1", "createdAt": CREATED,
            "cwd": "/w", "delegationDepth": 0, **extra}


def ev(record_type: str, seq: int, **data: Any) -> dict[str, Any]:
    return {"type": record_type, "seq": seq, "time": CREATED + seq, "data": data}


def prompt(seq: int, text: str) -> dict[str, Any]:
    return ev("user/message", seq, content=[{"type": "text", "text": text}],
              source={"kind": "user"}, role="user", id=f"m{seq}")


def say(seq: int, text: str) -> dict[str, Any]:
    return ev("assistant/message", seq, turn=1, step=1, message={
        "role": "assistant", "content": [{"type": "text", "text": text}],
        "source": {"kind": "model", "provider": "p", "model": "m"}, "id": f"a{seq}"})


def write(tmp_path: Path, lines: list[dict[str, Any]], name: str = "session.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return str(path)


@pytest.mark.parametrize("kind", ["completed", "aborted", "blocked", "error", "max-tokens",
                                  "interrupted"])
def test_each_reason_kind_closes_the_turn(tmp_path: Path, kind: str) -> None:
    t = READER.read(write(tmp_path, [header(), ev("turn/start", 0, turn=1), prompt(1, "hi"),
                                     say(2, "hello"), ev("turn/end", 3, turn=1,
                                                         reason={"kind": kind})]))
    assert [s.complete for s in turn_spans(t)] == [True]
    assert t.events[-1] == TurnEnd(3, iso_time(CREATED + 3), "" if kind == "completed" else kind)


def test_a_seq_that_does_not_increase_is_malformed_and_an_undocumented_type_unknown(
    tmp_path: Path,
) -> None:
    t = READER.read(write(tmp_path, [
        header(), ev("turn/start", 0, turn=1), prompt(1, "hi"), say(1, "dup"),
        {"type": "user/message", "data": {}}, say(2, "hello"), ev("turn/end", 3, turn=1,
                                                                  reason={"kind": "completed"}),
        ev("agent/pre-step", 4), {**ev("vendor/extra", 5), "ignorable": True},
    ]))
    assert t.account.malformed_lines == (4,)
    assert dict(t.account.unknown_types) == {"agent/pre-step": 1, "user/message": 1}
    assert dict(t.account.skip_rules) == {"ignorable": 1}
    assert [e.text for e in of_type(t, AssistantMessage)] == ["hello"]


def test_without_turn_end_the_last_turn_stays_open(tmp_path: Path) -> None:
    t = READER.read(write(tmp_path, [header(), ev("turn/start", 0, turn=1), prompt(1, "a"),
                                     say(2, "b"), ev("turn/end", 3, turn=1,
                                                     reason={"kind": "completed"}),
                                     ev("turn/start", 4, turn=2), prompt(5, "c")]))
    assert [s.complete for s in turn_spans(t)] == [True, False]


def test_a_done_without_its_run_is_kept(tmp_path: Path) -> None:
    t = READER.read(write(tmp_path, [header(), ev("command/done", 0, commandId="zz",
                                                  kind="success", text="orphan output")]))
    assert of_type(t, CommandRun) == [CommandRun(0, "", "orphan output", iso_time(CREATED))]


def frames(lines: list[str], batches: list[int]) -> bytes:
    """DSH's zstd layout: one checksummed frame for the header, then one per append batch."""
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    out, start = [cctx.compress((lines[0] + "\n").encode())], 1
    for end in [*batches, len(lines)]:
        if end > start:
            out.append(cctx.compress("".join(line + "\n" for line in lines[start:end]).encode()))
        start = end
    return b"".join(out)


def test_a_zstd_log_reads_like_its_plain_twin(tmp_path: Path) -> None:
    lines = DSH_LOG.read_text(encoding="utf-8").splitlines()
    zst = tmp_path / "session.jsonl.zstd"
    zst.write_bytes(frames(lines, list(range(40, len(lines), 40))))
    plain, packed = READER.read(str(DSH_LOG)), READER.read(str(zst))
    assert packed.events == plain.events and packed.account == plain.account
    assert packed.session_id == DSH_LOG_SESSION_ID
    assert READER.sniff(zst.read_bytes()[:4096])


def test_a_torn_last_frame_keeps_what_is_complete_and_says_it_stopped(tmp_path: Path) -> None:
    lines = DSH_LOG.read_text(encoding="utf-8").splitlines()
    whole = frames(lines, [100, 200])
    head = frames(lines[:200], [100])
    torn = tmp_path / "session.jsonl.zstd"
    torn.write_bytes(whole[: len(head) + (len(whole) - len(head)) // 2])
    t = READER.read(str(torn))
    assert t.account.truncated_tail
    assert 200 <= t.account.total < len(lines)
    assert t.account.malformed == t.account.unknown == 0
    plain = READER.read(str(DSH_LOG))
    done = [s for s in turn_spans(t) if s.complete]
    assert done and [s.events for s in done] == [s.events for s in turn_spans(plain)[: len(done)]]


def test_a_torn_plain_line_is_reported(tmp_path: Path) -> None:
    data = DSH_LOG.read_bytes()
    cut = tmp_path / "session.jsonl"
    cut.write_bytes(data[: len(data) - 25])
    t = READER.read(str(cut))
    assert t.account.truncated_tail and t.account.malformed == 0


def test_project_key_and_segment_match_dshs_encoding() -> None:
    assert project_key("/home/dev/work/acme-api") == "--home-dev-work-acme-api--"
    assert project_key("C:\\Users\\dev\\my app") == "--C-Users-dev-my~0020app--"
    assert project_key("/") == "--root--"
    assert project_key("/a//b~c") == "--a-b~007Ec--"
    assert project_key("/" + "x" * 300) == "--" + "x" * 251 + "--"
    assert encode_segment("..") == "~002E~002E" and encode_segment("a/b") == "a~002Fb"
    assert encode_segment("\U0001f600") == "~D83D~DE00"  # per UTF-16 code unit


def test_discover_finds_this_workspaces_logs_under_dsh_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSH_HOME", str(DSH_SESSIONS.parent))
    found = READER.discover(None, PROJECT_CWD)
    assert str(DSH_LOG) in found and len(found) == 8
    assert all(Path(p).parent.parent.name == "--home-dev-work-acme-api--" for p in found)
    assert READER.discover(None, "/home/dev/work/billing-worker") == [
        str(log_path(DSH_SESSIONS, OTHER_ID, "/home/dev/work/billing-worker"))]
    assert len(READER.discover(str(DSH_SESSIONS), "/x")) == 9
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "none"))
    assert READER.discover(None, PROJECT_CWD) == []


def test_discover_reads_compressed_headers_and_checks_the_header_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "dshhome"
    project = home / "sessions" / project_key("/w")
    (project / "s-1").mkdir(parents=True)
    lines = [json.dumps(header()), json.dumps(ev("turn/start", 0, turn=1))]
    (project / "s-1" / "session.jsonl.zstd").write_bytes(frames(lines, []))
    (project / "s-2").mkdir()  # same project dir, another cwd that normalizes alike
    (project / "s-2" / "session.jsonl").write_text(json.dumps(header(id="s-2", cwd="/w/")) +
                                                   "\n")
    (project / "s-3").mkdir()
    (project / "s-3" / "session.jsonl").write_text(json.dumps(header(id="s-3", cwd=":w")) + "\n")
    monkeypatch.setenv("DSH_HOME", str(home))
    assert READER.discover(None, "/w") == [str(project / "s-1" / "session.jsonl.zstd"),
                                           str(project / "s-2" / "session.jsonl")]


def test_a_turn_that_did_not_complete_says_why_in_its_turn_end() -> None:
    t = READER.read(str(small("interrupted")))
    assert [e.reason for e in t.events if isinstance(e, TurnEnd)] == [
        "interrupted", "aborted", ""]


def test_the_earlier_flat_message_shape_still_reads(tmp_path: Path) -> None:
    """DSH's web snapshots keep an earlier shape: blocks straight in `data`, no `message`."""
    t = READER.read(write(tmp_path, [
        header(), ev("turn/start", 0, turn=1), prompt(1, "run it"),
        ev("assistant/message", 2, turn=1, step=1, content=[
            {"type": "reasoning", "text": "Run the command."},
            {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}]),
        ev("tool/call", 3, turn=1, step=1, callId="c1", name="bash", arguments="{}"),
        ev("tool/result", 4, turn=1, step=1, callId="c1",
           content=[{"type": "text", "text": "ok\n"}], isError=False),
        ev("turn/end", 5, turn=1, reason={"kind": "completed"}),
    ]))
    assert t.account.malformed == 0
    assert [e.text for e in of_type(t, Reasoning)] == ["Run the command."]
    assert [(r.call_id, r.text) for r in of_type(t, ToolResult)] == [("c1", "ok\n")]


def test_a_zstd_file_with_no_complete_frame_is_refused_in_its_own_terms(tmp_path: Path) -> None:
    lines = DSH_LOG.read_text(encoding="utf-8").splitlines()
    whole = frames(lines[:3], [])
    started = tmp_path / "session.jsonl.zstd"
    started.write_bytes(whole[:10])  # the header frame cut short
    with pytest.raises(InputError, match=r"Zstandard file \(10 bytes\)") as caught:
        READER.read(str(started))
    assert "wait for its first turn" in caught.value.hint
