"""The Gemini CLI binding: `~/.gemini/tmp/<project>/chats/session-*.json[l]` (docs/formats.md).

Built from Gemini CLI's own writer (`packages/core/src/services/chatRecordingService.ts` and
`chatRecordingTypes.ts`, google-gemini/gemini-cli). A session is a `ConversationRecord`
`{sessionId, projectHash, startTime, lastUpdated, messages, summary?, directories?, kind?}`,
written in one of two ways:

- up to 0.38, one pretty-printed JSON document (`session-<time>-<id8>.json`), rewritten whole
  at every change (its lines are accounted by position: `json_document`);
- from 0.39, JSON lines (`session-<time>-<id8>.jsonl`): the metadata first, then each message
  as it is recorded, again whenever it changes (its tool calls complete, its tokens arrive),
  `{"$set": {...}}` metadata updates (a `messages` checkpoint among them) and
  `{"$rewindTo": id}` when the user rewinds. The last version of a message wins; a rewind or
  a checkpoint never removes a message already read (it stays in the archive, verbatim).

A message is `{id, timestamp, type: user|gemini|info|warning|error, content, displayContent?}`;
a `gemini` one adds `thoughts`, `tokens`, `model` and `toolCalls` (each `{id, name, args,
result: [functionResponse parts], status, resultDisplay, …}`). `info`, `warning` and `error`
are the CLI's own status lines (Gemini leaves them out of the model's history): skipped by a
named rule. Host context is screened: the next-speaker check's "Please continue." (Gemini
writes it as a user message), `<session_context>`/`<hook_context>` blocks, the content of
`@file` references (after the typed words), and the tool responses newer versions echo as
user messages (their results are read from the tool calls).

Gemini writes no end-of-turn record, and a reply can still gain tool calls after it is
written, so a turn is complete when the next prompt arrives; the last one stays in flight
until the session is over (the archive's `sessionFinalAfterMinutes`, or `--final`).

`seq` is the message's own time (epoch ms × 1000) plus the event's place in the message: it
survives a whole-file rewrite, a rewind and the move from `.json` to `.jsonl` unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dsh_chapters_core.events import (
    AssistantMessage,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    UserMessage,
)

from dsh_chapters_harness import json_document as doc
from dsh_chapters_harness.discovery import read_head, same_directory
from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    LineLedger,
    Outcome,
    head_records,
    not_a_transcript,
    read_records,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "gemini-cli"
LABEL = "Gemini CLI session"
EXPECTED = (
    'a Gemini CLI ConversationRecord: JSON {"sessionId", "projectHash", "startTime", '
    '"messages": [...]} (up to 0.38) or JSON lines starting {"sessionId", "projectHash", …}'
)
MESSAGE_TYPES = frozenset({"user", "gemini", "info", "warning", "error"})
UI_NOTICES = frozenset({"info", "warning", "error"})
# Tool statuses after which a call has its result (scheduler/types.ts `CoreToolCallStatus`).
FINISHED = frozenset({"success", "error", "cancelled"})
# client.ts's next-speaker check sends these as user turns when the model stopped mid-task.
CONTINUATIONS = frozenset({"Please continue.", "System: Please continue."})
HOST_BLOCKS = ("<session_context>", "<hook_context>")
# atCommandProcessor.ts appends the referenced files' content after the typed words.
REFERENCED_FILES = "\n--- Content from referenced files ---"
HEADER_FIELDS = frozenset({"sessionId", "projectHash", "startTime"})
# The pretty-printed document: `{`, a newline, then the record's first members.
_LEGACY_HEAD = re.compile(
    rb'\A\s*\{[ \t\r]*\n\s*"sessionId"\s*:\s*"[^"\n]*"\s*,\s*"projectHash"\s*:')
_SNIFF_LINES = 4
_SEQ_PER_MS = 1000  # room for a message's events between two milliseconds


def _epoch_ms(value: Any) -> int | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _parts_text(content: Any, *, thoughts: bool = False) -> str:
    """A PartListUnion's text: a string as is; text parts joined (thought parts only when
    asked); an inline file as a stand-in; function calls and responses left out."""
    if isinstance(content, str):
        return content if not thoughts else ""
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            if not thoughts:
                texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            if bool(part.get("thought")) == thoughts:
                texts.append(part["text"])
        elif not thoughts and isinstance(part.get("inlineData"), dict):
            texts.append(f"[{part['inlineData'].get('mimeType', 'inline data')}]")
        elif not thoughts and isinstance(part.get("fileData"), dict):
            texts.append(f"[{part['fileData'].get('fileUri', 'file')}]")
    return "".join(texts)


def _is_tool_response_echo(content: Any) -> bool:
    """Newer versions record the tool responses sent back to the model as a user message."""
    parts = [content] if isinstance(content, dict) else content
    return (isinstance(parts, list) and bool(parts)
            and all(isinstance(p, dict) and "functionResponse" in p for p in parts))


def _result_text(call: Mapping[str, Any]) -> tuple[str, bool]:
    """A finished call's result as Gemini recorded it for the model (functionResponse output or
    error), else its display text; whether the call failed."""
    failed = call.get("status") != "success"
    texts: list[str] = []
    result = call.get("result")
    for part in result if isinstance(result, list) else [result] if result else []:
        if not isinstance(part, dict):
            continue
        response = part.get("functionResponse")
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict):
                if isinstance(body.get("output"), str):
                    texts.append(body["output"])
                elif isinstance(body.get("error"), str):
                    texts.append(body["error"])
                    failed = True
                else:
                    texts.append(json.dumps(body, ensure_ascii=False))
            continue
        text = _parts_text([part])
        if text:
            texts.append(text)
    if not texts:
        display = call.get("resultDisplay")
        if isinstance(display, str):
            texts.append(display)
        elif display is not None:
            texts.append(json.dumps(display, ensure_ascii=False))
    return "\n".join(texts), failed


@dataclass
class _Message:
    """A message's latest version and where it first appeared."""

    record: dict[str, Any]
    order: int


