"""The pi binding: the pi coding agent's session files (docs/formats.md).

Built from pi's own writer (badlogic/pi-mono, `packages/coding-agent/src/core/
session-manager.ts` and `messages.ts`): `~/.pi/agent/sessions/--<cwd with / as ->--/
<time>_<uuid>.jsonl` (`PI_CODING_AGENT_DIR` moves `~/.pi/agent`), one JSON object a line,
appended. The first is the header `{type: "session", version: 3, id, timestamp, cwd,
parentSession?}`; every other entry has `{type, id, parentId, timestamp}` (a tree: a branch
points back to an earlier entry, and all branches stay in the file, read in file order):

- `message`: `message.role` is `user` (a prompt; `steering: true` when typed while the agent
  worked, kept where it was typed), `assistant` (`content`: `text`, `thinking`, `toolCall`
  blocks; `stopReason`: `stop`, `length`, `toolUse`, `error`, `aborted`), `toolResult`,
  `bashExecution` (the user's own `!command`: a command run, never conversation), `custom`
  (an extension's message: host context);
- `compaction` and `branch_summary`: summaries, kept as markers;
- `custom_message` (an extension's text put into the model's context): host context;
- `model_change`, `thinking_level_change`, `custom` (an extension's state, never sent to the
  model), `label`, `session_info`: skipped by named rules.

Oh My Pi (can1357/oh-my-pi), pi's fork, writes the same entries and a few of its own, read
here from the shapes its published sessions show: a `title` line at the top (rewritten in
place, padded), `session_init` (a subagent's system prompt and task), `ttsr_injection`,
`credential_pin` (a key's hash), `title_change`, and `developer` messages (reminders).

A turn starts at a prompt and is complete at the assistant message that ends pi's loop: a
`stopReason` of `stop`, `length` or `aborted` (`toolUse` goes on; after an `error` pi may
retry, so the turn waits for what follows).
"""

from __future__ import annotations

import json
import os
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

from dsh_chapters_harness.discovery import jsonl_files, read_head, same_directory
from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    Outcome,
    head_records,
    not_a_transcript,
    read_records,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "pi"
LABEL = "pi session"
EXPECTED = (
    'JSON lines: a header {"type": "session", "version": 3, "id", "timestamp", "cwd"}, then '
    'entries {"type": "message"|"compaction"|…, "id", "parentId", "timestamp", …}'
)
HEADER = "session"
ENDS = frozenset({"stop", "length", "aborted"})
_SKIPPED_ENTRIES = {
    "model_change": "settings-change",
    "thinking_level_change": "settings-change",
    "custom": "extension-state",
    "label": "label",
    "session_info": "session-name",
    # Oh My Pi
    "title": "title",
    "title_change": "title",
    "credential_pin": "credential-pin",
    "ttsr_injection": "rule-injection-record",  # its rule text is the custom_message beside it
}
_SNIFF_LINES = 4
_HEAD_BYTES = 1 << 16


def _is_header(record: Mapping[str, Any]) -> bool:
    """pi's header: a string `timestamp` (DSH's header, also `type: session`, has an integer
    `createdAt` instead)."""
    return (record.get("type") == HEADER and isinstance(record.get("id"), str)
            and isinstance(record.get("timestamp"), str) and "createdAt" not in record)


def _is_entry(record: Mapping[str, Any]) -> bool:
    return (isinstance(record.get("type"), str) and isinstance(record.get("id"), str)
            and "parentId" in record and isinstance(record.get("timestamp"), str))


