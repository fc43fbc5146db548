"""The Codex CLI binding: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl` (docs/formats.md).

A rollout line is `{timestamp, type, payload}`: `session_meta`, `turn_context`,
`response_item` (messages, reasoning, `function_call`/`function_call_output` joined by
`call_id`, `local_shell_call`, `custom_tool_call`/`custom_tool_call_output`,
`tool_search_call`/`tool_search_output`: the model looking up tools to load, a call and its
result like any other), `compacted` and `event_msg`. The conversation is read from
`response_item`s; the `event_msg` user and agent messages mirror them and are skipped by a
named rule, never imported twice. A shell call's output is the JSON text
`{"output": …, "metadata": {"exit_code": …}}`: its result is the inner text, verbatim, unless
unwrapping would drop anything. Codex injects `<environment_context>`, AGENTS.md
(`<user_instructions>`, `# AGENTS.md instructions` with or without `for <dir>`), plugin lists
and interrupt notices as user messages (0.142+ put several in one message, one content item
each), and its permissions as developer messages: all host injections, item by item.

Multi-agent runs (0.145+) deliver a sub-agent's messages as `agent_message` items (and
`inter_agent_communication` records): archived as marked blocks, the user message of the turn
they arrive in. `thread_rolled_back` undoes the last user turns: they stay archived verbatim,
and a marker where the rollback happened names them. `thread_name_updated` names the thread,
and that name is the chapters' title.

A turn starts at a real user prompt. It is complete at the `event_msg` `task_complete` or
`turn_aborted` that Codex writes when the turn ends. A rollout from a CLI that writes no task
events at all closes a turn at the next prompt, and its last turn when the final record is an
assistant message with no call waiting for its output.
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
    Outcome,
    head_records,
    read_records,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "codex"
LABEL = "Codex rollout"
EXPECTED = (
    'JSON lines {"timestamp", "type": "session_meta"|"response_item"|"event_msg"|'
    '"turn_context"|"compacted", "payload": {…}}'
)

TOP_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
# Rollout records of newer CLIs that hold no conversation (codex-rs/history/src/rollout_payload.rs
# at 5ef96ab2: the RolloutItem wire types), each skipped by its rule. `inter_agent_communication`
# is imported (a sub-agent's message).
STATE_RECORDS = {
    "world_state": "world-state",  # AGENTS.md and environment baseline kept for resuming
    "inter_agent_communication_metadata": "agent-communication",  # {trigger_turn}
    "token_usage_record": "token-count",
    "security_risk_score": "risk-score",
    "retained_context": "retained-context",  # the host's bookkeeping of what it retained
    "realtime_item": "realtime-state",  # facts for redrawing a voice session
}
AGENT_COMMUNICATION = "inter_agent_communication"
RESPONSE_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "tool_search_output",
        "ghost_snapshot",
        "agent_message",
        "image_generation_call",
        "compaction",
        "context_compaction",
        "compaction_trigger",
        "additional_tools",
    }
)
# response_item types that hold no conversation of their own.
_ITEM_RULES = {
    "ghost_snapshot": "ghost-snapshot",
    "compaction": "compaction-event",  # the encrypted summary; `compacted` carries the marker
    "context_compaction": "compaction-event",
    "compaction_trigger": "compaction-event",
    "additional_tools": "tool-catalog",  # tools added to the model's list
}
TOOL_SEARCH = "tool_search"
_MIRRORS = frozenset(
    {
        "user_message",
        "agent_message",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "agent_reasoning_section_break",
        "injected_message",  # repeats the injected response item
        "item_completed",  # a plan: its text is the assistant message's, between plan tags
        "raw_response_item",
    }
)
# event_msg types that report progress or state already carried by response_items.
_STATUS_EVENTS = frozenset(
    {
        "exec_command_begin",
        "exec_command_end",
        "exec_command_output_delta",
        "patch_apply_begin",
        "patch_apply_end",
        "mcp_tool_call_begin",
        "mcp_tool_call_end",
        "web_search_begin",
        "web_search_end",
        "turn_diff",
        "plan_update",
        "error",
        "stream_error",
        "warning",
        "background_event",
        "session_configured",
        "shutdown_complete",
        "view_image_tool_call",
        "entered_review_mode",
        "exited_review_mode",
        "item_started",
        "item_completed",
        "get_history_entry_response",
        "list_custom_prompts_response",
        "mcp_list_tools_response",
        "undo_started",
        "undo_completed",
        "deprecation_notice",
        "rate_limits",
        # 0.14x: settings, goals, sub-agents, approvals, hooks and other lifecycle events; the
        # conversation they concern is in the response items
        "thread_settings_applied",
        "thread_goal_updated",
        "sub_agent_activity",
        "collab_agent_spawn_begin",
        "collab_agent_spawn_end",
        "collab_agent_interaction_begin",
        "collab_agent_interaction_end",
        "collab_waiting_begin",
        "collab_waiting_end",
        "collab_close_begin",
        "collab_close_end",
        "collab_resume_begin",
        "collab_resume_end",
        "image_generation_begin",
        "image_generation_end",
        "guardian_assessment",
        "guardian_warning",
        "dynamic_tool_call_request",
        "dynamic_tool_call_response",
        "model_reroute",
        "model_verification",
        "turn_moderation_metadata",
        "safety_buffering",
        "hook_started",
        "hook_completed",
        "terminal_interaction",
        "request_permissions",
        "request_user_input",
        "elicitation_request",
        "exec_approval_request",
        "apply_patch_approval_request",
        "patch_apply_updated",
        "mcp_startup_update",
        "mcp_startup_complete",
        "list_skills_response",
        "skills_update_available",
        "stream_info",
        "turn_started",
    }
)
_TURN_ENDS = frozenset({"task_complete", "turn_aborted"})
_EXIT_CODE = re.compile(r"\AExit code: (-?\d+)")
_WRAPPER_KEYS = frozenset({"output", "metadata"})
_METADATA_KEYS = frozenset({"exit_code", "duration_seconds"})
_SHELL_PART = re.compile(r"<(command|result|output)>\n?([\s\S]*?)\n?</\1>")
_SNIFF_LINES = 8


def _content_text(content: Any) -> str:
    """A message's text items joined by blank lines; images as a short stand-in."""
    if isinstance(content, str):
        return content
    parts = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif str(item.get("type", "")).endswith("image"):
            parts.append("[image]")
    return "\n\n".join(parts)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members; a repeated key makes it ambiguous (its first value is lost)."""
    members = dict(pairs)
    if len(members) != len(pairs):
        raise ValueError("repeated key")
    return members


_UNIQUE_KEYS = json.JSONDecoder(object_pairs_hook=_unique_keys)  # json.loads(…, hook) builds one


def _json_object(text: str) -> dict[str, Any] | None:
    """`text` as a JSON object when it is exactly one, with no key repeated; else None."""
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        parsed = _UNIQUE_KEYS.decode(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _exit_code(metadata: Any) -> int | None:
    code = metadata.get("exit_code") if isinstance(metadata, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _text_output(text: str) -> tuple[str, bool]:
    """A string output's text and whether the call failed.

    Codex serializes a shell/exec result as `{"output": "<text>", "metadata": {"exit_code": N,
    "duration_seconds": S}}` (compact serde JSON): the text is the inner `output`, verbatim.
    Anything that would drop a byte on unwrapping (other keys, unknown metadata, a repeated
    key, surrounding space) is kept whole; its exit code still says whether the call failed.
    """
    wrapper = _json_object(text)
    if wrapper is not None:
        code = _exit_code(wrapper.get("metadata"))
        metadata = wrapper.get("metadata", {})
        if (
            isinstance(wrapper.get("output"), str)
            and set(wrapper) <= _WRAPPER_KEYS
            and isinstance(metadata, dict)
            and set(metadata) <= _METADATA_KEYS
            and (code is not None or "exit_code" not in metadata)
        ):
            return wrapper["output"], code not in (0, None)
        return text, code not in (0, None)
    freeform = _EXIT_CODE.match(text)  # the freeform shell output, `Exit code: N\n…`, is text
    return text, freeform is not None and freeform.group(1) != "0"


def _output(payload: dict[str, Any]) -> tuple[str, bool]:
    """A call output's text and whether the call failed."""
    output = payload.get("output")
    if isinstance(output, dict):  # an older CLI's `{content, success}` payload
        content = output.get("content", output.get("output", ""))
        if isinstance(content, str):
            text, failed = _text_output(content)
        else:
            text, failed = _content_text(content), False
        return text, failed or output.get("success") is False
    if isinstance(output, list):  # content items (MCP results with images)
        return _content_text(output), False
    if not isinstance(output, str):
        return "", False
    return _text_output(output)


