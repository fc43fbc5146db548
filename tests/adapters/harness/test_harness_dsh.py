"""The DSH binding on a 36-turn event log, and on logs that break the format's rules."""

from __future__ import annotations

import json
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
from dsh_chapters_harness.dsh import DshReader

from tests.adapters.harness.transcript_shapes import assert_well_formed, of_type, turn_spans
from tests.fixtures import (
    DSH_LOG,
    DSH_LOG_SESSION_ID,
    DSH_LOG_TURNS,
    DSH_SESSIONS,
    FAKE_CREDENTIALS,
    PROJECT_CWD,
    fake_home,
)
from tests.fixtures.make_fixtures import AGENTS_MD, DSH_TURNS, NOTICE, SKILLS

READER = DshReader()


@pytest.fixture(scope="module")
def log() -> Transcript:
    return READER.read(str(DSH_LOG))


def records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DSH_LOG.read_text().splitlines()]


def test_the_reader_satisfies_the_port() -> None:
    assert isinstance(READER, HarnessReader)
    assert READER.name == "dsh"


def test_header_and_accounting(log: Transcript) -> None:
    assert log.session_id == DSH_LOG_SESSION_ID
    assert log.cwd == PROJECT_CWD
    assert log.harness == "dsh"
    assert log.account.total == len(records())
    assert dict(log.account.skip_rules) == {"compaction-phase": 1, "session-end": 1}
    assert log.account.unknown == log.account.malformed == 0


def test_36_turns_at_the_logs_own_seqs(log: Transcript) -> None:
    spans = assert_well_formed(log)
    assert len(spans) == DSH_LOG_TURNS
    assert all(span.complete for span in spans)
    assert [span.of(UserMessage)[0].text for span in spans] == [t.prompt for t in DSH_TURNS]
    recs = records()
    assert [e.seq for e in log.events if isinstance(e, TurnStart)] == [
        r["seq"] for r in recs if r["type"] == "turn/start"
    ]
    assert [e.seq for e in log.events if isinstance(e, TurnEnd)] == [
        r["seq"] for r in recs if r["type"] == "turn/end"
    ]


def test_blocks_tools_and_results(log: Transcript) -> None:
    assert [e.text for e in of_type(log, AssistantMessage)] == [
        s.text for t in DSH_TURNS for s in t.steps if s.kind == "say"
    ]
    assert [e.text for e in of_type(log, Reasoning)] == [
        s.text for t in DSH_TURNS for s in t.steps if s.kind == "think"
    ]
    calls = {c.call_id: c for c in of_type(log, ToolCall)}
    results = of_type(log, ToolResult)
    assert (
        len(calls)
        == len(results)
        == sum(1 for t in DSH_TURNS for s in t.steps if s.kind not in ("think", "say"))
    )
    assert all(calls[r.call_id].seq == r.seq - 1 for r in results)
    assert json.loads(calls[results[0].call_id].arguments) == {"path": "src/acme/orders/models.py"}
    texts = "\n".join(r.text for r in results)
    assert all(secret in texts for secret in FAKE_CREDENTIALS)


def test_injections_commands_and_compaction(log: Transcript) -> None:
    injections = of_type(log, HostInjection)
    assert [(i.kind, i.text) for i in injections[:3]] == [
        (InjectionKind.INSTRUCTIONS, AGENTS_MD),
        (InjectionKind.SKILL_CATALOG, SKILLS),
        (InjectionKind.PLUGIN_NOTICE, NOTICE),
    ]
    assert injections[3].kind is InjectionKind.INSTRUCTIONS
    assert injections[3].text.startswith("instructions from: tests/AGENTS.md")
    runs = of_type(log, CommandRun)
    assert [r.command for r in runs] == ["/chapters-rule list"] * 2
    assert all(r.output.startswith("id  status") for r in runs)
    (marker,) = of_type(log, CompactionMarker)
    assert marker.text.startswith("Orders status migration done")
    for span in turn_spans(log):
        assert not span.of(CommandRun) and not span.of(HostInjection)


def test_the_aborted_turn_ends_at_its_turn_end(log: Transcript) -> None:
    span = next(s for s in turn_spans(log) if s.of(UserMessage)[0].text == "Loop it again.")
    assert span.complete
    assert span.of(ToolResult)[0].is_error


def write_log(tmp_path: Path, records: list[dict[str, Any]]) -> str:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def rec(kind: str, seq: int, **data: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": f"2026-11-21T09:00:{seq:02d}Z", "data": data}


def test_a_seq_that_does_not_increase_is_malformed_and_a_record_without_seq_unknown(
    tmp_path: Path,
) -> None:
    path = write_log(
        tmp_path,
        [
            rec("turn/start", 1),
            rec("user/message", 2, text="hi"),
            rec("assistant/message", 2, text="dup"),
            {"type": "user/message", "data": {"text": "no seq"}},
            rec("assistant/message", 3, text="hello"),
            rec("turn/end", 4),
            rec("agent/pre-step", 5),
        ],
    )
    t = READER.read(path)
    assert t.account.malformed_lines == (3,)
    assert dict(t.account.unknown_types) == {"agent/pre-step": 1, "user/message": 1}
    assert [e.text for e in of_type(t, AssistantMessage)] == ["hello"]


def test_without_turn_end_the_last_turn_is_open_and_a_new_start_closes_the_previous(
    tmp_path: Path,
) -> None:
    t = READER.read(
        write_log(
            tmp_path,
            [
                rec("turn/start", 1),
                rec("user/message", 2, text="a"),
                rec("assistant/message", 3, text="b"),
                rec("command/run", 4, runId="r", command="/x"),
                rec("turn/start", 5),
                rec("user/message", 6, text="c"),
            ],
        )
    )
    spans = turn_spans(t)
    assert [s.complete for s in spans] == [True, False]
    assert spans[0].events[-1] == TurnEnd(3, "2026-11-21T09:00:03Z")


def test_a_done_without_its_run_is_kept(tmp_path: Path) -> None:
    t = READER.read(
        write_log(tmp_path, [rec("command/done", 1, runId="zz", output="orphan output")])
    )
    assert of_type(t, CommandRun) == [CommandRun(1, "", "orphan output", "2026-11-21T09:00:01Z")]


def test_discover_filters_logs_by_their_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    other = home / ".dsh" / "sessions" / "other.jsonl"
    other.write_text(json.dumps(rec("session/start", 1, sessionId="o", cwd="/elsewhere")) + "\n")
    (home / ".dsh" / "sessions" / "notes.jsonl").write_text('{"not": "dsh"}\n')
    assert READER.discover(None, PROJECT_CWD) == [str(home / ".dsh" / "sessions" / DSH_LOG.name)]
    assert READER.discover(None, "/elsewhere") == [str(other)]
    assert READER.discover(str(home / ".dsh" / "sessions"), "/x") == sorted(
        [str(home / ".dsh" / "sessions" / DSH_LOG.name), str(other)]
    )
    assert READER.discover(str(DSH_SESSIONS), "/x") == [str(DSH_LOG)]