def _blocks_text(content: Any) -> str:
    """A user message's text: a string as is; text blocks joined; images as a stand-in."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "image":
            texts.append(f"[image {block.get('mimeType', '')}]".replace(" ]", "]"))
    return "\n".join(texts)


def _session_id_of(reference: Any) -> str:
    """A parent session named by id (Oh My Pi) or by its file (pi: `<time>_<uuid>.jsonl`)."""
    if not isinstance(reference, str) or not reference:
        return ""
    if reference.endswith(".jsonl") or "/" in reference or "\\" in reference:
        stem = Path(reference).stem
        return stem.rsplit("_", 1)[-1] if "_" in stem else stem
    return reference


class _PiRead:
    """One read: the header, the assembler, whether a prompt's turn is still going."""

    def __init__(self) -> None:
        self.turns = TurnAssembler()
        self.session_id = ""
        self.parent = ""
        self.cwd = ""
        self.started_at = ""
        self.recognized = 0

    def handle(self, seq: int, record: dict[str, Any]) -> Outcome:
        if _is_header(record):
            self.recognized += 1
            if self.session_id:
                return skipped("header-repeat")
            self.session_id = record["id"]
            self.started_at = record["timestamp"]
            cwd = record.get("cwd")
            self.cwd = cwd if isinstance(cwd, str) else ""
            self.parent = _session_id_of(record.get("parentSession"))
            return IMPORTED
        kind = record.get("type")
        if kind == "title" and isinstance(record.get("title"), str):
            self.recognized += 1
            return skipped("title")  # Oh My Pi's first line, no entry id
        if not _is_entry(record):
            return unknown(kind if isinstance(kind, str) else "<no type>")
        self.recognized += 1
        time = record["timestamp"]
        if kind == "message" and isinstance(record.get("message"), dict):
            return self._message(seq, time, record["message"])
        if kind in ("compaction", "branch_summary"):
            summary = record.get("summary")
            self.turns.ambient(CompactionMarker(seq, summary if isinstance(summary, str) else "",
                                                time))
            return IMPORTED
        if kind == "custom_message":
            self.turns.ambient(HostInjection(seq, InjectionKind.PLUGIN_NOTICE,
                                             _blocks_text(record.get("content")), time))
            return IMPORTED
        if kind == "session_init":
            prompt = record.get("systemPrompt")
            if not isinstance(prompt, str) or not prompt:
                return skipped("subagent-setup")
            self.turns.ambient(HostInjection(seq, InjectionKind.INSTRUCTIONS, prompt, time))
            return IMPORTED  # its task is the user message that follows
        if isinstance(kind, str) and kind in _SKIPPED_ENTRIES:
            return skipped(_SKIPPED_ENTRIES[kind])
        self.recognized -= 1
        return unknown(kind if isinstance(kind, str) else "<no type>")

    def _message(self, seq: int, time: str, message: Mapping[str, Any]) -> Outcome:
        role = message.get("role")
        if role == "user":
            text = _blocks_text(message.get("content"))
            if not text.strip():
                return skipped("empty-message")
            event = UserMessage(seq, text, time)
            if message.get("steering") is True and self.turns.turn_open:
                self.turns.conversation(event)  # typed while the agent worked
            else:
                self.turns.prompt(event)
            return IMPORTED
        if role == "assistant":
            return self._assistant(seq, time, message)
        if role == "toolResult":
            text = _blocks_text(message.get("content"))
            call_id = message.get("toolCallId")
            self.turns.conversation(ToolResult(seq, call_id if isinstance(call_id, str) else "",
                                               text, message.get("isError") is True, time))
            return IMPORTED
        if role == "bashExecution":
            command, output = message.get("command"), message.get("output")
            self.turns.ambient(CommandRun(seq, command if isinstance(command, str) else "",
                                          output if isinstance(output, str) else "", time))
            return IMPORTED
        if role in ("custom", "hookMessage"):
            self.turns.ambient(HostInjection(seq, InjectionKind.PLUGIN_NOTICE,
                                             _blocks_text(message.get("content")), time))
            return IMPORTED
        if role == "developer":  # Oh My Pi's reminders to the model
            self.turns.ambient(HostInjection(seq, InjectionKind.RUNTIME_CONTEXT,
                                             _blocks_text(message.get("content")), time))
            return IMPORTED
        self.recognized -= 1
        return unknown(f"message:{role}" if isinstance(role, str) else "message:<no role>")

    def _assistant(self, seq: int, time: str, message: Mapping[str, Any]) -> Outcome:
        content = message.get("content")
        added = 0
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                self.turns.conversation(AssistantMessage(seq, block["text"], time))
                added += 1
            elif kind == "thinking" and isinstance(block.get("thinking"), str) \
                    and block["thinking"].strip():
                self.turns.conversation(Reasoning(seq, block["thinking"], time))
                added += 1
            elif kind == "toolCall":
                arguments = block.get("arguments", {})
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments, ensure_ascii=False)
                call_id, name = block.get("id"), block.get("name")
                self.turns.conversation(ToolCall(seq, call_id if isinstance(call_id, str) else "",
                                                 name if isinstance(name, str) else "",
                                                 arguments, time))
                added += 1
        reason = message.get("stopReason")
        if reason in ENDS:
            if not added and not self.turns.turn_open:
                return skipped("empty-reply")
            if reason == "aborted":
                self.turns.end_here(seq, time, "aborted")
            else:
                if not added:
                    self.turns.end_here(seq, time)
                else:
                    self.turns.end_after_conversation()
            return IMPORTED
        if not added:  # a failed request (pi may retry it) or an empty step
            return skipped("failed-request" if reason == "error" else "empty-reply")
        return IMPORTED