def _injection_kind(role: str, text: str) -> InjectionKind | None:
    """The kind of a host-injected message (or content item), or None for a real one."""
    head = text.lstrip()
    if role in ("developer", "system"):
        lower = head[:400].lower()
        if "agents.md" in lower or "<user_instructions>" in lower:
            return InjectionKind.INSTRUCTIONS
        if "skill" in lower:
            return InjectionKind.SKILL_CATALOG
        return InjectionKind.RUNTIME_CONTEXT
    if head.startswith(("<environment_context>", "<turn_aborted>")):
        return InjectionKind.RUNTIME_CONTEXT
    if head.startswith(("<user_instructions>", "# AGENTS.md instructions")):
        return InjectionKind.INSTRUCTIONS  # 0.142.5+ write the heading without "for <dir>"
    if head.startswith(("<skills_instructions>", "<available_skills>")):
        return InjectionKind.SKILL_CATALOG
    if head.startswith("<recommended_plugins>"):
        return InjectionKind.PLUGIN_NOTICE
    return None


def _items(content: Any) -> list[str]:
    """A message's content items as texts (an image as a short stand-in)."""
    if isinstance(content, str):
        return [content]
    items = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("text"), str):
            items.append(item["text"])
        elif str(item.get("type", "")).endswith("image"):
            items.append("[image]")
    return items


