"""Shape checks the reader tests share: well-formed turns, turn spans, events by type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from dsh_chapters_core.events import Event, Transcript, TurnEnd, TurnStart

E = TypeVar("E")


@dataclass(frozen=True)
class TurnSpan:
    events: tuple[Event, ...]  # from TurnStart to TurnEnd (or the end of the file), inclusive
    complete: bool

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]


def of_type(transcript: Transcript, kind: type[E]) -> list[E]:
    return [e for e in transcript.events if isinstance(e, kind)]


def turn_spans(transcript: Transcript) -> list[TurnSpan]:
    spans: list[TurnSpan] = []
    current: list[Event] | None = None
    for event in transcript.events:
        if isinstance(event, TurnStart):
            assert current is None, f"TurnStart at seq {event.seq} inside an open turn"
            current = [event]
        elif isinstance(event, TurnEnd):
            assert current is not None, f"TurnEnd at seq {event.seq} outside a turn"
            current.append(event)
            spans.append(TurnSpan(tuple(current), True))
            current = None
        elif current is not None:
            current.append(event)
    if current is not None:
        spans.append(TurnSpan(tuple(current), False))
    return spans


def assert_well_formed(transcript: Transcript) -> list[TurnSpan]:
    """Turns alternate start/end, seq never decreases; returns the turn spans."""
    seqs = [e.seq for e in transcript.events]
    assert seqs == sorted(seqs), "seq decreases somewhere"
    return turn_spans(transcript)