@dataclass
class _GeminiRead:
    """One read: header fields, the messages in first-appearance order, the assembler."""

    session_id: str = ""
    project_hash: str = ""
    started_at: str = ""
    kind: str = ""
    messages: dict[str, _Message] = field(default_factory=dict)
    recognized: int = 0

    # ---- records ------------------------------------------------------------------------
    def header(self, record: Mapping[str, Any]) -> None:
        if not self.session_id and isinstance(record.get("sessionId"), str):
            self.session_id = record["sessionId"]
        if not self.project_hash and isinstance(record.get("projectHash"), str):
            self.project_hash = record["projectHash"]
        if not self.started_at and isinstance(record.get("startTime"), str):
            self.started_at = record["startTime"]
        if isinstance(record.get("kind"), str):
            self.kind = record["kind"]

    def message(self, record: dict[str, Any], *, replace: bool = True) -> Outcome:
        kind = record.get("type")
        if kind not in MESSAGE_TYPES:
            return unknown(f"message:{kind}" if isinstance(kind, str) else "message:<no type>")
        self.recognized += 1
        known = self.messages.get(record["id"])
        if known is None:
            self.messages[record["id"]] = _Message(record, len(self.messages))
        elif replace:
            known.record = record  # a later version: its tool calls finished, tokens came
        if kind in UI_NOTICES:
            return skipped("ui-notice")
        if kind == "user" and _is_tool_response_echo(record.get("content")):
            return skipped("tool-response-echo")
        return IMPORTED

    def jsonl_line(self, _seq: int, record: dict[str, Any]) -> Outcome:
        if isinstance(record.get("$rewindTo"), str):
            self.recognized += 1
            return skipped("rewind")  # the messages stay: nothing read is ever dropped
        if isinstance(record.get("$set"), dict):
            self.recognized += 1
            update = record["$set"]
            self.header(update)
            checkpoint = update.get("messages")
            if isinstance(checkpoint, list):
                fresh = [m for m in checkpoint if isinstance(m, dict)
                         and isinstance(m.get("id"), str) and m["id"] not in self.messages]
                for item in fresh:
                    self.message(item, replace=False)
                return IMPORTED if fresh else skipped("history-checkpoint")
            return skipped("metadata-update")
        if isinstance(record.get("id"), str):
            return self.message(record)
        if isinstance(record.get("sessionId"), str) and isinstance(record.get("projectHash"), str):
            self.recognized += 1
            first = not self.session_id
            self.header(record)
            held = record.get("messages")  # a whole legacy record written on one line
            for item in held if isinstance(held, list) else []:
                if isinstance(item, dict) and isinstance(item.get("id"), str):
                    self.message(item)
            return IMPORTED if first or held else skipped("metadata-repeat")
        kind = record.get("type")
        return unknown(kind if isinstance(kind, str) else "<no type>")

    # ---- events ---------------------------------------------------------------------------
    def events(self) -> TurnAssembler:
        turns = TurnAssembler()
        last = 0
        for item in sorted(self.messages.values(), key=lambda m: m.order):
            record = item.record
            time = _str(record.get("timestamp"))
            ms = _epoch_ms(time)
            base = max(ms * _SEQ_PER_MS if ms is not None else 0, last + 1)
            last = _MessageEvents(turns, base, time).add(record)
        return turns


