"""The Claude Code binding: `~/.claude/projects/<dir>/<sessionId>.jsonl` (docs/formats.md).

Claude Code writes one JSON record a line: `user` and `assistant` messages whose content is a
string or blocks (`text`, `thinking`, `tool_use`, `tool_result` joined by `tool_use_id`), plus
metadata records (`summary`, `system`, `file-history-snapshot`, `progress`, `attachment`, …).
Much of what arrives as a `user` record is not the user: tool-result carriers, slash commands
and their output (§7.2: never conversation), the compaction summary, and host-injected context
(`<system-reminder>`, CLAUDE.md, attachments: amendment 2026-09-21). This module sorts them.

A turn is a real user prompt plus everything up to the next one. It is complete when the
last record of an assistant message that ends it (`stop_reason` end_turn, stop_sequence,
max_tokens or refusal) has been read with no `tool_use` still waiting for its `tool_result`:
Claude Code 2.1.91 and later write one record per content block, every one of them carrying
the message's final stop reason, so the turn ends after the message's last block, never at its
first. It is also complete when Claude Code records the turn's end (`system` turn_duration or
stop_hook_summary) after a reply with nothing pending, when the user interrupted it, or when
the next real prompt arrives, whatever the stop reasons said: that is the rule for every
version, because Claude Code up to about 2.1.62 writes `stop_reason: null` on a final reply and
1.0.x and headless runs write no turn-end record. The last turn of such a session is archived
when the session is over (`--final`, SessionEnd, an idle file). A tool result may be written
before its call (2.1.91 to 2.1.227 do, now and then): that call is answered, not pending.

A message the user typed while the agent worked exists, in many versions, only as a
`queue-operation` `enqueue` record: it is archived as the user's words where it was typed,
unless the user took it back (`popAll`) or it was sent as the next prompt, whose own record
holds it. A custom slash command, with or without arguments, is the user's message and opens a
turn as a prompt; a built-in command (`/compact`, `/model`, …) stays out of the conversation
with its arguments (§7.2). A `pr-link` record becomes the chapter's `prLinks`.
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
    "last-prompt": "last-prompt",
    "permission-mode": "mode-change",
    "mode": "mode-change",
    "agent-name": "agent-name",  # the session's display name, equal to its custom title
    "tag": "session-tag",
    "cost-state": "cost-state",  # Claude Code's own usage totals, not conversation
    "file-history-delta": "file-history-snapshot",
    "teleported-from": "teleported-from",  # a marker file of a session moved from the web
    # Claude Code 2.1.x session state (the writer's record table, read in 2.1.237's bundle):
    "agent-color": "agent-setting",  # {agentColor}: the session's display colour
    "agent-setting": "agent-setting",  # {agentSetting}: which agent definition runs it
    "relocated": "relocated",  # {relocatedCwd}: the session moved to another directory
    "worktree-state": "worktree-state",  # {worktreeSession}: the git worktree it runs in
    "atis-latch": "session-latch",  # {atis}: a per-session switch, no conversation
    "isolation-latch": "session-latch",  # {side}
    "bridge-session": "remote-control",  # {bridgeSessionId, lastSequenceNum}: /remote-control
    "frame-link": "frame-link",  # {path, frameUrl, title}: a page published on claude.ai
    "artifact-comment-monitor": "artifact-monitor",  # {artifacts}: comment watch state
    "ended-by-model": "ended-by-model",  # {timestamp}: the model ended the session
    "history-suppression": "history-suppression",  # {cause}: older history hidden on resume
    "attribution-snapshot": "attribution-snapshot",  # commit attribution state
    "content-replacement": "content-replacement",  # {replacements}: the model's shortened view
    "fork-context-ref": "agent-reference",  # a forked agent's context, by reference
    "observer-ref": "agent-reference",  # an observer agent's transcript, by reference
    "marble-origami-commit": "context-collapse",  # which messages the model's view collapsed
    "marble-origami-snapshot": "context-collapse",
    "marble-origami-reset": "context-collapse",
}
QUEUE = "queue-operation"
SYSTEM_RULES = {
    "turn_duration": "turn-duration",
    "stop_hook_summary": "stop-hook-summary",
    "api_error": "api-error",
    "informational": "system-notice",
    "microcompact_boundary": "microcompact-boundary",
    "bridge_status": "remote-control",  # "/remote-control is active …": a notice
    "scheduled_task_fire": "scheduled-task",  # "resuming /loop wakeup": its prompt follows
    "model_fallback": "model-fallback",  # another model answered: the answer is its own record
    "model_consent_fallback": "model-fallback",
    "model_refusal_fallback": "model-fallback",
    "model_refusal_no_fallback": "model-fallback",
    "memory_saved": "memory-saved",  # {writtenPaths}: which memory files were written
    "agents_killed": "agents-killed",  # the background agents were stopped
    "permission_retry": "permission-notice",  # "Allowed …"
}
# System records that hold a summary the harness wrote: a marker where they fall, like a
# compaction (the text is the model's recap, not conversation).
SUMMARY_SUBTYPES = {"away_summary": "away summary", "post_turn_summary": "turn summary"}
_TURN_END_SUBTYPES = frozenset({"turn_duration", "stop_hook_summary"})
PR_LINK = "pr-link"
_MESSAGE_TYPES = frozenset({"user", "assistant", "system", "attachment"})
_RECORD_TYPES = frozenset(
    {"user", "assistant", "system", "attachment", PR_LINK, QUEUE, *METADATA_RULES}
)
# Claude Code's own slash commands: never conversation, arguments included (§7.2). A command
# not named here is the user's own (`.claude/commands/`, a plugin's `name:command`), and the
# arguments typed after it are the user's words.
# The list is the union of older versions' and 2.1.237's own command table.
BUILTIN_COMMANDS = frozenset({
    "add-dir", "advisor", "agents", "artifacts", "auto-mode-setup", "autocompact", "autofix-pr",
    "background", "bashes", "branch", "brief", "btw", "bug", "cd", "chrome", "clear", "color",
    "compact", "config", "context", "copy", "cost", "daemon", "design", "design-consent",
    "design-login", "design-revoke", "desktop", "diff", "doctor", "effort", "exit", "export",
    "extra-usage", "fast", "feedback", "focus", "fork", "goal", "heapdump", "help", "hooks",
    "ide", "import", "init", "insights", "install", "install-github-app", "install-slack-app",
    "keybindings", "list-agents", "login", "logout", "loops", "mcp", "memory",
    "migrate-installer", "mobile", "model", "output-style", "passes", "pause-memory",
    "permissions", "plan", "plugin", "plugins", "powerup", "pr-comments", "privacy-settings",
    "pro-trial-expired", "radio", "rate-limit-options", "recap", "release-notes",
    "reload-plugins", "reload-skills", "remote-control", "remote-env", "rename", "resume",
    "review", "rewind", "sandbox", "scroll-speed", "security-review", "session",
    "setup-bedrock", "setup-vertex", "skill-doctor", "skills", "stats", "status", "statusline",
    "stickers", "stop", "subtask", "tasks", "team-onboarding", "teleport", "terminal-setup",
    "theme", "todos", "tui", "ultraplan", "ultrareview", "update", "upgrade", "usage",
    "usage-credits", "version", "vim", "voice", "web-setup", "wellbeing", "workflow-launch-exec",
    "workflows",
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


def _message_id(record: dict[str, Any]) -> str:
    message = record.get("message")
    message_id = message.get("id") if isinstance(message, dict) else None
    return message_id if isinstance(message_id, str) else ""


def _is_subagent_file(path: Path) -> bool:
    return path.parent.name == "subagents" or path.stem.startswith("agent-")


# What Claude Code queues besides the user's words: background task and agent notifications
# (they arrive again as their own records) and commands (run when dequeued, as their records).
_QUEUED_NOTICES = ("<task-notification>", "<agent-notification>", "<command-message>",
                   "<command-name>", "{")
_QUEUED_COMMANDS = ("/", "!")


class _Typed:
    """A message the user typed while the agent worked (`queue-operation` `enqueue`)."""

    __slots__ = ("consumed", "event", "key", "seq", "text", "time")

    def __init__(self, seq: int, text: str, time: str) -> None:
        self.seq = seq
        self.text = text
        self.time = time
        self.key = " ".join(text.split())
        self.event: UserMessage | None = None  # the message, where it was typed
        self.consumed = False  # taken into the running turn (`remove`): a turn's, not a prompt


class _ClaudeRead:
    """The state of one read: header fields, pending tool uses, the assembler."""

    def __init__(self, path: Path, ledger: LineLedger) -> None:
        self.path = path
        self.subagent = _is_subagent_file(path)
        self.turns = TurnAssembler()
        self.pending: set[str] = set()  # tool_use ids still waiting for their tool_result
        self.seen: set[str] = set()
        self.record_session_id = ""  # the first sessionId the records carry
        self.last_record: dict[str, Any] = {}
        self.header_pending = True  # a header field is still unknown
        self.cwd = ""
        self.started_at = ""
        self.git_branch = ""
        self.last_run: CommandRun | None = None
        self.last_boundary: CompactionMarker | None = None
        self.ledger = ledger  # externalized outputs count their replaced bytes here too
        # The message whose terminal stop reason ends the turn once its last record is read:
        # 2.1.91+ write a record per block, each carrying the final stop reason.
        self.ending = ""
        self.ending_soft = False  # max_tokens: unless the model goes on, which 2.1.x do
        self.early_results: set[str] = set()  # tool results read before their tool_use
        self.replied = False  # the open turn has a reply (a turn-end record may trail it)
        self.typed: list[_Typed] = []  # messages typed mid-turn, not yet settled
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
        if kind not in _MESSAGE_TYPES:  # the conversation's records first: most lines are
            if kind in METADATA_RULES:
                return skipped(METADATA_RULES[kind])
            if kind == PR_LINK:
                return self._pr_link(seq, record)
            if kind == QUEUE:
                return self._queue(seq, record)
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
        if self.ending and (kind == "user" or (kind == "assistant"
                            and _message_id(record) != self.ending)):
            # The ending message's last record was the one before. Notices and attachments
            # may fall between its records (a scheduled task's wakeup did), so they do not.
            if kind == "assistant" and self.ending_soft:
                self.ending = ""  # the model went on after max_tokens: the same turn
            else:
                self._settle()
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
        self.last_record = record  # its version and sessionId are the file's newest
        if self.header_pending:
            if not self.record_session_id and isinstance(record.get("sessionId"), str):
                self.record_session_id = record["sessionId"]
            if not self.cwd and isinstance(record.get("cwd"), str):
                self.cwd = record["cwd"]
            if not self.started_at and isinstance(record.get("timestamp"), str):
                self.started_at = record["timestamp"]
            if not self.git_branch and isinstance(record.get("gitBranch"), str):
                self.git_branch = record["gitBranch"]
            self.header_pending = not (self.record_session_id and self.cwd and self.started_at
                                       and self.git_branch)

    def newest(self, key: str) -> str:
        """The last conversation record's `version` or `sessionId` ("" when it has none)."""
        value = self.last_record.get(key)
        return value if isinstance(value, str) else ""

    def _settle(self) -> None:
        """The message that ended the turn is whole: close the turn after it."""
        self.ending = ""
        self.turns.end_after_conversation()

    def finish(self) -> None:
        if self.ending:
            self._settle()
        for typed in self.typed:
            if typed.event is None and not typed.consumed:
                # Typed, never sent, and no turn was running: the user's words all the same.
                self._open_prompt(UserMessage(typed.seq, typed.text, typed.time))
        self.typed = []

    # --- messages typed while the agent works ---------------------------------------------
    def _queue(self, seq: int, record: dict[str, Any]) -> Outcome:
        """`{"type": "queue-operation", "operation": enqueue|remove|dequeue|popAll,
        "content"?, "timestamp", "sessionId"}`: Claude Code's input queue. The user's words are
        archived where they were typed; `remove` takes them into the running turn (newer
        versions repeat them in a `queued_command` attachment), `dequeue` sends them as the
        next prompt (whose own record holds them), `popAll` gives them back to the input box."""
        operation = record.get("operation")
        content = record.get("content")
        text = content if isinstance(content, str) else ""
        time = record.get("timestamp")
        time = time if isinstance(time, str) else ""
        if operation == "enqueue":
            stripped = text.lstrip()
            if not stripped:
                return skipped(QUEUE)
            if stripped.startswith(_QUEUED_NOTICES):
                return skipped("queued-notification")
            if stripped.startswith(_QUEUED_COMMANDS):
                return skipped("queued-command")
            typed = _Typed(seq, text, time)
            self.typed.append(typed)
            if self.turns.turn_open and not self.ending:  # typed into the running turn
                typed.event = UserMessage(seq, text, time)
                self.turns.conversation(typed.event)
            return IMPORTED
        if operation == "popAll":
            popped = " ".join(text.split())
            for typed in [t for t in self.typed if not t.consumed
                          and (not popped or t.key in popped)]:
                self._withdraw(typed, "queue-withdrawn")  # back in the input box, unsent
            return skipped(QUEUE)
        if operation in ("remove", "dequeue"):
            taken = self._queued(" ".join(text.split()))
            if taken is not None and operation == "remove":
                taken.consumed = True  # the running turn took it
                if taken.event is None:
                    taken.event = UserMessage(taken.seq, taken.text, taken.time)
                    self.turns.conversation(taken.event)
            return skipped(QUEUE)
        return unknown(f"{QUEUE}:{operation}")

    def _queued(self, key: str) -> _Typed | None:
        """The queued message an operation names by its text, else the oldest still queued."""
        waiting = [t for t in self.typed if not t.consumed]
        return next((t for t in waiting if key and t.key == key), waiting[0] if waiting else None)

    def _carrier(self, text: str) -> _Typed | None:
        """A typed message this record repeats (a prompt it was sent as, its delivery)."""
        if not self.typed:
            return None
        key = " ".join(text.split())
        return next((t for t in self.typed if t.key and t.key in key), None)

    def _withdraw(self, typed: _Typed, rule: str) -> None:
        self.typed.remove(typed)
        if typed.event is not None:
            self.turns.retract(typed.event)
            self.ledger.move(typed.seq, IMPORTED, skipped(rule))

    def _open_prompt(self, message: UserMessage) -> None:
        self.pending.clear()  # a new prompt: the last turn's unanswered tool uses never will be
        self.early_results.clear()
        self.ending = ""
        self.replied = False
        self.turns.prompt(message)
        carried = self._carrier(message.text)
        if carried is not None and not carried.consumed:
            self._withdraw(carried, "queued-then-sent")  # the prompt holds it
        self.typed = [t for t in self.typed if not t.consumed]  # their turn is over

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
        self._open_prompt(UserMessage(seq, "\n\n".join(parts), time))
        return IMPORTED

    def _tool_results(
        self, seq: int, time: str, results: list[dict[str, Any]], texts: list[str]
    ) -> Outcome:
        for block in results:
            call_id = str(block.get("tool_use_id", ""))
            if call_id in self.pending:
                self.pending.discard(call_id)
            else:
                self.early_results.add(call_id)  # its tool_use is written after it
            self.replied = True
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
            if name.lstrip("/") not in BUILTIN_COMMANDS:
                # The user's own command (with or without arguments) is their request.
                self._open_prompt(UserMessage(seq, f"{name} {args}".strip(), time))
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
        self.ending = ""
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
            message_id = message.get("id")
            if isinstance(message_id, str) and message_id:
                self.ending = message_id  # ends after the message's last record
                self.ending_soft = message.get("stop_reason") == "max_tokens"
            else:
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
                if call_id in self.early_results:
                    self.early_results.discard(call_id)  # answered already
                else:
                    self.pending.add(call_id)
        elif isinstance(kind, str) and kind.endswith("_tool_result"):  # server-side tools
            text = _result_text(block.get("content"))
            self.turns.conversation(
                ToolResult(seq, str(block.get("tool_use_id", "")), text, False, time)
            )
        else:
            return False  # redacted or empty thinking, unknown block types: nothing to keep
        self.replied = True
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
        if subtype in SUMMARY_SUBTYPES:
            self.turns.ambient(CompactionMarker(seq, content, time, SUMMARY_SUBTYPES[subtype]))
            return IMPORTED
        if subtype in _TURN_END_SUBTYPES and self.ending:
            self._settle()
        elif subtype in _TURN_END_SUBTYPES and not self.pending and self.replied:
            # Only after a reply: the previous turn's record may follow the next prompt.
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
            if self.ending:
                self._settle()
            typed = self._carrier(text)
            if typed is not None:
                self.typed.remove(typed)
                if typed.event is not None:
                    return skipped("queued-delivery")  # archived where it was typed
            message = UserMessage(seq, text, time)
            if self.turns.turn_open:
                self.turns.conversation(message)
            else:
                self._open_prompt(message)
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
        state.finish()
        session_id = file.stem
        if state.subagent:
            parent = file.parent.parent.name if file.parent.name == "subagents" else ""
            root = state.record_session_id or parent
        else:
            own = state.newest("sessionId")
            if own and session_id not in (own, state.record_session_id):
                # A copy under another name (`--source` of checkpoints' `full.jsonl`): the
                # transcript's own id (its newest records', as Claude Code names the file),
                # so the session imported again from ~/.claude is the same session.
                session_id = own
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
            git_branch=state.git_branch,
            harness_version=state.newest("version"),
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
