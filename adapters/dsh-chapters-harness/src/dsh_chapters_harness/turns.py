"""Turn boundaries: every binding emits `TurnStart`/`TurnEnd` through this one assembler.

The core splits turns only on those two events (§4.1: a collection is one completed turn). A
turn is a real user prompt plus everything up to the next real prompt; the last turn is complete
only if the harness shows that it ended. Each binding classifies its records and says when the
harness signalled an end; the assembler owns where the boundary events go:

- `prompt` closes any open turn and opens a new one at the prompt's line;
- `conversation` (assistant text, reasoning, tool calls and results, a mid-turn user message)
  joins the open turn, or opens an implicit turn when none is open (a turn started by a slash
  command, a hook that made the agent go on);
- `ambient` (host injections, commands, compaction markers) keeps its place in the stream but
  never extends a turn;
- `end_here` closes the turn at an explicit end record (DSH `turn/end`, Codex `task_complete`);
- `end_after_conversation` closes it right after its last conversation line.

Why the last one: a turn that is closed late (by the next prompt) must end at the same `seq` as
when it was closed early (a final assistant message at the end of a live file). Commands and
injections written between the two reads then fall between turns instead of moving the end, so
re-archiving a grown transcript sees the same completed turns.
"""

from __future__ import annotations

from dsh_chapters_core.events import (
    AssistantMessage,
    Event,
    Reasoning,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

ConversationEvent = UserMessage | AssistantMessage | Reasoning | ToolCall | ToolResult
_CONVERSATION = (UserMessage, AssistantMessage, Reasoning, ToolCall, ToolResult)


class TurnAssembler:
    """Collects one transcript's events in order and places the turn boundaries."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._open = False
        self._last_conversation: Event | None = None  # last conversation event of the open turn
        self._opened_at: TurnStart | None = None

    @property
    def turn_open(self) -> bool:
        return self._open

    @property
    def last_conversation(self) -> Event | None:
        """The open turn's last conversation event (None when no turn is open)."""
        return self._last_conversation if self._open else None

    def prompt(self, message: UserMessage) -> None:
        """A real user prompt: the previous turn ends, a new one starts at this line."""
        self.end_after_conversation()
        self._start(message.seq, message.time)
        self._add_conversation(message)

    def start(self, seq: int, time: str = "") -> None:
        """An explicit turn start record (DSH `turn/start`)."""
        self.end_after_conversation()
        self._start(seq, time)

    def conversation(self, event: ConversationEvent) -> None:
        if not self._open:
            self._start(event.seq, event.time)
        self._add_conversation(event)

    def ambient(self, event: Event) -> None:
        self._events.append(event)

    def amend(self, old: Event, new: Event) -> None:
        """Replace an already collected event (a command's output arriving on a later line)."""
        for index in range(len(self._events) - 1, -1, -1):
            if self._events[index] is old:
                self._events[index] = new
                if self._last_conversation is old:
                    self._last_conversation = new
                return
        raise ValueError("amend: the event is not in this transcript")

    def retract(self, event: Event) -> None:
        """Take back an event collected earlier (a queued message that turned out to be sent
        as the next prompt): the turn boundaries already placed stay where they are."""
        for index in range(len(self._events) - 1, -1, -1):
            if self._events[index] is event:
                del self._events[index]
                break
        else:
            raise ValueError("retract: the event is not in this transcript")
        if self._last_conversation is event:
            self._last_conversation = None
            for earlier in reversed(self._events):
                if earlier is self._opened_at:
                    break
                if isinstance(earlier, _CONVERSATION):
                    self._last_conversation = earlier
                    break

    def end_here(self, seq: int, time: str = "", reason: str = "") -> None:
        """The harness recorded the end of the turn on this line (and why, if not completed)."""
        if self._open:
            self._events.append(TurnEnd(seq=seq, time=time, reason=reason))
            self._close()

    def end_after_conversation(self) -> None:
        """Close the open turn just after the events of its last conversation line."""
        if not self._open:
            return
        anchor = self._last_conversation or self._opened_at
        assert anchor is not None  # an open turn always has its TurnStart
        index = len(self._events)
        while index > 0 and self._events[index - 1].seq > anchor.seq:
            index -= 1
        self._events.insert(index, TurnEnd(seq=anchor.seq, time=anchor.time))
        self._close()

    def finish(self) -> tuple[Event, ...]:
        """The events in order; a turn still open here is incomplete and has no `TurnEnd`."""
        return tuple(self._events)

    def _start(self, seq: int, time: str) -> None:
        start = TurnStart(seq=seq, time=time)
        self._events.append(start)
        self._open = True
        self._opened_at = start
        self._last_conversation = None

    def _add_conversation(self, event: Event) -> None:
        self._events.append(event)
        self._last_conversation = event

    def _close(self) -> None:
        self._open = False
        self._last_conversation = None
        self._opened_at = None