class _MessageEvents:
    """The events of one message, at seq `base`, `base + 1`, … in the message's own order."""

    def __init__(self, turns: TurnAssembler, base: int, time: str) -> None:
        self.turns, self.next, self.time = turns, base, time

    def _seq(self) -> int:
        seq = self.next
        self.next += 1
        return seq

    def add(self, record: Mapping[str, Any]) -> int:
        kind = record.get("type")
        if kind == "user":
            self._user(record)
        elif kind == "gemini":
            self._gemini(record)
        return self.next - 1

    def _user(self, record: Mapping[str, Any]) -> None:
        content = record.get("content")
        if _is_tool_response_echo(content):
            return
        text = _parts_text(content)
        shown = record.get("displayContent")
        typed = _parts_text(shown) if shown is not None else ""
        stripped = text.strip()
        if stripped in CONTINUATIONS or stripped.startswith(HOST_BLOCKS):
            self.turns.ambient(HostInjection(self._seq(), InjectionKind.RUNTIME_CONTEXT, text,
                                             self.time))
            return
        context = ""
        if typed and typed != text:
            context = text  # the prompt as sent: typed words plus what the CLI added
            text = typed
        elif REFERENCED_FILES in text:
            text, rest = text.split(REFERENCED_FILES, 1)
            context = REFERENCED_FILES.lstrip("\n") + rest
        if not text.strip():
            if context:
                self.turns.ambient(HostInjection(self._seq(), InjectionKind.RUNTIME_CONTEXT,
                                                 context, self.time))
            return
        self.turns.prompt(UserMessage(self._seq(), text, self.time))
        if context:
            self.turns.ambient(HostInjection(self._seq(), InjectionKind.RUNTIME_CONTEXT,
                                             context, self.time))

    def _gemini(self, record: Mapping[str, Any]) -> None:
        thoughts = record.get("thoughts")
        if isinstance(thoughts, list) and thoughts:
            for thought in thoughts:
                if not isinstance(thought, dict):
                    continue
                subject, description = thought.get("subject"), thought.get("description")
                parts = [p for p in (subject, description) if isinstance(p, str) and p]
                if parts:
                    when = _str(thought.get("timestamp"), self.time)
                    self.turns.conversation(Reasoning(self._seq(), "\n\n".join(parts), when))
        else:
            reasoning = _parts_text(record.get("content"), thoughts=True)
            if reasoning.strip():
                self.turns.conversation(Reasoning(self._seq(), reasoning, self.time))
        text = _parts_text(record.get("content"))
        if text.strip():
            self.turns.conversation(AssistantMessage(self._seq(), text, self.time))
        calls = record.get("toolCalls")
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                continue
            call_id = str(call.get("id") or "")
            when = _str(call.get("timestamp"), self.time)
            arguments = call.get("args", {})
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            self.turns.conversation(ToolCall(self._seq(), call_id, str(call.get("name", "")),
                                             arguments, when))
            if call.get("status") in FINISHED:
                output, failed = _result_text(call)
                self.turns.conversation(ToolResult(self._seq(), call_id, output, failed, when))


# ---- the two file shapes -------------------------------------------------------------------
def _legacy_expand(path: doc.Path_) -> bool:
    return path in ((), ("messages",))


def _read_document(path: str, state: _GeminiRead) -> LineLedger:
    ledger = LineLedger()
    text = doc.read_document_text(path, LABEL, ledger)
    scan = doc.scan_document(text, _legacy_expand)
    lines = doc.LineMap(text)
    units = [m for m in scan.members if len(m.path) == 2 and m.path[0] == "messages"]
    top = [m for m in scan.members if len(m.path) == 1 and m.path[0] != "messages"]
    resume = max([m.end for m in units] or [m.end for m in top] or [0])
    unread = doc.unread_line(scan, lines, resume)
    records: list[doc.Record] = []
    for member in sorted((*top, *units), key=lambda m: m.start):
        if not doc.usable(member, lines, unread):
            continue
        value, _ = doc.guarded(member.value, text[member.start:member.end])
        if len(member.path) == 1:
            outcome = _header_field(state, str(member.path[0]), value)
        elif isinstance(value, dict) and isinstance(value.get("id"), str):
            outcome = state.message(value)
        else:
            outcome = unknown("message:<not an object>")
        records.append(doc.Record(member.start, member.end, outcome))
    doc.account_lines(scan, lines, records, ledger, unread)
    if state.recognized == 0:
        raise not_a_transcript(path, ledger, label=LABEL, expected=EXPECTED)
    return ledger


def _header_field(state: _GeminiRead, key: str, value: Any) -> Outcome:
    state.recognized += 1
    if key in HEADER_FIELDS or key == "kind":
        state.header({key: value})
        return IMPORTED if key in HEADER_FIELDS else skipped("metadata")
    return skipped("metadata")  # lastUpdated, summary, directories, memoryScratchpad


