"""Turns ("collections", §4.1): the unit every signature and every chapter is made of.

A turn runs from the event after the previous `TurnEnd` (normally a `TurnStart`) to its own
`TurnEnd`. Only turns with a `TurnEnd` are complete (§4.3, the completeness guard): the
in-flight turn stays in the live context and composes at the next archive. A turn that never
ended before the next one started (an interrupted turn) joins the turn that follows, so no
conversation is lost. Command runs (§7.2) never enter a turn.

A session that is over has no next archive, so its unfinished tail is archived as a last turn
marked `ended: incomplete-turn` (`final_turn`); a live one keeps the clamp.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    Event,
    Reasoning,
    ToolCall,
    ToolResult,
    TurnEnd,
    UserMessage,
)

INCOMPLETE_TURN = "incomplete-turn"  # the `ended:` of a chapter whose last turn never ended
_CONVERSATION = (UserMessage, AssistantMessage, Reasoning, ToolCall, ToolResult)


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn's events, up to and including its `TurnEnd`, or the unfinished tail of a session
    that is over (then `ended` says so)."""

    index: int  # position among the complete turns of the split, from 0
    events: tuple[Event, ...]  # never empty: the last one is the TurnEnd (unless `ended`)
    ended: str = ""  # "" for a turn the harness ended; INCOMPLETE_TURN for a finalized tail

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(event.seq for event in self.events)

    @property
    def start_seq(self) -> int:
        return min(event.seq for event in self.events)

    @property
    def end_seq(self) -> int:
        return max(event.seq for event in self.events)

    @property
    def time(self) -> str:
        """When the turn ended: the TurnEnd's time, else the latest time any event carries."""
        for event in reversed(self.events):
            if event.time:
                return event.time
        return ""


@dataclass(frozen=True, slots=True)
class TurnSplit:
    """A span's events split into complete turns and the in-flight tail after the last `TurnEnd`."""

    complete: tuple[Turn, ...]
    incomplete: tuple[Event, ...]  # after the last TurnEnd: the in-flight turn, never composed

    @property
    def clamped(self) -> bool:
        """§4.3: the span ended mid-turn, so composition stopped at the last complete turn."""
        return bool(self.incomplete)

    def final_turn(self) -> Turn | None:
        """The unfinished tail as a last turn of a session that is over; None when the tail
        holds no conversation (host context written after the last turn is not a turn)."""
        if not has_conversation(self.incomplete):
            return None
        return Turn(index=len(self.complete), events=self.incomplete, ended=INCOMPLETE_TURN)


def has_conversation(events: Sequence[Event]) -> bool:
    return any(isinstance(event, _CONVERSATION) for event in events)


def split_turns(events: Sequence[Event]) -> TurnSplit:
    """Group events into complete turns plus the unfinished tail (§4.3)."""
    complete: list[Turn] = []
    pending: list[Event] = []
    for event in events:
        if isinstance(event, CommandRun):
            continue  # §7.2: command output is never conversation
        pending.append(event)
        if isinstance(event, TurnEnd):
            complete.append(Turn(index=len(complete), events=tuple(pending)))
            pending = []
    return TurnSplit(complete=tuple(complete), incomplete=tuple(pending))
