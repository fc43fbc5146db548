"""Turns and the completeness guard (§4.3)."""

from __future__ import annotations

from dsh_chapters_core.events import CommandRun, TurnEnd, TurnStart, UserMessage
from dsh_chapters_core.turns import split_turns
from hypothesis import given
from hypothesis import strategies as st

from tests.core.conversation import Conversation


def test_complete_turns_and_the_in_flight_tail() -> None:
    c = Conversation().turn("one", "a1").turn("two", "a2").start().user("three, unfinished")
    split = split_turns(c.events)
    assert [t.index for t in split.complete] == [0, 1]
    assert split.complete[0].seqs == (1, 2, 3, 4)
    assert split.complete[1].start_seq == 5
    assert split.complete[1].end_seq == 8
    assert split.complete[1].time == c.events[7].time
    assert [type(e) for e in split.incomplete] == [TurnStart, UserMessage]
    assert split.clamped


def test_command_runs_never_enter_a_turn() -> None:
    c = Conversation().start().user("q").command("/chapters-rule list", "table")
    c.assistant("a").end()
    split = split_turns(c.events)
    assert not split.clamped
    (turn,) = split.complete
    assert not any(isinstance(e, CommandRun) for e in turn.events)
    assert split_turns(Conversation().command("/x").events).incomplete == ()


def test_an_interrupted_turn_joins_the_next() -> None:
    c = Conversation().start().user("interrupted").start().user("again").assistant("ok").end()
    (turn,) = split_turns(c.events).complete
    assert turn.seqs == (1, 2, 3, 4, 5, 6)


def test_turn_time_falls_back_to_the_latest_event_time() -> None:
    events = [UserMessage(seq=1, text="q", time="2026-01-01T00:00:00Z"), TurnEnd(seq=2)]
    assert split_turns(events).complete[0].time == "2026-01-01T00:00:00Z"


@given(st.lists(st.sampled_from(["start", "end", "user", "command"]), max_size=40))
def test_every_conversation_event_is_in_exactly_one_place(steps: list[str]) -> None:
    c = Conversation()
    for step in steps:
        if step == "command":
            c.command("/cmd")
        else:
            getattr(c, step)(*(["x"] if step == "user" else []))
    split = split_turns(c.events)
    placed = [e for t in split.complete for e in t.events] + list(split.incomplete)
    assert placed == [e for e in c.events if not isinstance(e, CommandRun)]
    assert all(isinstance(t.events[-1], TurnEnd) for t in split.complete)
    assert not any(isinstance(e, TurnEnd) for e in split.incomplete)
