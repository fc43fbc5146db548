"""The GitHub Copilot CLI binding: `~/.copilot/session-state/<sessionId>/events.jsonl`
(docs/formats.md).

Copilot CLI appends one session event a line, `{type, data, id, timestamp, parentId}`, as its
`session-events.schema.json` defines them (read from `@github/copilot` 1.0.63, the last npm
release that ships its bundled code and schema). Events the schema marks `ephemeral` are never
written to disk.

A user's turn is one `user.message` and the agent loop it starts. The loop runs as numbered
model calls (`assistant.turn_start` … `assistant.turn_end`), each with one or more
`assistant.message`s whose `toolRequests` are answered by `tool.execution_complete`. The loop
is over, and the turn complete, at the `assistant.turn_end` of a call that requested no tool,
with no call of the main agent still waiting for its result; or at an `abort` (the user pressed
Esc or Ctrl+C); or when the session shut down mid-turn. A message the user types while the loop
runs (`delivery: "steering"`) is archived inside that turn. Copilot injects context as user
messages that carry a `source` (a skill's body, AGENTS.md found on the way, reminders): those
are host context, never prompts. The system prompt (`system.message`) is host context too.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_chapters_core.events import (
    AssistantMessage,
    CompactionMarker,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    UserMessage,
)

from dsh_chapters_harness.discovery import (
    header_records,
    jsonl_files,
    read_head,
    same_directory,
)
from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    Outcome,
    head_records,
    read_records,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "copilot-cli"
LABEL = "Copilot CLI session"
EXPECTED = (
    'JSON lines {"type": "session.start"|"user.message"|"assistant.message"|…, "data": {…}, '
    '"id", "timestamp", "parentId"}'
)
EVENTS_FILE = "events.jsonl"
SESSION_STATE = "session-state"

# Persisted event types that are read, understood and left out, by the rule the report names.
SKIP_RULES: dict[str, str] = {
    "session.info": "session-notice",
    "session.warning": "session-notice",
    "session.error": "session-notice",
    "session.resume": "session-resume",
    "session.model_change": "session-settings",
    "session.mode_changed": "session-settings",
    "session.permissions_changed": "session-settings",
    "session.context_changed": "session-settings",
    "session.remote_steerable_changed": "session-settings",
    "session.autopilot_objective_changed": "session-settings",
    "session.plan_changed": "session-settings",
    "session.workspace_file_changed": "session-settings",
    "session.schedule_created": "session-settings",
    "session.schedule_cancelled": "session-settings",
    "session.usage_checkpoint": "usage",
    "session.truncation": "context-truncation",
    "session.compaction_start": "compaction-phase",
    # The task_complete tool's summary, which its tool call already carries.
    "session.task_complete": "task-complete",
    "assistant.turn_start": "loop-boundary",
    "skill.invoked": "skill-invoked",  # its body reaches the model as the next user.message
    "subagent.started": "subagent-status",
    "subagent.completed": "subagent-status",
    "subagent.failed": "subagent-status",
    "subagent.selected": "subagent-status",
    "subagent.deselected": "subagent-status",
    "hook.start": "hook-audit",
    "hook.end": "hook-audit",
    "permission.requested": "permission",
    "permission.completed": "permission",
    "external_tool.requested": "external-tool",  # an SDK client runs it; execution events follow
}
# Types the schema marks `ephemeral` (never persisted): a file that holds one was written by
# another tool, and what they carry (deltas, progress, UI state) is in the persisted events.
EPHEMERAL = frozenset({
    "session.idle", "session.title_changed", "session.todos_changed", "session.snapshot_rewind",
    "session.usage_info", "pending_messages.modified", "assistant.intent",
    "assistant.reasoning_delta", "assistant.streaming_delta", "assistant.message_start",
    "assistant.message_delta", "assistant.usage", "model.call_failure",
    "tool.execution_partial_result", "tool.execution_progress", "hook.progress",
    "user_input.requested", "user_input.completed", "elicitation.requested",
    "elicitation.completed", "sampling.requested", "sampling.completed", "mcp.oauth_required",
    "mcp.oauth_completed", "session.custom_notification", "external_tool.completed",
    "command.queued", "command.execute", "command.completed", "auto_mode_switch.requested",
    "auto_mode_switch.completed", "commands.changed", "capabilities.changed",
    "exit_plan_mode.requested", "exit_plan_mode.completed", "session.tools_updated",
    "session.background_tasks_changed", "session.skills_loaded", "session.custom_agents_updated",
    "session.mcp_servers_loaded", "session.mcp_server_status_changed",
    "session.extensions_loaded", "session.canvas.opened", "session.canvas.registry_changed",
    "session.canvas.closed", "session.extensions.attachments_pushed",
    "mcp_app.tool_call_complete",
})
_HANDLED = frozenset({
    "session.start", "session.shutdown", "session.compaction_complete", "session.handoff",
    "user.message", "assistant.message", "assistant.reasoning", "assistant.turn_end", "abort",
    "tool.user_requested", "tool.execution_start", "tool.execution_complete",
    "system.message", "system.notification",
})
KNOWN_TYPES = frozenset(SKIP_RULES) | EPHEMERAL | _HANDLED
# `delivery` of a message typed while the agent is idle: it always opens a turn.
_IDLE_DELIVERY = "idle"
# Wrappers Copilot puts around the user's words in `transformedContent` (used only when
# `content` is empty, which some sessions write).
_WRAPPERS = re.compile(
    r"<(current_datetime|system_reminder|reminder)>[\s\S]*?</\1>", re.MULTILINE
)
_SNIFF_LINES = 8
_SNIFF_BYTES = 1 << 16  # a session.start line is a few hundred bytes


def _injection_kind(source: str) -> InjectionKind:
    if source.startswith("skill"):
        return InjectionKind.SKILL_CATALOG
    if source.startswith("instruction"):
        return InjectionKind.INSTRUCTIONS
    return InjectionKind.RUNTIME_CONTEXT


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def _result_text(data: dict[str, Any]) -> str:
    """What the model was given: `result.content`; else the display text or the content
    blocks' text; a failed call's error message when there is no result."""
    result = data.get("result")
    if isinstance(result, dict):
        for key in ("content", "detailedContent"):
            if isinstance(result.get(key), str) and result[key]:
                return str(result[key])
        blocks = result.get("contents")
        if isinstance(blocks, list):
            texts = [b["text"] for b in blocks if isinstance(b, dict)
                     and isinstance(b.get("text"), str)]
            if texts:
                return "\n\n".join(texts)
    error = data.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return ""


class _CopilotRead:
    """The state of one read: header fields, the agent loop, pending calls, the assembler."""

    def __init__(self) -> None:
        self.turns = TurnAssembler()
        self.pending: set[str] = set()  # main-agent tool calls waiting for their result
        self.requested: set[str] = set()  # call ids already imported from a tool request
        self.loop_tools = False  # the current model call requested a tool
        self.last_reasoning = ""
        self.session_id = ""
        self.root_session_id = ""
        self.cwd = ""
        self.started_at = ""

    def handle(self, seq: int, record: dict[str, Any]) -> Outcome:
        kind = record.get("type")
        data = record.get("data")
        if not isinstance(kind, str) or not isinstance(data, dict):
            return unknown(kind if isinstance(kind, str) else "<no type>")
        time = _text(record.get("timestamp"))
        if time and not self.started_at:
            self.started_at = time
        if kind in SKIP_RULES:
            if kind == "assistant.turn_start" and not _subagent(record, data):
                self.loop_tools = False
            return skipped(SKIP_RULES[kind])
        if kind in EPHEMERAL:
            return skipped("ephemeral-event")
        if kind not in _HANDLED:
            return unknown(kind)
        outcome: Outcome = getattr(self, "_" + kind.replace(".", "_"))(seq, time, record, data)
        return outcome

    # --- the session ---------------------------------------------------------------------
    def _session_start(self, seq: int, time: str, record: dict[str, Any],
                       data: dict[str, Any]) -> Outcome:
        if not self.session_id and isinstance(data.get("sessionId"), str):
            self.session_id = data["sessionId"]
        context = data.get("context")
        if not self.cwd and isinstance(context, dict):
            self.cwd = _text(context.get("cwd")) or _text(context.get("gitRoot"))
        if isinstance(data.get("startTime"), str):
            self.started_at = data["startTime"]
        parent = data.get("detachedFromSpawningParentSessionId")
        if isinstance(parent, str) and parent:
            self.root_session_id = parent
        return IMPORTED

    def _session_shutdown(self, seq: int, time: str, record: dict[str, Any],
                          data: dict[str, Any]) -> Outcome:
        if not self.turns.turn_open:
            return skipped("usage")  # the session's totals
        self.pending.clear()
        self.turns.end_here(seq, time, reason="interrupted")  # quit while the agent worked
        return IMPORTED

    def _session_compaction_complete(self, seq: int, time: str, record: dict[str, Any],
                                     data: dict[str, Any]) -> Outcome:
        if data.get("success") is False:
            return skipped("compaction-failed")
        self.turns.ambient(CompactionMarker(seq, _text(data.get("summaryContent")), time))
        return IMPORTED

    def _session_handoff(self, seq: int, time: str, record: dict[str, Any],
                         data: dict[str, Any]) -> Outcome:
        """A session handed over from elsewhere (a remote agent): its summary opens this one."""
        parts = [_text(data.get(key)) for key in ("summary", "context")]
        self.turns.ambient(CompactionMarker(seq, "\n\n".join(p for p in parts if p), time))
        return IMPORTED

    # --- messages ------------------------------------------------------------------------
    def _user_message(self, seq: int, time: str, record: dict[str, Any],
                      data: dict[str, Any]) -> Outcome:
        content = _text(data.get("content"))
        source = _text(data.get("source"))
        if source or data.get("isAutopilotContinuation") is True:
            text = content or _text(data.get("transformedContent"))
            if not text.strip():
                return skipped("empty-message")
            self.turns.ambient(HostInjection(seq, _injection_kind(source), text, time))
            return IMPORTED
        if not content:  # some sessions write only the transformed text
            content = _WRAPPERS.sub("", _text(data.get("transformedContent"))).strip()
        if not content.strip():
            return skipped("empty-message")
        message = UserMessage(seq, content, time)
        steering = data.get("delivery") not in (None, _IDLE_DELIVERY)
        if steering and self.turns.turn_open:
            self.turns.conversation(message)  # typed while the agent worked: kept where typed
        else:
            self.pending.clear()  # a new prompt: the last turn's unanswered calls never will be
            self.loop_tools = False
            self.turns.prompt(message)
        return IMPORTED

    def _assistant_message(self, seq: int, time: str, record: dict[str, Any],
                           data: dict[str, Any]) -> Outcome:
        main = not _subagent(record, data)
        emitted = False
        reasoning = _text(data.get("reasoningText"))
        if reasoning.strip() and reasoning != self.last_reasoning:
            self.turns.conversation(Reasoning(seq, reasoning, time))
            emitted = True
        self.last_reasoning = ""
        content = _text(data.get("content"))
        if content.strip():
            self.turns.conversation(AssistantMessage(seq, content, time))
            emitted = True
        requests = data.get("toolRequests")
        for request in requests if isinstance(requests, list) else []:
            if not isinstance(request, dict):
                continue
            call_id = _text(request.get("toolCallId"))
            self.turns.conversation(ToolCall(seq, call_id, _text(request.get("name")),
                                             _arguments(request.get("arguments")), time))
            self.requested.add(call_id)
            if main:
                self.pending.add(call_id)
                self.loop_tools = True
            emitted = True
        if emitted:
            return IMPORTED
        if data.get("encryptedContent") or data.get("reasoningOpaque"):
            return skipped("encrypted-reasoning")
        return skipped("empty-message")

    def _assistant_reasoning(self, seq: int, time: str, record: dict[str, Any],
                             data: dict[str, Any]) -> Outcome:
        text = _text(data.get("content"))
        if not text.strip():
            return skipped("empty-message")
        self.turns.conversation(Reasoning(seq, text, time))
        self.last_reasoning = text  # the message that follows may repeat it as reasoningText
        return IMPORTED

    def _assistant_turn_end(self, seq: int, time: str, record: dict[str, Any],
                            data: dict[str, Any]) -> Outcome:
        if _subagent(record, data):
            return skipped("loop-boundary")
        if self.loop_tools or self.pending or not self.turns.turn_open:
            return skipped("loop-boundary")  # the loop goes on with the tools' results
        self.turns.end_here(seq, time)  # a model call that asked for no tool: the answer
        return IMPORTED

    def _abort(self, seq: int, time: str, record: dict[str, Any],
               data: dict[str, Any]) -> Outcome:
        self.pending.clear()
        if not self.turns.turn_open:
            return skipped("abort-when-idle")
        self.turns.end_here(seq, time, reason="aborted")
        return IMPORTED

    # --- tools ---------------------------------------------------------------------------
    def _tool_user_requested(self, seq: int, time: str, record: dict[str, Any],
                             data: dict[str, Any]) -> Outcome:
        return self._tool_call(seq, time, data)

    def _tool_execution_start(self, seq: int, time: str, record: dict[str, Any],
                              data: dict[str, Any]) -> Outcome:
        if _text(data.get("toolCallId")) in self.requested:
            return skipped("tool-start")  # the assistant's tool request carried the call
        return self._tool_call(seq, time, data)

    def _tool_call(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        call_id = _text(data.get("toolCallId"))
        self.turns.conversation(ToolCall(seq, call_id, _text(data.get("toolName")),
                                         _arguments(data.get("arguments")), time))
        self.requested.add(call_id)
        return IMPORTED

    def _tool_execution_complete(self, seq: int, time: str, record: dict[str, Any],
                                 data: dict[str, Any]) -> Outcome:
        call_id = _text(data.get("toolCallId"))
        self.pending.discard(call_id)
        failed = data.get("success") is False
        self.turns.conversation(ToolResult(seq, call_id, _result_text(data), failed, time))
        return IMPORTED

    # --- host context --------------------------------------------------------------------
    def _system_message(self, seq: int, time: str, record: dict[str, Any],
                        data: dict[str, Any]) -> Outcome:
        text = _text(data.get("content"))
        if not text.strip():
            return skipped("empty-message")
        kind = (InjectionKind.INSTRUCTIONS if data.get("role") == "developer"
                else InjectionKind.RUNTIME_CONTEXT)
        self.turns.ambient(HostInjection(seq, kind, text, time))
        return IMPORTED

    def _system_notification(self, seq: int, time: str, record: dict[str, Any],
                             data: dict[str, Any]) -> Outcome:
        text = _text(data.get("content"))
        if not text.strip():
            return skipped("empty-message")
        self.turns.ambient(HostInjection(seq, InjectionKind.RUNTIME_CONTEXT, text, time))
        return IMPORTED


def _subagent(record: dict[str, Any], data: dict[str, Any]) -> bool:
    """A sub-agent's event (it runs inside a `task` tool call of the main agent)."""
    return bool(record.get("agentId")) or bool(data.get("parentToolCallId"))


