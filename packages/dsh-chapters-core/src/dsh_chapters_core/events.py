"""The harness-neutral event model every binding converts into.

A binding (DSH log, Claude Code, Codex) owns the quirks of its format; the core sees only these
frozen records. `seq` is the binding's monotonic position of the event in its source, so that a
chapter can cite the exact span it covers (`seqRange`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias


class InjectionKind(enum.StrEnum):
    """Host-injected context (amendment 2026-09-21): re-derivable state, never conversation."""

    INSTRUCTIONS = "instructions"
    SKILL_CATALOG = "skill-catalog"
    RUNTIME_CONTEXT = "runtime-context"
    PLUGIN_NOTICE = "plugin-notice"


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A message the user sent, verbatim, at its position in the source."""

    seq: int
    text: str
    time: str = ""


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A reply the assistant wrote, verbatim, at its position in the source."""

    seq: int
    text: str
    time: str = ""


@dataclass(frozen=True, slots=True)
class Reasoning:
    """The assistant's reasoning text, as the harness recorded it."""

    seq: int
    text: str
    time: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool the assistant called: the call's id, the tool's name and its arguments."""

    seq: int
    call_id: str
    name: str
    arguments: str  # the call's arguments as the harness recorded them (usually JSON text)
    time: str = ""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returned (matched to its call by `call_id`), and whether it was an error."""

    seq: int
    call_id: str
    text: str
    is_error: bool = False
    time: str = ""


@dataclass(frozen=True, slots=True)
class TurnStart:
    """The harness marked the start of a turn."""

    seq: int
    time: str = ""


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """The harness marked the end of a turn; `reason` says why when it did not complete normally."""

    seq: int
    time: str = ""
    reason: str = ""  # why the harness ended the turn when not a normal completion ("aborted")


@dataclass(frozen=True, slots=True)
class HostInjection:
    """Context the host injected into the session (instructions, a skill catalog, runtime context or
    a plugin notice): re-derivable state, never conversation."""

    seq: int
    kind: InjectionKind
    text: str
    time: str = ""


@dataclass(frozen=True, slots=True)
class CompactionMarker:
    """A marker the harness's records leave in the conversation: a compaction (the default,
    with its summary), or another `kind` in words a chapter shows (Claude Code's summary of
    what happened while the user was away, a Codex rollback naming the turns it undid). The
    chapter shows `— <kind> at seq N —` where it fell; it is never a turn of its own."""

    seq: int
    text: str = ""
    time: str = ""
    kind: str = "compaction"


@dataclass(frozen=True, slots=True)
class PullRequestLink:
    """A pull request the harness linked to the session (Claude Code `pr-link`): metadata of the
    chapter it falls in (`prLinks`), never conversation."""

    seq: int
    url: str
    time: str = ""


@dataclass(frozen=True, slots=True)
class CommandRun:
    """A host command and its output (§7.2): never conversation, never chapter content."""

    seq: int
    command: str
    output: str = ""
    time: str = ""


Event: TypeAlias = (
    UserMessage
    | AssistantMessage
    | Reasoning
    | ToolCall
    | ToolResult
    | TurnStart
    | TurnEnd
    | HostInjection
    | CompactionMarker
    | CommandRun
    | PullRequestLink
)


class LineClass(enum.StrEnum):
    """What became of one input line. Every line is accounted for (issue: a peer lost sessions)."""

    IMPORTED = "imported"
    SKIPPED = "skipped"  # skipped by a named rule, see LineAccount.skip_rules
    UNKNOWN = "unknown"
    MALFORMED = "malformed"


@dataclass(frozen=True, slots=True)
class LineAccount:
    """The per-class count of a transcript's lines, with the named skip rules and bad lines."""

    imported: int = 0
    skipped: int = 0
    unknown: int = 0
    malformed: int = 0
    truncated_tail: bool = False  # a live session's partial last line stopped the read
    replaced_bytes: int = 0  # non-UTF-8 bytes turned into U+FFFD
    skip_rules: tuple[tuple[str, int], ...] = ()  # (rule name, count), sorted by name
    unknown_types: tuple[tuple[str, int], ...] = ()  # (record type, count), sorted by name
    malformed_lines: tuple[int, ...] = ()  # 1-based line numbers
    # Lines that held several complete records with no newline between them (Claude Code
    # writes some): each record was read; the line is counted here, once, not as malformed.
    split: int = 0
    split_lines: tuple[int, ...] = ()  # 1-based line numbers
    split_records: int = 0  # records read from those lines
    # Side files (a tool output the harness moved next to its log) refused unread: a FIFO, a
    # device, a symlink, a file outside the session folder or over readerSideFileMaxBytes.
    # The result keeps the stub the log holds.
    side_files_refused: int = 0

    @property
    def total(self) -> int:
        return self.imported + self.skipped + self.unknown + self.malformed + self.split


@dataclass(frozen=True, slots=True)
class Transcript:
    """One session as a binding read it: events in order, plus the line accounting."""

    session_id: str
    harness: str  # binding name: "dsh" | "claude-code" | "codex" | a plugin's
    events: tuple[Event, ...]
    account: LineAccount
    root_session_id: str = ""  # the session a fork or continuation descends from; "" = itself
    cwd: str = ""
    source_path: str = ""
    started_at: str = ""
    git_branch: str = ""  # the branch the session started on, where the harness records it
    harness_version: str = ""  # the version of the harness that wrote the file (its newest)
    title: str = ""  # the session's own name, when the harness records one (a Codex thread)

    @property
    def root_id(self) -> str:
        return self.root_session_id or self.session_id
