"""A tiny builder of core events for tests: seqs count up, times are fixed strings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    CompactionMarker,
    Event,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)


@dataclass
class Conversation:
    events: list[Event] = field(default_factory=list)
    seq: int = 0
    calls: int = 0

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def _time(self) -> str:
        return f"2026-09-17T10:{self.seq // 60:02d}:{self.seq % 60:02d}Z"

    def start(self) -> Conversation:
        self.events.append(TurnStart(seq=self._next(), time=self._time()))
        return self

    def end(self) -> Conversation:
        self.events.append(TurnEnd(seq=self._next(), time=self._time()))
        return self

    def user(self, text: str) -> Conversation:
        self.events.append(UserMessage(seq=self._next(), text=text, time=self._time()))
        return self

    def assistant(self, text: str) -> Conversation:
        self.events.append(AssistantMessage(seq=self._next(), text=text, time=self._time()))
        return self

    def reasoning(self, text: str) -> Conversation:
        self.events.append(Reasoning(seq=self._next(), text=text, time=self._time()))
        return self

    def call(self, name: str, arguments: object, result: str | None = None, *,
             is_error: bool = False, call_id: str = "") -> Conversation:
        self.calls += 1
        cid = call_id or f"call-{self.calls}"
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        self.events.append(ToolCall(seq=self._next(), call_id=cid, name=name, arguments=args,
                                    time=self._time()))
        if result is not None:
            self.result(cid, result, is_error=is_error)
        return self

    def result(self, call_id: str, text: str, *, is_error: bool = False) -> Conversation:
        self.events.append(ToolResult(seq=self._next(), call_id=call_id, text=text,
                                      is_error=is_error, time=self._time()))
        return self

    def inject(self, kind: InjectionKind, text: str) -> Conversation:
        self.events.append(HostInjection(seq=self._next(), kind=kind, text=text, time=self._time()))
        return self

    def command(self, command: str, output: str = "") -> Conversation:
        self.events.append(CommandRun(seq=self._next(), command=command, output=output,
                                      time=self._time()))
        return self

    def compaction(self, text: str = "") -> Conversation:
        self.events.append(CompactionMarker(seq=self._next(), text=text, time=self._time()))
        return self

    def turn(self, user: str, assistant: str, *calls: tuple[str, object, str]) -> Conversation:
        """One complete turn: the request, tool calls with results, the answer."""
        self.start().user(user)
        for name, arguments, result in calls:
            self.call(name, arguments, result)
        return self.assistant(assistant).end()