def _is_copilot_record(record: dict[str, Any]) -> bool:
    return (
        record.get("type") in KNOWN_TYPES
        and isinstance(record.get("data"), dict)
        and "id" in record
        and "timestamp" in record
    )


def copilot_home(env: Mapping[str, str] | None = None) -> Path:
    """Where Copilot CLI keeps its configuration and sessions: COPILOT_HOME, else ~/.copilot."""
    env = os.environ if env is None else env
    configured = env.get("COPILOT_HOME", "")
    return Path(configured).expanduser() if configured else Path.home() / ".copilot"


def session_cwds(path: str | Path) -> tuple[str, str]:
    """(cwd, git root) a session started in, from its `session.start` ("" while unwritten)."""
    for record in header_records(path):
        data = record.get("data")
        if record.get("type") == "session.start" and isinstance(data, dict):
            context = data.get("context")
            if isinstance(context, dict):
                return _text(context.get("cwd")), _text(context.get("gitRoot"))
            return "", ""
    return "", ""


def belongs_to(path: str | Path, cwd: str) -> bool:
    """A session of the project at `cwd`: started there, or in a folder of its git root."""
    started, git_root = session_cwds(path)
    return same_directory(started, cwd) or same_directory(git_root, cwd)


def _session_files(root: Path) -> list[Path]:
    """`<id>/events.jsonl` under `root`, and the flat `<id>.jsonl` older releases wrote."""
    return [p for p in jsonl_files(root)
            if p.parent == root or (p.name == EVENTS_FILE and p.parent.parent == root)]