class PiReader:
    """`dsh_chapters.harnesses` entry point `pi`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        records = head_records(head, limit=_SNIFF_LINES)
        return any(_is_header(r) for r in records) or (
            bool(records) and records[0].get("type") == "title"
            and any(_is_entry(r) for r in records))

    def read(self, path: str) -> Transcript:
        state = _PiRead()
        ledger = read_records(path, state.handle, label=LABEL, expected=EXPECTED)
        if state.recognized == 0:
            raise not_a_transcript(path, ledger, label=LABEL, expected=EXPECTED)
        session_id = state.session_id or _id_from_name(Path(path))
        return Transcript(
            session_id=session_id,
            harness=NAME,
            events=state.turns.finish(),
            account=ledger.account(),
            root_session_id=state.parent if state.parent != session_id else "",
            cwd=state.cwd,
            source_path=str(path),
            started_at=state.started_at,
        )

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Session files under `source`, or this project's: the folder pi names after `cwd`
        under `sessions/`, and any other session there whose header records `cwd`."""
        root = Path(source) if source else agent_dir() / "sessions"
        own = root / session_folder(cwd)
        found: list[str] = []
        for file in jsonl_files(root):
            head = read_head(file, _HEAD_BYTES)  # the header is the first or second line
            if not self.sniff(head):
                continue
            if source or file.parent == own or same_directory(_header_cwd(head), cwd):
                found.append(str(file))
        return found


def _header_cwd(head: bytes) -> str:
    for record in head_records(head, limit=_SNIFF_LINES):
        if _is_header(record):
            cwd = record.get("cwd")
            return cwd if isinstance(cwd, str) else ""
    return ""


def agent_dir(env: Mapping[str, str] | None = None) -> Path:
    """`PI_CODING_AGENT_DIR`, else `~/.pi/agent` (config.ts `getAgentDir`)."""
    env = os.environ if env is None else env
    configured = env.get("PI_CODING_AGENT_DIR", "")
    return Path(configured).expanduser() if configured else Path.home() / ".pi" / "agent"


def session_folder(cwd: str) -> str:
    """session-manager.ts `getDefaultSessionDir`: `--` + cwd without its leading slash, with
    `/`, `\\` and `:` as `-`, + `--`."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + trimmed.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def _id_from_name(path: Path) -> str:
    """`2026-07-14T16-11-12-625Z_<uuid>.jsonl` → the uuid."""
    stem = path.stem
    return stem.rsplit("_", 1)[-1] if "_" in stem else stem
