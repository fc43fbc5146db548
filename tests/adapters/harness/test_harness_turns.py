"""Where turn boundaries go: the assembler every binding emits TurnStart/TurnEnd through."""

from __future__ import annotations

import pytest
from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    Event,
    HostInjection,
    InjectionKind,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_chapters_harness.turns import TurnAssembler


def shape(events: tuple[Event, ...]) -> list[tuple[str, int]]:
    return [(type(e).__name__, e.seq) for e in events]


def test_a_prompt_closes_the_open_turn_after_its_last_conversation_line() -> None:
    turns = TurnAssembler()
    turns.prompt(UserMessage(1, "fix the bug"))
    turns.conversation(AssistantMessage(2, "done"))
    turns.ambient(CommandRun(3, "/model opus", "ok"))
    turns.ambient(HostInjection(4, InjectionKind.RUNTIME_CONTEXT, "reminder"))
    turns.prompt(UserMessage(5, "thanks"))
    assert shape(turns.finish()) == [
        ("TurnStart", 1),
        ("UserMessage", 1),
        ("AssistantMessage", 2),
        ("TurnEnd", 2),
        ("CommandRun", 3),
        ("HostInjection", 4),
        ("TurnStart", 5),
        ("UserMessage", 5),
    ]


def test_closing_late_and_closing_early_end_the_turn_at_the_same_seq() -> None:
    # Read 1: the file ends after the reply and the harness says the turn ended.
    early = TurnAssembler()
    early.prompt(UserMessage(1, "q"))
    early.conversation(AssistantMessage(2, "a"))
    early.end_after_conversation()
    # Read 2: the file grew; a command and an injection came before the next prompt.
    late = TurnAssembler()
    late.prompt(UserMessage(1, "q"))
    late.conversation(AssistantMessage(2, "a"))
    late.ambient(CommandRun(3, "/cost"))
    late.ambient(HostInjection(4, InjectionKind.INSTRUCTIONS, "CLAUDE.md"))
    late.prompt(UserMessage(5, "next"))
    first_end = next(e for e in early.finish() if isinstance(e, TurnEnd))
    second_end = next(e for e in late.finish() if isinstance(e, TurnEnd))
    assert first_end == second_end == TurnEnd(2)


def test_the_end_goes_after_every_event_of_the_last_conversation_line() -> None:
    turns = TurnAssembler()
    turns.prompt(UserMessage(1, "q"))
    turns.conversation(ToolCall(2, "c1", "Read", "{}"))
    turns.conversation(ToolResult(3, "c1", "text"))
    turns.ambient(HostInjection(3, InjectionKind.RUNTIME_CONTEXT, "reminder next to the result"))
    turns.end_after_conversation()
    assert shape(turns.finish())[-2:] == [("HostInjection", 3), ("TurnEnd", 3)]


def test_an_explicit_end_record_closes_the_turn_where_it_stands() -> None:
    turns = TurnAssembler()
    turns.start(10)
    turns.conversation(UserMessage(11, "q"))
    turns.conversation(AssistantMessage(12, "a"))
    turns.ambient(CommandRun(13, "/x"))
    turns.end_here(14)
    turns.end_here(15)  # no turn open: nothing happens
    assert shape(turns.finish()) == [
        ("TurnStart", 10),
        ("UserMessage", 11),
        ("AssistantMessage", 12),
        ("CommandRun", 13),
        ("TurnEnd", 14),
    ]


def test_conversation_outside_a_turn_opens_one_and_an_unfinished_turn_has_no_end() -> None:
    turns = TurnAssembler()
    turns.ambient(CommandRun(1, "/review"))
    turns.conversation(AssistantMessage(2, "reviewing"))
    assert turns.turn_open
    assert shape(turns.finish()) == [("CommandRun", 1), ("TurnStart", 2), ("AssistantMessage", 2)]


def test_a_start_with_nothing_in_it_ends_at_its_own_seq() -> None:
    turns = TurnAssembler()
    turns.start(4)
    turns.start(9)
    assert shape(turns.finish()) == [("TurnStart", 4), ("TurnEnd", 4), ("TurnStart", 9)]


def test_amend_replaces_a_collected_event_and_refuses_a_stranger() -> None:
    turns = TurnAssembler()
    run = CommandRun(1, "/model")
    turns.ambient(run)
    turns.prompt(UserMessage(2, "q"))
    turns.amend(run, CommandRun(1, "/model", "Set model to opus"))
    assert turns.finish()[0] == CommandRun(1, "/model", "Set model to opus")
    with pytest.raises(ValueError):
        turns.amend(CommandRun(9, "/other"), CommandRun(9, "/other", "x"))


def test_turns_never_nest_and_seq_never_decreases() -> None:
    turns = TurnAssembler()
    for seq in range(1, 40, 4):
        turns.prompt(UserMessage(seq, f"prompt {seq}"))
        turns.conversation(AssistantMessage(seq + 1, "reply"))
        turns.ambient(CommandRun(seq + 2, "/cost"))
        if seq % 3 == 0:
            turns.end_after_conversation()
    events = turns.finish()
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    depth = 0
    for event in events:
        if isinstance(event, TurnStart):
            assert depth == 0
            depth = 1
        elif isinstance(event, TurnEnd):
            assert depth == 1
            depth = 0
