"""The DSH event-log binding: JSONL of `{type, seq, time, data}` (docs/formats.md, "DSH").

DSH records its own turn boundaries (`turn/start`, `turn/end`) and its own `seq`, so this is
the most direct of the bindings: events keep the record's `seq`, and a turn is complete only at
its `turn/end` (§4.3). `command/run` and `command/done` are host commands, never conversation
(§7.2); `agent-instructions` and `skill-catalog` sources are host injections (amendment
2026-09-21).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    UserMessage,
)

from dsh_chapters_harness.discovery import header_records, jsonl_files, same_directory
from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    MALFORMED,
    Outcome,
    head_records,
    read_records,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "dsh"
LABEL = "DSH event log"
EXPECTED = (
    'JSON lines {"type": "user/message"|"assistant/message"|"turn/start"|…, '
    '"seq": N, "time", "data"}'
)

# Sources a user/message can carry, and the record types that are injections in their own right.
_INJECTION_SOURCES = {
    "agent-instructions": InjectionKind.INSTRUCTIONS,
    "skill-catalog": InjectionKind.SKILL_CATALOG,
    "runtime-context": InjectionKind.RUNTIME_CONTEXT,
    "plugin-notice": InjectionKind.PLUGIN_NOTICE,
}
_INSTRUCTIONS_FROM = "instructions from:"  # the reminder form of an instruction file (amendment)
_SNIFF_LINES = 8


def _text_of(data: dict[str, Any]) -> str:
    """A message's text: `data.text`, or its text blocks joined by blank lines."""
    text = data.get("text")
    if isinstance(text, str):
        return text
    blocks = data.get("blocks")
    if isinstance(blocks, list):
        return "\n\n".join(
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _is_dsh_record(record: dict[str, Any]) -> bool:
    kind, seq = record.get("type"), record.get("seq")
    return (
        isinstance(kind, str)
        and ("/" in kind or kind in _INJECTION_SOURCES)
        and isinstance(seq, int)
        and not isinstance(seq, bool)
        and isinstance(record.get("data", {}), dict)
        and "payload" not in record
    )


class _DshRead:
    """The state of one read: header fields, the assembler, open commands."""

    def __init__(self) -> None:
        self.turns = TurnAssembler()
        self.session_id = ""
        self.root_session_id = ""
        self.cwd = ""
        self.started_at = ""
        self.last_seq: int | None = None
        self.runs: dict[str, CommandRun] = {}
        self.last_run: CommandRun | None = None

    def handle(self, line: int, record: dict[str, Any]) -> Outcome:
        kind = record.get("type")
        if not isinstance(kind, str):
            return unknown("<no type>")
        seq = record.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            return unknown(kind)
        if self.last_seq is not None and seq <= self.last_seq:
            return MALFORMED  # seq must increase: a chapter cites its span by seq
        data = record.get("data", {})
        if not isinstance(data, dict):
            return MALFORMED
        self.last_seq = seq
        time = record.get("time")
        time = time if isinstance(time, str) else ""
        if not self.started_at and time:
            self.started_at = time
        return self._dispatch(kind, seq, time, data)

    def _dispatch(self, kind: str, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        if kind in _INJECTION_SOURCES:
            self.turns.ambient(HostInjection(seq, _INJECTION_SOURCES[kind], _text_of(data), time))
            return IMPORTED
        handler = {
            "session/start": self._session_start,
            "user/message": self._user,
            "assistant/message": self._assistant,
            "tool/call": self._tool_call,
            "tool/result": self._tool_result,
            "command/run": self._command_run,
            "command/done": self._command_done,
        }.get(kind)
        if handler is not None:
            return handler(seq, time, data)
        if kind == "turn/start":
            self.turns.start(seq, time)
            return IMPORTED
        if kind == "turn/end":
            self.turns.end_here(seq, time)
            return IMPORTED
        if kind == "compaction/end":
            summary = data.get("summary")
            self.turns.ambient(
                CompactionMarker(seq, summary if isinstance(summary, str) else "", time)
            )
            return IMPORTED
        if kind.startswith("compaction/"):
            return skipped("compaction-phase")  # the marker is written once, at compaction/end
        if kind == "session/end":
            return skipped("session-end")
        return unknown(kind)

    def _session_start(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        if not self.session_id and isinstance(data.get("sessionId"), str):
            self.session_id = data["sessionId"]
        if not self.cwd and isinstance(data.get("cwd"), str):
            self.cwd = data["cwd"]
        if not self.root_session_id and isinstance(data.get("parentSessionId"), str):
            self.root_session_id = data["parentSessionId"]
        if isinstance(data.get("startedAt"), str):
            self.started_at = data["startedAt"]
        return IMPORTED

    def _user(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        text = _text_of(data)
        source = data.get("source", "user")
        if source in _INJECTION_SOURCES:
            self.turns.ambient(HostInjection(seq, _INJECTION_SOURCES[source], text, time))
        elif text.lstrip().lower().startswith(_INSTRUCTIONS_FROM):
            self.turns.ambient(HostInjection(seq, InjectionKind.INSTRUCTIONS, text, time))
        elif not text:
            return skipped("empty-message")
        else:
            self.turns.conversation(UserMessage(seq, text, time))
        return IMPORTED

    def _assistant(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        blocks = data.get("blocks")
        if not isinstance(blocks, list):
            text = data.get("text")
            blocks = [{"type": "text", "text": text}] if isinstance(text, str) else []
        emitted = False
        for block in blocks:
            if (
                not isinstance(block, dict)
                or not isinstance(block.get("text"), str)
                or not block["text"]
            ):
                continue
            if block.get("type") == "reasoning":
                self.turns.conversation(Reasoning(seq, block["text"], time))
                emitted = True
            elif block.get("type") == "text":
                self.turns.conversation(AssistantMessage(seq, block["text"], time))
                emitted = True
        return IMPORTED if emitted else skipped("empty-message")

    def _tool_call(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        arguments = data.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        self.turns.conversation(
            ToolCall(seq, str(data.get("callId", "")), str(data.get("name", "")), arguments, time)
        )
        return IMPORTED

    def _tool_result(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        text = data.get("text", data.get("output", ""))
        if not isinstance(text, str):
            text = json.dumps(text, ensure_ascii=False)
        self.turns.conversation(
            ToolResult(
                seq, str(data.get("callId", "")), text, bool(data.get("isError", False)), time
            )
        )
        return IMPORTED

    def _command_run(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        run = CommandRun(seq, str(data.get("command", "")), "", time)
        self.turns.ambient(run)
        self.runs[str(data.get("runId", ""))] = run
        self.last_run = run
        return IMPORTED

    def _command_done(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        output = data.get("output", "")
        if not isinstance(output, str):
            output = json.dumps(output, ensure_ascii=False)
        run_id = data.get("runId")
        run = self.runs.pop(str(run_id), None) if run_id is not None else self.last_run
        if run is not None and not run.output:
            self.turns.amend(run, CommandRun(run.seq, run.command, output, run.time))
            if self.last_run is run:
                self.last_run = None
        else:  # an output whose run is not in this file: keep it, never drop it
            self.turns.ambient(CommandRun(seq, "", output, time))
        return IMPORTED


class DshReader:
    """`dsh_chapters.harnesses` entry point `dsh`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        return any(_is_dsh_record(r) for r in head_records(head, limit=_SNIFF_LINES))

    def read(self, path: str) -> Transcript:
        state = _DshRead()
        ledger = read_records(path, state.handle, label=LABEL, expected=EXPECTED)
        return Transcript(
            session_id=state.session_id or Path(path).stem,
            harness=NAME,
            events=state.turns.finish(),  # no turn/end, no completed turn (§4.3)
            account=ledger.account(),
            root_session_id=state.root_session_id
            if state.root_session_id != state.session_id
            else "",
            cwd=state.cwd,
            source_path=str(path),
            started_at=state.started_at,
        )

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Logs under `source`, or the sessions of `cwd` under `~/.dsh/sessions`."""
        root = Path(source) if source else Path.home() / ".dsh" / "sessions"
        found = []
        for path in jsonl_files(root):
            records = [r for r in header_records(path) if _is_dsh_record(r)]
            if not records:
                continue
            if source is None:
                start = next((r for r in records if r.get("type") == "session/start"), None)
                data = start.get("data", {}) if start else {}
                if not isinstance(data, dict) or not same_directory(str(data.get("cwd", "")), cwd):
                    continue
            found.append(str(path))
        return found