def is_document(head: bytes) -> bool:
    """The pre-0.39 session: one pretty-printed JSON document whose first members are
    sessionId and projectHash (JSON.stringify keeps the record's key order). A record on one
    line is read as JSON lines, as Gemini's own loader does."""
    return bool(_LEGACY_HEAD.match(head))


def _is_jsonl_record(record: Mapping[str, Any]) -> bool:
    return isinstance(record.get("sessionId"), str) and isinstance(record.get("projectHash"),
                                                                   str)


class GeminiCliReader:
    """`dsh_chapters.harnesses` entry point `gemini-cli`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        if is_document(head):
            return True
        return any(_is_jsonl_record(r) for r in head_records(head, limit=_SNIFF_LINES))

    def read(self, path: str) -> Transcript:
        state = _GeminiRead()
        if is_document(read_head(path, 4096)):
            ledger = _read_document(path, state)
        else:
            ledger = read_records(path, state.jsonl_line, label=LABEL, expected=EXPECTED)
            if state.recognized == 0:
                raise not_a_transcript(path, ledger, label=LABEL, expected=EXPECTED)
        file = Path(path)
        session_id = state.session_id or _id_from_name(file)
        root = ""
        if state.kind == "subagent" and file.parent.name != "chats":
            root = file.parent.name  # chats/<parent session id>/<id>.jsonl
        return Transcript(
            session_id=session_id,
            harness=NAME,
            events=state.events().finish(),  # the last turn ends at the next prompt
            account=ledger.account(),
            root_session_id=root if root != session_id else "",
            cwd=_project_root(file),
            source_path=str(path),
            started_at=state.started_at,
        )

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Session files under `source`, or this project's under `~/.gemini/tmp` (see
        `project_chats`); a `.json` whose `.jsonl` exists was migrated into it, so only the
        `.jsonl` is read."""
        roots = [Path(source)] if source else project_chats(cwd)
        found: set[Path] = set()
        for root in roots:
            if not root.is_dir():
                continue
            for file in root.rglob("*.json*"):
                if file.suffix in (".json", ".jsonl") and file.is_file():
                    found.add(file)
        files = sorted(f for f in found if not (f.suffix == ".json"
                                                 and f.with_suffix(".jsonl") in found))
        # In this project's folders every session is the project's: no header to check.
        return [str(f) for f in files if self.sniff(read_head(f, 4096))]


def gemini_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$GEMINI_CLI_HOME/.gemini`, else `~/.gemini` (paths.ts `homedir()`)."""
    env = os.environ if env is None else env
    home = env.get("GEMINI_CLI_HOME", "")
    return (Path(home).expanduser() if home else Path.home()) / ".gemini"


def project_hash(project_root: str) -> str:
    """paths.ts `getProjectHash`: the SHA-256 of the project root, hex."""
    return hashlib.sha256(project_root.encode("utf-8")).hexdigest()


def project_chats(cwd: str, env: Mapping[str, str] | None = None) -> list[Path]:
    """The `chats/` folders of the project at `cwd`: `tmp/<sha256 of the root>/chats` (before
    the project registry), and `tmp/<short id>/chats` where `projects.json` maps the root to
    that id or the folder's `.project_root` marker names the root (projectRegistry.ts)."""
    base = gemini_dir(env)
    tmp = base / "tmp"
    names = {project_hash(cwd), project_hash(os.path.realpath(cwd))}
    try:
        registry = json.loads((base / "projects.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        registry = {}
    projects = registry.get("projects") if isinstance(registry, dict) else None
    if isinstance(projects, dict):
        names |= {slug for root, slug in projects.items()
                  if isinstance(slug, str) and same_directory(str(root), cwd)}
    if tmp.is_dir():
        for folder in tmp.iterdir():
            marker = folder / ".project_root"
            try:
                owner = marker.read_text(encoding="utf-8").strip()
            except OSError:
                continue
            if owner and same_directory(owner, cwd):
                names.add(folder.name)
    return [tmp / name / "chats" for name in sorted(names) if "/" not in name and name]


def _project_root(file: Path) -> str:
    """The project a session belongs to, from its folder's `.project_root` marker (written by
    the project registry; "" for the older hash-named folders, which record no path)."""
    for folder in (file.parent, *file.parents[:3]):
        if folder.name == "chats":
            try:
                return (folder.parent / ".project_root").read_text(encoding="utf-8").strip()
            except OSError:
                return ""
    return ""


def _id_from_name(path: Path) -> str:
    """`session-2026-01-10T02-08-faff42ab.json` → `faff42ab`; a subagent's `<id>.jsonl` → id."""
    stem = path.stem
    return stem.rsplit("-", 1)[-1] if stem.startswith("session-") else stem
