"""The Claude Code binding: `~/.claude/projects/<dir>/<sessionId>.jsonl` (docs/formats.md).

Claude Code writes one JSON record a line: `user` and `assistant` messages whose content is a
string or blocks (`text`, `thinking`, `tool_use`, `tool_result` joined by `tool_use_id`), plus
metadata records (`summary`, `system`, `file-history-snapshot`, `progress`, `attachment`, …).
Much of what arrives as a `user` record is not the user: tool-result carriers, slash commands
and their output (§7.2: never conversation), the compaction summary, and host-injected context
(`<system-reminder>`, CLAUDE.md, attachments: amendment 2026-09-21). This module sorts them.

A turn is a real user prompt plus everything up to the next one. It is complete when an
assistant record ends it (`stop_reason` end_turn, stop_sequence, max_tokens or refusal) with
no `tool_use` still waiting for its `tool_result`, when Claude Code records the turn's end
(`system` turn_duration or stop_hook_summary) with nothing pending, when the user interrupted
it, or when the next real prompt arrives, whatever the stop reasons said: that is the rule for
every version, because Claude Code up to about 2.1.62 writes `stop_reason: null` on a final
reply and 1.0.x and headless runs write no turn-end record. The last turn of such a session is
archived when the session is over (`--final`, SessionEnd, an idle file).

A custom slash command's arguments are the user's words and open a turn as a prompt; a built-in
command (`/compact`, `/model`, …) stays out of the conversation with its arguments (§7.2).
A `pr-link` record becomes the chapter's `prLinks`.
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
    PullRequestLink,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    UserMessage,
)

from dsh_chapters_harness.discovery import jsonl_files
from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    LineLedger,
    Outcome,
    head_records,
    read_records,
    read_text_counting,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "claude-code"
LABEL = "Claude Code"
EXPECTED = (
    'JSON lines {"type": "user"|"assistant"|"summary"|"system"|…, "sessionId", "uuid", "message"}'
)

# Stop reasons that end the model's turn; tool_use and pause_turn are mid-turn, and a null one
# (a record written while streaming) proves nothing.
TERMINAL_STOP_REASONS = frozenset({"end_turn", "stop_sequence", "max_tokens", "refusal"})
CONTINUATION_PREFIX = "This session is being continued from a previous conversation"
INTERRUPT_MARKERS = frozenset(
    {"[Request interrupted by user]", "[Request interrupted by user for tool use]"}
)

# Metadata records: read, understood, not conversation. The rule name is what the report shows.
METADATA_RULES = {
    "summary": "session-title",
    "custom-title": "session-title",
    "ai-title": "session-title",
    "file-history-snapshot": "file-history-snapshot",
    "progress": "progress",
    "queue-operation": "queue-operation",
    "last-prompt": "last-prompt",
    "permission-mode": "mode-change",
    "mode": "mode-change",
    "agent-name": "agent-name",  # the session's display name, equal to its custom title
    "tag": "session-tag",
    "cost-state": "cost-state",  # Claude Code's own usage totals, not conversation
    "file-history-delta": "file-history-snapshot",
    "teleported-from": "teleported-from",  # a marker file of a session moved from the web
}
SYSTEM_RULES = {
    "turn_duration": "turn-duration",
    "stop_hook_summary": "stop-hook-summary",
    "api_error": "api-error",
    "informational": "system-notice",
    "microcompact_boundary": "microcompact-boundary",
}
_TURN_END_SUBTYPES = frozenset({"turn_duration", "stop_hook_summary"})
PR_LINK = "pr-link"
_RECORD_TYPES = frozenset({"user", "assistant", "system", "attachment", PR_LINK, *METADATA_RULES})
# Claude Code's own slash commands: never conversation, arguments included (§7.2). A command
# not named here is the user's own (`.claude/commands/`, a plugin's `name:command`), and the
# arguments typed after it are the user's words.
BUILTIN_COMMANDS = frozenset({
    "add-dir", "agents", "bashes", "bug", "clear", "compact", "config", "context", "cost",
    "doctor", "effort", "exit", "export", "extra-usage", "fast", "feedback", "help", "hooks",
    "ide", "init", "install-github-app", "keybindings", "login", "logout", "mcp", "memory",
    "migrate-installer", "model", "output-style", "permissions", "plugin", "plugins",
    "pr-comments", "privacy-settings", "release-notes", "rename", "resume", "review", "rewind",
    "sandbox", "security-review", "skills", "stats", "status", "statusline", "tasks",
    "terminal-setup", "theme", "todos", "upgrade", "usage", "vim",
})
_ID_KEYS = ("sessionId", "uuid", "parentUuid", "leafUuid", "messageId")

_MEMORY_ATTACHMENTS = frozenset({"nested_memory", "instructions", "claude_md", "memory"})
_COMMAND_TAG = re.compile(
    r"<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"bash-input|bash-stdout|bash-stderr)>([\s\S]*?)</\1>"
)
_COMMAND_START = re.compile(
    r"\s*<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"bash-input|bash-stdout|bash-stderr)>"
)
_WHOLE_REMINDER = re.compile(r"\s*<system-reminder>[\s\S]*</system-reminder>\s*")
_PERSISTED_PATH = re.compile(r"saved to:\s*(\S+)")
_SNIFF_LINES = 8
_PROJECT_DIR_MAX = 200  # Claude Code truncates longer project dir names and adds a hash


def claude_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where Claude Code keeps its settings and projects: CLAUDE_CONFIG_DIR, else ~/.claude."""
    env = os.environ if env is None else env
    configured = env.get("CLAUDE_CONFIG_DIR", "")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def project_dir_name(cwd: str) -> str:
    """Claude Code's name for a project's directory: every non-alphanumeric character is '-'."""
    return re.sub(r"[^a-zA-Z0-9]", "-", cwd)