class _CodexRead:
    """The state of one read: header fields, pending calls, task events, the assembler."""

    def __init__(self) -> None:
        self.turns = TurnAssembler()
        self.pending: set[str] = set()
        self.open_searches: list[str] = []  # tool_search calls without their output yet
        self.task_events = False  # this CLI writes task_started/task_complete
        self.task_open = False
        self.task_prompted = False
        self.session_id = ""
        self.root_session_id = ""
        self.cwd = ""
        self.started_at = ""
        self.git_branch = ""
        self.version = ""
        self.title = ""  # the thread's name, when it was given one
        self.user_turns: list[int] = []  # the seq of each user turn's prompt, rolled back ones out

    def handle(self, seq: int, record: dict[str, Any]) -> Outcome:
        kind = record.get("type")
        time = record.get("timestamp")
        time = time if isinstance(time, str) else ""
        if time and not self.started_at:
            self.started_at = time
        payload = record.get("payload")
        if kind in TOP_TYPES and isinstance(payload, dict):
            if kind == "response_item":
                return self._item(seq, time, payload)
            if kind == "event_msg":
                return self._event(seq, time, payload)
            if kind == "session_meta":
                return self._meta(seq, time, payload)
            if kind == "compacted":
                message = payload.get("message")
                self.turns.ambient(
                    CompactionMarker(seq, message if isinstance(message, str) else "", time)
                )
                return IMPORTED
            if not self.cwd and isinstance(payload.get("cwd"), str):
                self.cwd = payload["cwd"]
            return skipped("turn-context")
        if kind in STATE_RECORDS:
            return skipped(STATE_RECORDS[kind])
        if kind == AGENT_COMMUNICATION and isinstance(payload, dict):
            text = payload.get("content")
            return self._agent_message(seq, time, payload, text if isinstance(text, str) else "")
        # Rollouts of CLIs before the {type, payload} envelope: a bare meta line, bare items.
        if "payload" not in record and kind in RESPONSE_ITEM_TYPES:
            return self._item(seq, time, record)
        if "record_type" in record:
            return skipped("legacy-state")
        if kind is None and isinstance(record.get("id"), str) and "timestamp" in record:
            return self._meta(seq, time, record)
        return unknown(kind if isinstance(kind, str) else "<no type>")

    def _meta(self, seq: int, time: str, payload: dict[str, Any]) -> Outcome:
        if not self.session_id and isinstance(payload.get("id"), str):
            self.session_id = payload["id"]
            if isinstance(payload.get("cwd"), str):
                self.cwd = payload["cwd"]
            if isinstance(payload.get("timestamp"), str):
                self.started_at = payload["timestamp"]
            forked = payload.get("forked_from_id")
            if isinstance(forked, str):
                self.root_session_id = forked
            git = payload.get("git")
            if isinstance(git, dict) and isinstance(git.get("branch"), str):
                self.git_branch = git["branch"]
        version = payload.get("cli_version")
        if isinstance(version, str) and version:
            self.version = version
        instructions = payload.get("instructions")
        if isinstance(instructions, str) and instructions.strip():
            self.turns.ambient(HostInjection(seq, InjectionKind.INSTRUCTIONS, instructions, time))
        return IMPORTED

    def _item(self, seq: int, time: str, item: dict[str, Any]) -> Outcome:
        kind = item.get("type")
        if kind == "message":
            return self._message(seq, time, item)
        if kind == "reasoning":
            text = _content_text(item.get("content")) or _content_text(item.get("summary"))
            if not text:
                return skipped("encrypted-reasoning")
            self.turns.conversation(Reasoning(seq, text, time))
            return IMPORTED
        if kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            return self._call(seq, time, kind, item)
        if kind in ("function_call_output", "custom_tool_call_output"):
            call_id = str(item.get("call_id", ""))
            self.pending.discard(call_id)
            text, failed = _output(item)
            self.turns.conversation(ToolResult(seq, call_id, text, failed, time))
            return IMPORTED
        if kind == "tool_search_call":
            return self._tool_search_call(seq, time, item)
        if kind == "tool_search_output":
            return self._tool_search_output(seq, time, item)
        if kind == "agent_message":
            return self._agent_message(seq, time, item, "\n\n".join(_items(item.get("content"))))
        if kind == "image_generation_call":
            return self._call(seq, time, kind, item)
        if isinstance(kind, str) and kind in _ITEM_RULES:
            return skipped(_ITEM_RULES[kind])
        return unknown(f"response_item:{kind}")

    def _tool_search_call(self, seq: int, time: str, item: dict[str, Any]) -> Outcome:
        """`{type, call_id, execution: client|server, status, arguments: {…}}`. A server-side
        search may carry no call_id: its output is then paired with the oldest open search."""
        call_id = str(item.get("call_id") or item.get("id") or f"{TOOL_SEARCH}@{seq}")
        arguments = item.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        self.turns.conversation(ToolCall(seq, call_id, TOOL_SEARCH, arguments, time))
        self.open_searches.append(call_id)
        if item.get("execution") != "server":  # a server search is answered inside the call
            self.pending.add(call_id)
        return IMPORTED

    def _tool_search_output(self, seq: int, time: str, item: dict[str, Any]) -> Outcome:
        """`{type, call_id, status, tools: [...]}`: the tools found, as Codex recorded them."""
        call_id = item.get("call_id")
        if isinstance(call_id, str) and call_id:
            if call_id in self.open_searches:
                self.open_searches.remove(call_id)
        else:
            call_id = self.open_searches.pop(0) if self.open_searches else ""
        self.pending.discard(call_id)
        tools = item.get("tools", [])
        text = tools if isinstance(tools, str) else json.dumps(tools, ensure_ascii=False)
        failed = item.get("status") == "incomplete"
        self.turns.conversation(ToolResult(seq, call_id, text, failed, time))
        return IMPORTED

    def _call(self, seq: int, time: str, kind: str, item: dict[str, Any]) -> Outcome:
        call_id = str(item.get("call_id") or item.get("id") or "")
        if kind == "function_call":
            name, arguments = str(item.get("name", "")), item.get("arguments", "")
        elif kind == "image_generation_call":  # answered inside the model call: no output item
            name = "image_generation"
            arguments = {k: item[k] for k in ("status", "revised_prompt") if k in item}
        elif kind == "custom_tool_call":
            name, arguments = str(item.get("name", "")), item.get("input", "")
        elif kind == "local_shell_call":
            name, arguments = "local_shell", item.get("action", {})
        else:
            name, arguments = "web_search", item.get("action", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        self.turns.conversation(ToolCall(seq, call_id, name, arguments, time))
        if kind not in ("web_search_call", "image_generation_call"):  # answered in the call
            self.pending.add(call_id)
        return IMPORTED

    def _message(self, seq: int, time: str, item: dict[str, Any]) -> Outcome:
        role = item.get("role")
        if role == "assistant":
            text = _content_text(item.get("content"))
            if not text:
                return skipped("empty-message")
            self.turns.conversation(AssistantMessage(seq, text, time))
            return IMPORTED
        if role not in ("user", "developer", "system"):
            return unknown(f"message:{role}")
        items = _items(item.get("content"))
        if role != "user":
            text = "\n\n".join(items)
            self.turns.ambient(HostInjection(seq, _injection_kind(role, text)
                                             or InjectionKind.RUNTIME_CONTEXT, text, time))
            return IMPORTED
        # A user message may hold several host injections, one content item each, and the
        # user's own words in others: each item is sorted by itself.
        words: list[str] = []
        for text in items:
            kind = _injection_kind(role, text)
            if kind is not None:
                self.turns.ambient(HostInjection(seq, kind, text, time))
            else:
                words.append(text)
        text = "\n\n".join(words)
        if len(words) < len(items) and not text.strip():
            return IMPORTED  # host context only
        if text.lstrip().startswith("<user_shell_command>"):
            self._shell_command(seq, time, text)
            return IMPORTED
        if not text.strip():
            return skipped("empty-message")
        self._user_words(UserMessage(seq, text, time))
        return IMPORTED

    def _user_words(self, message: UserMessage) -> None:
        if self.turns.turn_open and self.task_open and self.task_prompted:
            self.turns.conversation(message)  # the user steering a running turn
        else:
            self.pending.clear()  # the last turn's unanswered calls never will be
            self.turns.prompt(message)
            self.task_prompted = True
            self.user_turns.append(message.seq)

    def _agent_message(self, seq: int, time: str, item: dict[str, Any], text: str) -> Outcome:
        """A message another agent of a multi-agent run sent this one (`agent_message`
        {author, recipient, content}; `inter_agent_communication` {author, recipient,
        content, trigger_turn}): a marked block, the user message of the turn it arrives in."""
        if not text.strip():
            return skipped("empty-message")
        author, recipient = item.get("author"), item.get("recipient")
        mark = f"[message from agent {author if isinstance(author, str) else '?'}"
        mark += f" to {recipient}]" if isinstance(recipient, str) else "]"
        message = UserMessage(seq, f"{mark}\n\n{text}", time)
        if self.turns.turn_open:
            self.turns.conversation(message)
        else:
            self._user_words(message)
        return IMPORTED

    def _shell_command(self, seq: int, time: str, text: str) -> None:
        parts = {m.group(1): m.group(2) for m in _SHELL_PART.finditer(text)}
        command = parts.get("command", "")
        output = parts.get("result", parts.get("output", "" if command else text))
        self.turns.ambient(CommandRun(seq, command, output, time))

    def _event(self, seq: int, time: str, payload: dict[str, Any]) -> Outcome:
        kind = payload.get("type")
        if kind == "task_started":
            self.task_events = self.task_open = True
            self.task_prompted = False
            return skipped("task-started")
        if kind in _TURN_ENDS:
            self.task_events = True
            self.task_open = False
            if kind == "turn_aborted":
                self.pending.clear()
            self.turns.end_here(seq, time)
            return IMPORTED
        if kind == "thread_rolled_back":
            return self._rolled_back(seq, time, payload)
        if kind == "thread_name_updated":
            name = payload.get("thread_name")
            if isinstance(name, str) and name.strip():
                self.title = name.strip()
                return IMPORTED
            return skipped("empty-message")
        if kind in _MIRRORS:
            return skipped("event-mirror")
        if kind == "token_count":
            return skipped("token-count")
        if kind == "context_compacted":
            return skipped("compaction-event")  # the `compacted` record carries the marker
        if kind in _STATUS_EVENTS:
            return skipped("event-status")
        return unknown(f"event_msg:{kind}")

    def _rolled_back(self, seq: int, time: str, payload: dict[str, Any]) -> Outcome:
        """`{"type": "thread_rolled_back", "num_turns": N}`: the user undid the last N user
        turns (Codex drops them from the model's context). They stay archived as they were;
        a marker here names them, so a reader knows they were taken back."""
        count = payload.get("num_turns")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            return skipped("empty-message")
        undone = self.user_turns[-count:]
        del self.user_turns[-count:]
        span = f" (seq {undone[0]}–{seq - 1})" if undone else ""
        turns = "1 turn" if count == 1 else f"{count} turns"
        kind = f"rollback: the user undid {turns}{span}"
        self.turns.ambient(CompactionMarker(seq, "", time, kind))
        return IMPORTED

    def finish(self) -> None:
        # A CLI without task events never says a turn ended: the last one is complete when it
        # ends on an assistant message with no call still waiting for its output.
        if (
            not self.task_events
            and not self.pending
            and isinstance(self.turns.last_conversation, AssistantMessage)
        ):
            self.turns.end_after_conversation()


def _is_codex_record(record: dict[str, Any]) -> bool:
    if record.get("type") in TOP_TYPES and isinstance(record.get("payload"), dict):
        return True
    # The pre-envelope rollout: a bare meta line, then bare response items.
    if "type" not in record and isinstance(record.get("id"), str) and "timestamp" in record:
        return "instructions" in record or "git" in record
    return (
        record.get("type") == "message"
        and isinstance(record.get("role"), str)
        and "message" not in record
    )


def rollout_cwd(path: str | Path) -> str:
    """One rollout's `session_meta` cwd ("" while that line is not written yet), as
    `discover` reads it per file."""
    return _meta_cwd(Path(path)) if Path(path).name.startswith("rollout-") else ""


def _meta_cwd(path: Path) -> str:
    for record in header_records(path):
        payload = record.get("payload")
        if record.get("type") == "session_meta" and isinstance(payload, dict):
            cwd = payload.get("cwd")
            return cwd if isinstance(cwd, str) else ""
    return ""


class CodexReader:
    """`dsh_chapters.harnesses` entry point `codex`."""

    name = NAME
    # What Codex names a session file: an import told a folder with none says so.
    session_files = "rollout-*.jsonl"

    def sniff(self, head: bytes) -> bool:
        return any(_is_codex_record(r) for r in head_records(head, limit=_SNIFF_LINES))

    def read(self, path: str) -> Transcript:
        state = _CodexRead()
        ledger = read_records(path, state.handle, label=LABEL, expected=EXPECTED)
        state.finish()
        session_id = state.session_id or _id_from_name(Path(path))
        return Transcript(
            session_id=session_id,
            harness=NAME,
            events=state.turns.finish(),
            account=ledger.account(),
            root_session_id=state.root_session_id if state.root_session_id != session_id else "",
            cwd=state.cwd,
            source_path=str(path),
            started_at=state.started_at,
            git_branch=state.git_branch,
            harness_version=state.version,
            title=state.title,
        )

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Rollouts under `source`, or those under `$CODEX_HOME/sessions` (default
        ~/.codex/sessions) whose cwd is `cwd`."""
        root = Path(source) if source else codex_home() / "sessions"
        files = jsonl_files(root, "rollout-*.jsonl")
        if source:
            return [str(p) for p in files]
        return [str(p) for p in files if same_directory(_meta_cwd(p), cwd)]


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    """Where Codex keeps config.toml and its sessions: CODEX_HOME, else ~/.codex."""
    env = os.environ if env is None else env
    configured = env.get("CODEX_HOME", "")
    return Path(configured).expanduser() if configured else Path.home() / ".codex"


def _id_from_name(path: Path) -> str:
    """`rollout-2026-11-20T09-14-03-<uuid>.jsonl` → the uuid (its last five dash groups)."""
    parts = path.stem.split("-")
    return "-".join(parts[-5:]) if len(parts) > 5 else path.stem
