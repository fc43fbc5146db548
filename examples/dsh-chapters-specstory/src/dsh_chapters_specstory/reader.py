"""The `specstory` harness reader: SpecStory markdown exports as core events.

Turns (§4.1, §4.3): a turn is a user prompt and everything up to the next prompt. SpecStory
writes no end-of-turn mark, and it rewrites a live session's file as the session goes on, so
the last turn of a file is never known to be over: it stays in flight (no `TurnEnd`) and
composes at the next import after its next prompt. A turn closed by the next prompt ends at
its last conversation line, so it is the same turn, event for event, however late it is read.

Sidechain (subagent) messages join the open turn as conversation; they never open a turn.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    Event,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    TurnEnd,
    TurnStart,
    UserMessage,
)

from dsh_chapters_specstory.markdown import HEADER, ROLE, Message, Parsed, parse

HARNESS = "specstory"
HISTORY = (".specstory", "history")
_SNIFF_LINES = 40  # head lines in which a SpecStory file shows its header or a first message
_SHOWN = 5  # malformed line numbers an error quotes


class SpecStoryReader:
    """What the `specstory` entry point hands the composition root."""

    name = HARNESS

    def sniff(self, head: bytes) -> bool:
        text = head.decode("utf-8", "replace")
        for line in text.split("\n")[:_SNIFF_LINES]:
            if HEADER.match(line) or ROLE.match(line):
                return True
        return False

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """`<cwd>/.specstory/history/*.md`, or every SpecStory file under `source`."""
        if source is None:
            history = Path(cwd).joinpath(*HISTORY)
            return sorted(str(p) for p in history.glob("*.md") if p.is_file())
        found: list[str] = []
        for path in sorted(Path(source).rglob("*.md")):
            try:
                with path.open("rb") as handle:
                    head = handle.read(4096)
            except OSError:
                continue
            if self.sniff(head):
                found.append(str(path))
        return found

    def read(self, path: str) -> Transcript:
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            raise InputError(
                f"{path}: cannot read the SpecStory file ({exc.strerror or type(exc).__name__})",
                hint="check the path; SpecStory writes `.specstory/history/*.md` in the project",
            ) from None
        text, replaced = _decode(raw)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        parsed = parse(lines, replaced)
        if not parsed.recognized:
            account = parsed.account
            raise InputError(
                f"{path}: not a SpecStory markdown export (0 of {len(lines)} lines are a "
                f"SpecStory header or message header; {len(raw)} bytes, {account.malformed} "
                f"malformed, {account.unknown} unknown)",
                hint="pass a `.specstory/history/*.md` file, or name another format with "
                "--harness",
            )
        session_id = parsed.session_id or Path(path).stem
        return Transcript(
            session_id=session_id,
            harness=HARNESS,
            events=_events(parsed),
            account=parsed.account,
            cwd=_project_of(path),
            source_path=os.path.abspath(path),
            started_at=parsed.started_at or _first_time(parsed.messages),
        )


def _decode(raw: bytes) -> tuple[str, int]:
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        pass
    text = raw.decode("utf-8", "surrogateescape")
    replaced = sum(1 for ch in text if "\udc80" <= ch <= "\udcff")
    return "".join("\ufffd" if "\udc80" <= ch <= "\udcff" else ch for ch in text), replaced


def _project_of(path: str) -> str:
    """The project a history file belongs to: the directory holding `.specstory/`."""
    parts = Path(os.path.abspath(path)).parts
    for index in range(len(parts) - 2, 0, -1):
        if parts[index : index + 2] == HISTORY:
            return str(Path(*parts[:index]))
    return ""


def _first_time(messages: list[Message]) -> str:
    return next((m.time for m in messages if m.time), "")


def _events(parsed: Parsed) -> tuple[Event, ...]:
    events: list[Event] = []
    last_conversation: Event | None = None
    turn_open = False
    for message in parsed.messages:
        prompt = message.role == "user" and not message.sidechain
        if prompt and turn_open and last_conversation is not None:
            events.append(TurnEnd(seq=last_conversation.seq, time=last_conversation.time))
            turn_open = False
        if not turn_open:
            events.append(TurnStart(seq=message.line, time=message.time))
            turn_open = True
        for event in _message_events(message):
            events.append(event)
            last_conversation = event
    return tuple(events)


def _message_events(message: Message) -> list[Event]:
    out: list[Event] = []
    for index, part in enumerate(message.parts):
        seq = message.line if index == 0 and part.kind == "text" else part.line
        if part.kind == "text":
            body = "\n".join(part.lines)
            if message.role == "user":
                out.append(UserMessage(seq=seq, text=body, time=message.time))
            else:
                out.append(AssistantMessage(seq=seq, text=body, time=message.time))
        elif part.kind == "think":
            out.append(Reasoning(seq=part.line, text="\n".join(part.lines), time=message.time))
        else:
            call_id = f"specstory-{part.line}"
            arguments = json.dumps(
                {"type": part.tool_type, "summary": part.summary,
                 "input": "\n".join(part.call).strip("\n")},
                ensure_ascii=False,
            )
            out.append(ToolCall(seq=part.line, call_id=call_id, name=part.tool_name,
                                arguments=arguments, time=message.time))
            if part.output:
                out.append(ToolResult(seq=part.output_line, call_id=call_id,
                                      text="\n".join(part.output), is_error=part.is_error,
                                      time=message.time))
    if not out and message.role == "user":
        out.append(UserMessage(seq=message.line, text="", time=message.time))
    return out