class CopilotCliReader:
    """`dsh_chapters.harnesses` entry point `copilot-cli`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        return any(_is_copilot_record(r) for r in head_records(head, limit=_SNIFF_LINES))

    def read(self, path: str) -> Transcript:
        state = _CopilotRead()
        ledger = read_records(path, state.handle, label=LABEL, expected=EXPECTED)
        file = Path(path)
        session_id = state.session_id or (
            file.parent.name if file.name == EVENTS_FILE else file.stem)
        return Transcript(
            session_id=session_id,
            harness=NAME,
            events=state.turns.finish(),
            account=ledger.account(),
            root_session_id=state.root_session_id if state.root_session_id != session_id else "",
            cwd=state.cwd,
            source_path=str(path),
            started_at=state.started_at,
        )

    def watch_roots(self, cwd: str) -> list[Path]:
        """What `chapters watch` watches: the folder of every session's state."""
        return [copilot_home() / SESSION_STATE]

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Sessions under `source` (any Copilot CLI events file), or those under
        `$COPILOT_HOME/session-state` (default ~/.copilot) that started in this project."""
        if source:
            return [str(p) for p in jsonl_files(Path(source))
                    if self.sniff(read_head(p, _SNIFF_BYTES))]
        files = _session_files(copilot_home() / SESSION_STATE)
        return [str(p) for p in files if belongs_to(p, cwd)]
