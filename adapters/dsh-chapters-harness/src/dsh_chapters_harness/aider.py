"""The Aider binding: `.aider.chat.history.md` at the root of the repository (docs/formats.md).

Aider appends its chat to this markdown file as it goes (aider/io.py, `append_chat_history`;
the format is unchanged since May 2023):

- `# aider chat started at 2025-12-03 14:43:45`: a run of aider starts (after a blank line);
  the only time aider writes (local time), so the session's start is the first run's and no
  event carries a time;
- `#### <line>␣␣`: a line the user typed; a message of several lines is several such lines,
  written after a blank line (an empty line is `####␣␣␣`; an empty input is `#### <blank>`);
- `> <message>␣␣`: aider's own output (files added, edits applied, commits, token counts,
  questions and their answers); a message that holds line breaks carries `> ` on its first line
  only and ends at the next line that ends with two spaces;
- anything else is the model's reply, written whole once it is complete, between blank lines.

Aider takes input only while it is idle, so whatever the user types (a prompt, a `/command`)
ends the turn before it, and so does the start of the next run. The last turn of the file ends
when the session is over (`--final`, or the file left unwritten: docs/formats.md, finality).
A `/command` is a host command (§7.2), except the ones whose words go to the model (`/ask`,
`/code`, `/architect`, `/context`, `/help`, `/ok`): those are prompts, kept as typed. Aider's
output inside a turn is what it did with the reply (edits applied, commits, test output): it is
kept as the result of a tool named `aider`; its output outside a turn (the start-up banner) is
runtime context; a command's output goes with the command.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    UserMessage,
)

from dsh_chapters_harness import input_guard
from dsh_chapters_harness.discovery import read_head
from dsh_chapters_harness.transcript_lines import (
    AUTO_HINT,
    BLANK_LINE_RULE,
    IMPORTED,
    LineLedger,
    Outcome,
    decode_counting,
    skipped,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "aider"
LABEL = "Aider chat history"
HISTORY_FILE = ".aider.chat.history.md"
CONFIG_FILE = ".aider.conf.yml"
HISTORY_ENV = "AIDER_CHAT_HISTORY_FILE"
TOOL_NAME = "aider"
_HEADER = re.compile(r"# [Aa]ider chat started at (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\s*\Z")
_USER = "#### "
_BREAK = "  "  # aider ends every line it writes for the user or itself with two spaces
_BLANK_INPUT = "<blank>"
# aider/commands.py `cmd_*`, as typed (`_` is `-`). The first group hands its words to the
# model; the rest are host commands. Aider also accepts a unique prefix of a name.
PROMPT_COMMANDS = frozenset({"ask", "code", "architect", "context", "help", "ok"})
HOST_COMMANDS = frozenset({
    "model", "editor-model", "weak-model", "chat-mode", "models", "web", "commit", "lint",
    "clear", "reset", "tokens", "undo", "diff", "add", "drop", "git", "test", "run", "exit",
    "quit", "ls", "voice", "paste", "read-only", "map", "map-refresh", "settings", "load",
    "save", "multiline-mode", "copy", "report", "editor", "edit", "think-tokens",
    "reasoning-effort", "copy-context",
})
_COMMAND = re.compile(r"\A/([a-z][a-z-]*)(?:\s|\Z)")
# A confirmation aider logs as typed input when an earlier "All" answered it (io.confirm_ask).
_CONFIRMATION = re.compile(r"\(Y\)es/\(N\)o[^\n]*\[(?:Yes|No)\]: ?\S*\Z")
# Reasoning aider itself wraps in this tag (aider/reasoning_tags.py) at the head of a reply.
_REASONING_TAG = "thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b"
_REASONING = re.compile(rf"\A<{_REASONING_TAG}>\n*([\s\S]*?)\n*</{_REASONING_TAG}>\s*")
_SNIFF_LINES = 40


@dataclass(frozen=True, slots=True)
class _Block:
    """Consecutive lines of one kind: `header`, `user`, `tool` or `reply`."""

    kind: str
    first: int  # 1-based line number of its first line
    lines: tuple[str, ...]


def _ends_tool_message(line: str) -> bool:
    return line.endswith(_BREAK)


def _is_user_line(line: str) -> bool:
    return line.startswith(_USER) and line.endswith(_BREAK)


def _is_tool_line(line: str) -> bool:
    return line.startswith("> ") or line == ">"


def _blocks(lines: list[str], ledger: LineLedger) -> Iterator[_Block]:
    """The file's lines grouped into blocks; a blank line between blocks is skipped by
    `blank-line` here, the lines of a block are counted by what their block became."""
    index = 0
    total = len(lines)
    while index < total:
        line = lines[index]
        number = index + 1
        if not line.strip():
            ledger.record(number, skipped(BLANK_LINE_RULE))
            index += 1
            continue
        if _HEADER.match(line):
            index += 1
            yield _Block("header", number, (line,))
            continue
        if _is_user_line(line):
            end = index
            while end < total and _is_user_line(lines[end]):
                end += 1
            yield _Block("user", number, tuple(lines[index:end]))
            index = end
            continue
        if _is_tool_line(line):
            end = index
            while end < total and _is_tool_line(lines[end]):
                end += 1
                if not _ends_tool_message(lines[end - 1]):
                    # A message with line breaks: it runs to the next line with two spaces.
                    while end < total and not _stops_continuation(lines[end]):
                        end += 1
                        if _ends_tool_message(lines[end - 1]):
                            break
            yield _Block("tool", number, tuple(lines[index:end]))
            index = end
            continue
        end = index
        while end < total and not _starts_other_block(lines[end]):
            end += 1
        while not lines[end - 1].strip():  # trailing blank lines sit between blocks
            end -= 1
        yield _Block("reply", number, tuple(lines[index:end]))
        index = end


def _stops_continuation(line: str) -> bool:
    return bool(_HEADER.match(line)) or _is_user_line(line) or _is_tool_line(line)


def _starts_other_block(line: str) -> bool:
    """Inside a reply, only what aider itself writes ends it: a run header, a typed line, or
    its output with the two trailing spaces (a reply's own `> quote` has none)."""
    return bool(_HEADER.match(line)) or _is_user_line(line) or (
        _is_tool_line(line) and _ends_tool_message(line))


def _user_text(lines: tuple[str, ...]) -> str:
    """What the user typed: each line without `####␣` and the two spaces aider appended. Aider
    strips the message's trailing whitespace before appending them, so a last line of spaces
    is `####␣␣`: an empty line."""
    return "\n".join(line[len(_USER) - 1:].removesuffix(_BREAK).removeprefix(" ")
                     for line in lines)


def _tool_text(lines: tuple[str, ...]) -> str:
    parts = []
    for line in lines:
        if _is_tool_line(line):
            line = line[2:] if line.startswith("> ") else ""
        parts.append(line.removesuffix(_BREAK))
    return "\n".join(parts)


def _command_name(text: str) -> str | None:
    """The aider command a typed input runs ('' for a `!` shell command), or None."""
    if text.startswith("!"):
        return ""
    match = _COMMAND.match(text)
    if match is None:
        return None
    word = match.group(1)
    if word in PROMPT_COMMANDS or word in HOST_COMMANDS:
        return word
    matches = [c for c in (*PROMPT_COMMANDS, *HOST_COMMANDS) if c.startswith(word)]
    return matches[0] if len(matches) == 1 else None


def _iso(match: re.Match[str]) -> str:
    year, month, day, hour, minute, second = match.groups()
    return f"{year}-{month}-{day}T{hour}:{minute}:{second}"


class _AiderRead:
    """The blocks of one history file into events.

    Aider writes no time on a record, only each run's start. An event's time is its record's
    own or none: a run's start on every record of a long run would read as a session idle for
    hours (finality by a record's own time), so events carry none."""

    def __init__(self) -> None:
        self.turns = TurnAssembler()
        self.command: CommandRun | None = None  # a command whose output may follow
        self.started_at = ""
        self.first_header = ""

    def block(self, block: _Block) -> Outcome:
        """The block's events; what its lines became."""
        previous_command, self.command = self.command, None
        if block.kind == "header":
            match = _HEADER.match(block.lines[0])
            assert match is not None
            self.started_at = self.started_at or _iso(match)
            self.first_header = self.first_header or block.lines[0]
            self.turns.end_after_conversation()  # a new run: the last one is over
        elif block.kind == "user":
            return self._input(block, previous_command)
        elif block.kind == "tool":
            self._output(block.first, _tool_text(block.lines), previous_command)
        else:
            self._reply(block.first, "\n".join(block.lines).strip())
        return IMPORTED

    def _output(self, seq: int, text: str, command: CommandRun | None) -> None:
        """Aider's own output: the output of the command before it, else inside a turn the
        result of what aider did with the reply, else (the start-up banner) runtime context."""
        if command is not None:
            output = f"{command.output}\n{text}" if command.output else text
            amended = CommandRun(command.seq, command.command, output, command.time)
            self.turns.amend(command, amended)
            self.command = amended
        elif self.turns.turn_open:
            call_id = f"{TOOL_NAME}-{seq}"
            self.turns.conversation(ToolCall(seq, call_id, TOOL_NAME, ""))
            self.turns.conversation(ToolResult(seq, call_id, text, False))
        else:
            self.turns.ambient(HostInjection(seq, InjectionKind.RUNTIME_CONTEXT, text))

    def _reply(self, seq: int, text: str) -> None:
        """The model's reply; reasoning aider wrapped in its own tag becomes reasoning."""
        thinking = _REASONING.match(text)
        if thinking is not None:
            self.turns.conversation(Reasoning(seq, thinking.group(1)))
            text = text[thinking.end():]
        if text:
            self.turns.conversation(AssistantMessage(seq, text))

    def _input(self, block: _Block, previous_command: CommandRun | None) -> Outcome:
        text = _user_text(block.lines)
        seq = block.first
        if text == _BLANK_INPUT:
            self.turns.end_after_conversation()  # an empty input: aider was idle
            return skipped("blank-input")
        if _CONFIRMATION.search(text):
            # An answer aider gave for the user ("All" earlier), logged as if typed: aider's
            # output (of the command before it, if any), never a prompt.
            self._output(seq, text, previous_command)
            return IMPORTED
        command = _command_name(text)
        if command is None or command in PROMPT_COMMANDS:
            self.turns.prompt(UserMessage(seq, text))
            return IMPORTED
        self.turns.end_after_conversation()  # aider runs a command only while idle
        run = CommandRun(seq, text, "")
        self.turns.ambient(run)
        self.command = run
        return IMPORTED


def _read_lines(path: str, ledger: LineLedger) -> list[str]:
    """The file's complete lines (a last line without a newline is a write in progress)."""
    cap = input_guard.current().line_max_bytes
    lines: list[str] = []
    with input_guard.open_regular(path, LABEL) as stream:
        while True:
            raw = stream.readline(cap + 1 if cap else -1)
            if not raw:
                break
            ledger.bytes_read += len(raw)
            if cap and len(raw) > cap:
                raise input_guard.line_too_long(path, len(lines) + 1, len(raw), cap)
            if not raw.endswith(b"\n"):
                ledger.truncated_tail = True  # aider writes whole lines: this one is mid-write
                break
            text, replaced = decode_counting(raw[:-1].removesuffix(b"\r"))
            ledger.replaced_bytes += replaced
            lines.append(text)
    ledger.lines = len(lines)
    return lines


def _session_id(first_header: str, lines: list[str], path: str) -> str:
    """Stable as the file grows: the first run's start, else a hash of the first line."""
    match = _HEADER.match(first_header) if first_header else None
    if match is not None:
        return "aider-" + "".join(match.groups()[:3]) + "-" + "".join(match.groups()[3:])
    first = next((line for line in lines if line.strip()), Path(path).name)
    return "aider-" + hashlib.sha256(first.encode("utf-8", "replace")).hexdigest()[:12]


class AiderReader:
    """`dsh_chapters.harnesses` entry point `aider`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        text = head.decode("utf-8", "replace")
        return any(_HEADER.match(line.rstrip("\r"))
                   for line in text.split("\n")[:_SNIFF_LINES])

    def read(self, path: str) -> Transcript:
        ledger = LineLedger()
        lines = _read_lines(path, ledger)
        state = _AiderRead()
        recognized = 0
        for block in _blocks(lines, ledger):
            recognized += block.kind != "reply"
            outcome = state.block(block)
            for offset in range(len(block.lines)):
                ledger.record(block.first + offset, outcome)
        if not recognized:
            raise InputError(
                f"{path} is not an {LABEL}: read {len(lines)} complete lines "
                f"({ledger.bytes_read} bytes) and none is an aider run header "
                "(`# aider chat started at …`), a typed line (`#### …`) or aider's output "
                "(`> …`)",
                hint="point at a .aider.chat.history.md file; " + AUTO_HINT)
        return Transcript(
            session_id=_session_id(state.first_header, lines, path),
            harness=NAME,
            events=state.turns.finish(),
            account=ledger.account(),
            cwd=str(Path(os.path.abspath(path)).parent),
            source_path=str(path),
            started_at=state.started_at,
        )

    def watch_roots(self, cwd: str) -> list[Path]:
        """What `chapters watch` watches: the history file itself (never the whole repository)."""
        return history_files(cwd)

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Every history file under `source`, or this project's: `$AIDER_CHAT_HISTORY_FILE`,
        the `chat-history-file` of the project's .aider.conf.yml, else
        `<project>/.aider.chat.history.md`."""
        if source:
            root = Path(source)
            if not root.is_dir():
                return []
            return [str(p) for p in sorted(root.rglob("*.md"))
                    if p.is_file() and self.sniff(read_head(p, 1 << 14))]
        found = [p for p in history_files(cwd) if p.is_file()]
        return [str(p) for p in dict.fromkeys(found)]


def history_files(cwd: str, env: Mapping[str, str] | None = None) -> list[Path]:
    """Where aider writes this project's chat history, in the order aider decides it."""
    env = os.environ if env is None else env
    root = Path(cwd)
    configured = env.get(HISTORY_ENV, "") or _configured(root / CONFIG_FILE)
    if configured:
        path = Path(configured).expanduser()
        return [path if path.is_absolute() else root / path]
    return [root / HISTORY_FILE]


def _configured(config: Path) -> str:
    """`chat-history-file` of an .aider.conf.yml ("" when unset or unreadable)."""
    try:
        data: Any = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return ""
    value = data.get("chat-history-file") if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""