def _injection_kind(text: str) -> InjectionKind:
    head = text[:600].lower()
    if "claudemd" in head or "claude.md" in head or "instructions from:" in head:
        return InjectionKind.INSTRUCTIONS
    if "skill" in head:
        return InjectionKind.SKILL_CATALOG
    if "hook" in head:
        return InjectionKind.PLUGIN_NOTICE
    return InjectionKind.RUNTIME_CONTEXT


def _blocks(content: Any) -> list[dict[str, Any]] | None:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return None


def _placeholder(block: dict[str, Any]) -> str:
    """A non-text block as a short visible stand-in (base64 payloads are not conversation)."""
    source = block.get("source")
    media = source.get("media_type", "") if isinstance(source, dict) else ""
    return f"[{block.get('type', 'block')}{': ' + media if media else ''}]"


def _result_text(content: Any) -> str:
    """A tool_result's content as text: a string, or its blocks joined by newlines."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    parts = []
    for block in _blocks(content) or []:
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(_placeholder(block))
    return "\n".join(parts)


def _attachment_text(attachment: dict[str, Any]) -> str:
    content = attachment.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(c, str) for c in content):
        return "\n".join(content)  # hook output: one string per hook
    if isinstance(content, dict) and isinstance(content.get("content"), str):
        return str(content["content"])
    files = attachment.get("files")
    if isinstance(files, list):
        return "\n\n".join(
            f"Contents of {f.get('path', '')}:\n{f.get('content', '')}"
            for f in files
            if isinstance(f, dict)
        )
    for key in ("prompt", "text", "stdout"):
        if isinstance(attachment.get(key), str):
            return str(attachment[key])
    return json.dumps(attachment, ensure_ascii=False, sort_keys=True)


def _is_subagent_file(path: Path) -> bool:
    return path.parent.name == "subagents" or path.stem.startswith("agent-")


class _ClaudeRead:
    """The state of one read: header fields, pending tool uses, the assembler."""

    def __init__(self, path: Path, ledger: LineLedger) -> None:
        self.path = path
        self.subagent = _is_subagent_file(path)
        self.turns = TurnAssembler()
        self.pending: set[str] = set()  # tool_use ids still waiting for their tool_result
        self.seen: set[str] = set()
        self.record_session_id = ""
        self.cwd = ""
        self.started_at = ""
        self.last_run: CommandRun | None = None
        self.last_boundary: CompactionMarker | None = None
        self.ledger = ledger  # externalized outputs count their replaced bytes here too
        if self.subagent:
            session_dir = (
                path.parent.parent if path.parent.name == "subagents" else path.parent / path.stem
            )
        else:
            session_dir = path.parent / path.stem
        self.tool_results_dir = session_dir / "tool-results"

    # --- dispatch -----------------------------------------------------------------------
    def handle(self, seq: int, record: dict[str, Any]) -> Outcome:
        kind = record.get("type")
        if not isinstance(kind, str):
            return unknown("<no type>")
        if kind in METADATA_RULES:
            return skipped(METADATA_RULES[kind])
        if kind == PR_LINK:
            return self._pr_link(seq, record)
        if kind not in ("user", "assistant", "system", "attachment"):
            return unknown(kind)
        uid = record.get("uuid")
        if isinstance(uid, str):
            if uid in self.seen:
                return skipped("duplicate-record")  # a resumed session repeats history
            self.seen.add(uid)
        if record.get("isSidechain") is True and not self.subagent:
            # Older versions wrote Task subagents into the main file; the Task tool call and its
            # result in the main chain carry the prompt and the report.
            return skipped("sidechain-inline")
        self._note_header(record)
        time = record.get("timestamp")
        time = time if isinstance(time, str) else ""
        if kind == "user":
            return self._user(seq, time, record)
        if kind == "assistant":
            return self._assistant(seq, time, record)
        if kind == "system":
            return self._system(seq, time, record)
        return self._attachment(seq, time, record)

    def _pr_link(self, seq: int, record: dict[str, Any]) -> Outcome:
        """`{"type": "pr-link", "prNumber", "prUrl", "prRepository", "timestamp"}`: written when
        a PR shows up in tool output, and again on resume and compaction (the chapter keeps
        each URL once)."""
        url = record.get("prUrl")
        if not isinstance(url, str) or not url:
            return skipped("pr-link-without-url")
        time = record.get("timestamp")
        self.turns.ambient(PullRequestLink(seq, url, time if isinstance(time, str) else ""))
        return IMPORTED

    def _note_header(self, record: dict[str, Any]) -> None:
        if not self.record_session_id and isinstance(record.get("sessionId"), str):
            self.record_session_id = record["sessionId"]
        if not self.cwd and isinstance(record.get("cwd"), str):
            self.cwd = record["cwd"]
        if not self.started_at and isinstance(record.get("timestamp"), str):
            self.started_at = record["timestamp"]

    # --- user records -------------------------------------------------------------------
    def _user(self, seq: int, time: str, record: dict[str, Any]) -> Outcome:
        message = record.get("message")
        blocks = _blocks(message.get("content")) if isinstance(message, dict) else None
        if blocks is None:
            return unknown("user:no-content")
        texts = [
            b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        text = "\n\n".join(texts)
        if record.get("isCompactSummary") is True or text.lstrip().startswith(CONTINUATION_PREFIX):
            self._compaction_summary(seq, time, text)
            return IMPORTED
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            return self._tool_results(seq, time, results, texts)
        if record.get("isMeta") is True:
            if text.lstrip().startswith("Caveat:"):
                return skipped("command-caveat")
            if not text.strip():
                return skipped("empty-message")
            self.turns.ambient(HostInjection(seq, _injection_kind(text), text, time))
            return IMPORTED
        if _COMMAND_START.match(text):
            self._command(seq, time, text)
            return IMPORTED
        if text.strip() in INTERRUPT_MARKERS:
            self._interrupted()
            return skipped("interrupt-marker")
        if text.lstrip().startswith(("<task-notification>", "Stop hook feedback:")):
            self.turns.ambient(HostInjection(seq, InjectionKind.RUNTIME_CONTEXT, text, time))
            return IMPORTED
        return self._prompt(seq, time, blocks)

    def _prompt(self, seq: int, time: str, blocks: list[dict[str, Any]]) -> Outcome:
        parts: list[str] = []
        injected = False
        for block in blocks:
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                if _WHOLE_REMINDER.fullmatch(block["text"]):
                    # Older versions put CLAUDE.md and reminders in their own block of the prompt.
                    self.turns.ambient(
                        HostInjection(seq, _injection_kind(block["text"]), block["text"], time)
                    )
                    injected = True
                elif block["text"]:
                    parts.append(block["text"])
            else:
                parts.append(_placeholder(block))
        if not parts:
            return IMPORTED if injected else skipped("empty-message")
        self.pending.clear()  # a new prompt: the last turn's unanswered tool uses never will be
        self.turns.prompt(UserMessage(seq, "\n\n".join(parts), time))
        return IMPORTED

    def _tool_results(
        self, seq: int, time: str, results: list[dict[str, Any]], texts: list[str]
    ) -> Outcome:
        for block in results:
            call_id = str(block.get("tool_use_id", ""))
            self.pending.discard(call_id)
            text = self._externalized(_result_text(block.get("content")))
            self.turns.conversation(
                ToolResult(seq, call_id, text, block.get("is_error") is True, time)
            )
        interrupted = False
        for text in texts:
            if text.strip() in INTERRUPT_MARKERS:
                interrupted = True
            elif text.strip():
                # Text next to a tool result is the harness talking (a reminder, a notice).
                self.turns.ambient(HostInjection(seq, _injection_kind(text), text, time))
        if interrupted:
            self._interrupted()
        return IMPORTED

    def _externalized(self, text: str) -> str:
        """The full output of a result Claude Code moved to `<sessionId>/tool-results/`."""
        if "<persisted-output>" not in text:
            return text
        match = _PERSISTED_PATH.search(text)
        if match is None:
            return text
        full = read_text_counting(
            str(self.tool_results_dir / Path(match.group(1)).name), self.ledger
        )
        return full if full is not None else text

    def _compaction_summary(self, seq: int, time: str, text: str) -> None:
        boundary = self.last_boundary
        self.last_boundary = None
        if boundary is not None and not boundary.text:
            self.turns.amend(boundary, CompactionMarker(boundary.seq, text, boundary.time))
        else:
            self.turns.ambient(CompactionMarker(seq, text, time))

    def _command(self, seq: int, time: str, text: str) -> None:
        """A slash command or a `!` shell command, with its output when it comes (§7.2)."""
        tags: dict[str, str] = {}
        for match in _COMMAND_TAG.finditer(text):
            tags.setdefault(match.group(1), match.group(2))
        command = ""
        if "command-name" in tags:
            name, args = tags["command-name"].strip(), tags.get("command-args", "").strip()
            if args and name.lstrip("/") not in BUILTIN_COMMANDS:
                # The user's own command: what they typed after it is their request.
                self.pending.clear()
                self.turns.prompt(UserMessage(seq, f"{name} {args}", time))
                self.last_run = None
                return
            command = f"{name} {args}".strip()
        elif "bash-input" in tags:
            command = "!" + tags["bash-input"]
        output = "\n".join(
            tags[t]
            for t in ("local-command-stdout", "local-command-stderr", "bash-stdout", "bash-stderr")
            if tags.get(t)
        )
        if command:
            run = CommandRun(seq, command, output, time)
            self.turns.ambient(run)
            self.last_run = None if output else run
        elif self.last_run is not None:
            self.turns.amend(
                self.last_run,
                CommandRun(self.last_run.seq, self.last_run.command, output, self.last_run.time),
            )
            self.last_run = None
        else:
            self.turns.ambient(CommandRun(seq, "", output, time))

    def _interrupted(self) -> None:
        # The user stopped the turn: it ended, and its waiting tool uses never get results.
        self.pending.clear()
        self.turns.end_after_conversation()

    # --- assistant records --------------------------------------------------------------
    def _assistant(self, seq: int, time: str, record: dict[str, Any]) -> Outcome:
        message = record.get("message")
        if not isinstance(message, dict):
            return unknown("assistant:no-message")
        if record.get("isApiErrorMessage") is True:
            self._interrupted()  # the API failed: the turn is over
            return skipped("api-error-message")
        if message.get("model") == "<synthetic>":
            return skipped("synthetic-message")
        blocks = _blocks(message.get("content"))
        if blocks is None:
            return unknown("assistant:no-content")
        emitted = False
        for block in blocks:
            emitted = self._assistant_block(seq, time, block) or emitted
        if message.get("stop_reason") in TERMINAL_STOP_REASONS and not self.pending:
            self.turns.end_after_conversation()
        return IMPORTED if emitted else skipped("empty-message")

    def _assistant_block(self, seq: int, time: str, block: dict[str, Any]) -> bool:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str) and block["text"]:
            self.turns.conversation(AssistantMessage(seq, block["text"], time))
        elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"]:
            self.turns.conversation(Reasoning(seq, block["thinking"], time))
        elif kind in ("tool_use", "server_tool_use"):
            call_id = str(block.get("id", ""))
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            self.turns.conversation(
                ToolCall(seq, call_id, str(block.get("name", "")), arguments, time)
            )
            if kind == "tool_use":
                self.pending.add(call_id)
        elif isinstance(kind, str) and kind.endswith("_tool_result"):  # server-side tools
            text = _result_text(block.get("content"))
            self.turns.conversation(
                ToolResult(seq, str(block.get("tool_use_id", "")), text, False, time)
            )
        else:
            return False  # redacted or empty thinking, unknown block types: nothing to keep
        return True

    # --- system and attachment records ----------------------------------------------------
    def _system(self, seq: int, time: str, record: dict[str, Any]) -> Outcome:
        subtype = record.get("subtype")
        content = record.get("content")
        content = content if isinstance(content, str) else ""
        if subtype == "compact_boundary":
            marker = CompactionMarker(seq, "", time)
            self.turns.ambient(marker)
            self.last_boundary = marker
            return IMPORTED
        if subtype == "local_command":
            self._command(seq, time, content)
            return IMPORTED
        if subtype is None:
            return skipped("system-notice")  # hook and status notices of older versions
        if subtype in _TURN_END_SUBTYPES and not self.pending:
            self.turns.end_after_conversation()
        if subtype in SYSTEM_RULES:
            return skipped(SYSTEM_RULES[subtype])
        return unknown(f"system:{subtype}")

    def _attachment(self, seq: int, time: str, record: dict[str, Any]) -> Outcome:
        attachment = record.get("attachment")
        if not isinstance(attachment, dict) or not isinstance(attachment.get("type"), str):
            return unknown("attachment:no-type")
        kind = attachment["type"]
        text = _attachment_text(attachment)
        if kind == "queued_command" and attachment.get("commandMode", "prompt") == "prompt":
            # The user typed while the agent worked: a message of the running turn.
            message = UserMessage(seq, text, time)
            if self.turns.turn_open:
                self.turns.conversation(message)
            else:
                self.pending.clear()
                self.turns.prompt(message)
        elif kind == "queued_command":
            self.turns.ambient(CommandRun(seq, text, "", time))
        elif kind in _MEMORY_ATTACHMENTS:
            self.turns.ambient(HostInjection(seq, InjectionKind.INSTRUCTIONS, text, time))
        elif kind == "skill_listing":
            self.turns.ambient(HostInjection(seq, InjectionKind.SKILL_CATALOG, text, time))
        elif kind.startswith("hook_"):
            self.turns.ambient(HostInjection(seq, InjectionKind.PLUGIN_NOTICE, text, time))
        else:
            self.turns.ambient(HostInjection(seq, InjectionKind.RUNTIME_CONTEXT, text, time))
        return IMPORTED


def _is_claude_record(record: dict[str, Any]) -> bool:
    return (
        record.get("type") in _RECORD_TYPES
        and "payload" not in record
        and any(key in record for key in _ID_KEYS)
    )


class ClaudeCodeReader:
    """`dsh_chapters.harnesses` entry point `claude-code`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        return any(_is_claude_record(r) for r in head_records(head, limit=_SNIFF_LINES))

    def read(self, path: str) -> Transcript:
        file = Path(path)
        state = _ClaudeRead(file, LineLedger())
        ledger = read_records(
            path, state.handle, label=LABEL, expected=EXPECTED, ledger=state.ledger
        )
        session_id = file.stem
        if state.subagent:
            parent = file.parent.parent.name if file.parent.name == "subagents" else ""
            root = state.record_session_id or parent
        else:
            root = state.record_session_id if state.record_session_id != session_id else ""
        return Transcript(
            session_id=session_id,
            harness=NAME,
            events=state.turns.finish(),
            account=ledger.account(),
            root_session_id=root,
            cwd=state.cwd,
            source_path=str(path),
            started_at=state.started_at,
        )

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Sessions under `source`, or those of the project at `cwd` under
        `$CLAUDE_CONFIG_DIR/projects` (default ~/.claude/projects).

        Subagent files (`<sessionId>/subagents/*.jsonl`, older `agent-*.jsonl`) come right after
        their parent session, so a parent is archived before what descends from it.
        """
        if source:
            return _sessions_under(Path(source))
        projects = claude_config_dir() / "projects"
        found: list[str] = []
        for directory in _project_dirs(projects, cwd):
            found.extend(p for p in _sessions_under(directory) if p not in found)
        return found


def _project_dirs(projects: Path, cwd: str) -> list[Path]:
    names = []
    for spelling in (os.path.abspath(cwd), os.path.realpath(cwd)):
        name = project_dir_name(spelling)
        if name not in names:
            names.append(name)
    dirs = []
    for name in names:
        if len(name) <= _PROJECT_DIR_MAX:
            if (projects / name).is_dir():
                dirs.append(projects / name)
        elif projects.is_dir():  # never stat the full name: it may exceed the OS's limit
            prefix = name[:_PROJECT_DIR_MAX]
            dirs.extend(
                sorted(p for p in projects.iterdir() if p.is_dir() and p.name.startswith(prefix))
            )
    return dirs


def _sessions_under(root: Path) -> list[str]:
    def order(path: Path) -> tuple[str, ...]:
        relative = path.relative_to(root).parts
        if path.parent.name == "subagents" and len(relative) >= 3:
            # <project>/<sid>/subagents/x.jsonl sorts right after <project>/<sid>.jsonl
            return (*relative[:-3], relative[-3] + ".jsonl", "1", relative[-1])
        return (*relative[:-1], relative[-1], "0")

    files = [p for p in jsonl_files(root) if "tool-results" not in p.relative_to(root).parts]
    return [str(p) for p in sorted(files, key=order)]
