"""The Cursor binding: agent transcripts under `~/.cursor/projects/<slug>/agent-transcripts/`,
and the IDE's chats in its `state.vscdb` (cursor_composer.py) (docs/formats.md).

The `cursor-agent` CLI writes `<conversation id>.jsonl` there, the IDE `<id>/<id>.jsonl`; `<slug>`
is the project's path without its leading `/`, every other character that is not a letter or
a digit made `-`. A line is `{"role": "user"|"assistant", "message": {"content": [blocks]}}`
(`text` and `tool_use` `{name, input}` blocks: no ids, no times, no tool results) or
`{"type": "turn_ended", "status": "success"|"error"|"aborted", "error"?}`.

Cursor wraps what the user typed: `<timestamp>Wednesday, Aug 5, 2026, 5:58 PM (UTC+5:30)
</timestamp>` (the prompt's time), then `<user_query>\\n…\\n</user_query>`: the words inside are
the prompt. Anything else in the record is host context: the instructions a button writes
("Commit and push for this branch…"), tool catalogs, and the `<user_query>` Cursor sends itself
when a background task ends (its text follows the tag without a newline). A prompt record sent
again while its turn runs (same bytes) is skipped.

A turn ends at its `turn_ended`, or at the next prompt (long stretches of real transcripts have
no `turn_ended`). The IDE's chats in the database carry the rest of what the IDE shows (tool
results, reasoning); a chat whose transcript holds only turn markers is read from there.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import InputError
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

from dsh_chapters_harness import cursor_composer
from dsh_chapters_harness.discovery import jsonl_files, read_head, same_directory
from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    Outcome,
    head_records,
    read_records,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "cursor"
LABEL = "Cursor agent transcript"
EXPECTED = (
    'JSON lines {"role": "user"|"assistant", "message": {"content": [...]}} and '
    '{"type": "turn_ended", "status"}, or a Cursor state.vscdb chat (`state.vscdb#<chat id>`)'
)
TRANSCRIPTS = "agent-transcripts"
SUBAGENTS = "subagents"
_QUERY = re.compile(r"<user_query>([\s\S]*?)</user_query>")
_TIMESTAMP = re.compile(r"<timestamp>([^<]*)</timestamp>\n?")
_STAMP = re.compile(
    r"(?:\w+, )?(?P<month>[A-Z][a-z]{2})[a-z]* (?P<day>\d{1,2}), (?P<year>\d{4}), "
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))? ?(?P<half>AM|PM)"
    r"(?: \(UTC(?:(?P<sign>[+-])(?P<oh>\d{1,2})(?::(?P<om>\d{2}))?)?\))?"
)
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_TAGGED = re.compile(r"\A\s*<[a-z_]+[\s>]")
_TURN_END_REASONS = {"success": "", "completed": "", "aborted": "aborted",
                     "cancelled": "aborted"}
_SNIFF_LINES = 8


def project_slug(cwd: str) -> str:
    """Cursor's folder name for a project: the path without its leading separator, every
    character that is not a letter or a digit made `-`."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd.lstrip("/\\"))


def cursor_home(env: Mapping[str, str] | None = None) -> Path:
    """Where the Cursor agent keeps its projects: ~/.cursor."""
    env = os.environ if env is None else env
    return Path(env.get("HOME") or Path.home()) / ".cursor"


def prompt_time(stamp: str) -> str:
    """Cursor's `Wednesday, Aug 5, 2026, 5:58 PM (UTC+5:30)` as ISO 8601 ("" if unreadable)."""
    match = _STAMP.search(stamp)
    if match is None or match["month"] not in _MONTHS:
        return ""
    hour = int(match["hour"]) % 12 + (12 if match["half"] == "PM" else 0)
    offset = timedelta(hours=int(match["oh"] or 0), minutes=int(match["om"] or 0))
    zone = timezone(-offset if match["sign"] == "-" else offset)
    try:
        moment = datetime(int(match["year"]), _MONTHS[match["month"]], int(match["day"]), hour,
                          int(match["minute"]), int(match["second"] or 0), tzinfo=zone)
    except ValueError:
        return ""
    return moment.isoformat()


def _blocks(message: Any) -> list[dict[str, Any]] | None:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return None


class _TranscriptRead:
    """The state of one read of an agent transcript."""

    def __init__(self) -> None:
        self.turns = TurnAssembler()
        self.prompt_record = ""  # the raw text of the open turn's prompt record
        self.started_at = ""
        self.conversation_lines = 0  # lines that are not turn markers

    def handle(self, seq: int, record: dict[str, Any]) -> Outcome:
        role = record.get("role")
        if role in ("user", "assistant"):
            blocks = _blocks(record.get("message"))
            if blocks is None:
                return unknown(f"{role}:no-content")
            self.conversation_lines += 1
            return self._user(seq, blocks) if role == "user" else self._assistant(seq, blocks)
        kind = record.get("type")
        if kind == "turn_ended":
            return self._turn_ended(seq, record)
        return unknown(kind if isinstance(kind, str) else f"role:{role}")

    def _user(self, seq: int, blocks: list[dict[str, Any]]) -> Outcome:
        results = [b for b in blocks if b.get("type") == "tool_result"]
        for block in results:  # not in transcripts seen so far; read as Claude Code writes them
            self.turns.conversation(ToolResult(seq, str(block.get("tool_use_id", "")),
                                               _result_text(block.get("content")),
                                               block.get("is_error") is True))
        texts = [b["text"] for b in blocks if b.get("type") == "text"
                 and isinstance(b.get("text"), str)]
        images = sum(1 for b in blocks if b.get("type") == "image")
        raw = "\n\n".join(texts)
        if not raw.strip() and not images:
            return IMPORTED if results else skipped("empty-message")
        if self.turns.turn_open and raw == self.prompt_record:
            return skipped("repeated-prompt")  # Cursor sent the running turn's prompt again
        query = _QUERY.search(raw)
        stamp = _TIMESTAMP.search(raw, 0, query.start() if query else len(raw))
        time = prompt_time(stamp.group(1)) if stamp else ""
        if time and not self.started_at:
            self.started_at = time
        if query is None:
            if _TAGGED.match(raw) or not raw.strip():
                if raw.strip():
                    self.turns.ambient(
                        HostInjection(seq, InjectionKind.RUNTIME_CONTEXT, raw, time))
                return IMPORTED if raw.strip() or results else skipped("empty-message")
            words = raw  # a prompt Cursor did not wrap
        elif query.group(1).startswith("\n"):
            words = query.group(1)[1:].removesuffix("\n")
            before = raw[:query.start()]
            if stamp is not None:
                before = before[:stamp.start()] + before[stamp.end():]
            rest = before + raw[query.end():]
            if rest.strip():  # what a button or the IDE put around the user's words
                self.turns.ambient(HostInjection(seq, InjectionKind.RUNTIME_CONTEXT,
                                                 rest.strip("\n"), time))
        else:
            # Cursor's own follow-up when a background task ended: host context that makes the
            # agent go on, never the user's words.
            self.turns.ambient(HostInjection(seq, InjectionKind.RUNTIME_CONTEXT, raw, time))
            return IMPORTED
        if images:
            words = "\n\n".join(p for p in (words, *["[image]"] * images) if p)
        self.prompt_record = raw
        self.turns.prompt(UserMessage(seq, words, time))
        return IMPORTED

    def _assistant(self, seq: int, blocks: list[dict[str, Any]]) -> Outcome:
        emitted = False
        for index, block in enumerate(blocks):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                self.turns.conversation(AssistantMessage(seq, block["text"]))
            elif kind in ("thinking", "reasoning"):
                text = block.get("thinking", block.get("text"))
                if not isinstance(text, str) or not text.strip():
                    continue
                self.turns.conversation(Reasoning(seq, text))
            elif kind == "tool_use":
                call_id = block.get("id")
                call_id = call_id if isinstance(call_id, str) and call_id else \
                    f"cursor-{seq}-{index}"
                arguments = block.get("input", {})
                self.turns.conversation(ToolCall(
                    seq, call_id, str(block.get("name", "")),
                    arguments if isinstance(arguments, str)
                    else json.dumps(arguments, ensure_ascii=False)))
            else:
                continue
            emitted = True
        return IMPORTED if emitted else skipped("empty-message")

    def _turn_ended(self, seq: int, record: dict[str, Any]) -> Outcome:
        if not self.turns.turn_open:
            return skipped("turn-end-when-idle")  # a second close of a turn already over
        status = record.get("status")
        reason = _TURN_END_REASONS.get(status, "error") if isinstance(status, str) else "error"
        error = record.get("error")
        if reason == "error" and isinstance(error, str) and "abort" in error.lower():
            reason = "aborted"  # Esc in the CLI: `error` "User aborted request"
        self.turns.end_here(seq, reason=reason)
        return IMPORTED


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(b["text"] for b in content
                           if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _is_cursor_record(record: dict[str, Any]) -> bool:
    if record.get("type") == "turn_ended" and "status" in record:
        return True
    # Exactly Cursor's two keys: Claude Code's records carry `type`, uuids and times too.
    return (record.get("role") in ("user", "assistant") and set(record) == {"role", "message"}
            and isinstance(record.get("message"), dict) and "content" in record["message"]
            and set(record["message"]) <= {"content", "role"})


def _parent_chat(path: Path) -> str:
    """A sub-agent's transcript (`…/<chat id>/subagents/<id>.jsonl`): the chat that ran it."""
    if path.parent.name != SUBAGENTS:
        return ""
    owner = path.parent.parent
    return owner.name if owner.name != TRANSCRIPTS else ""


def _has_conversation(path: Path) -> bool:
    """Whether a transcript holds messages, not only the turn markers the IDE writes."""
    return any(line.lstrip().startswith(b'{"role"') for line in read_head(path).splitlines())


class CursorReader:
    """`dsh_chapters.harnesses` entry point `cursor`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        if cursor_composer.is_cursor_db(head):
            return True
        return any(_is_cursor_record(r) for r in head_records(head, limit=_SNIFF_LINES))

    def read(self, path: str) -> Transcript:
        db, composer_id = cursor_composer.split_selector(path)
        if composer_id:
            return cursor_composer.read_chat(db, composer_id, path)
        if cursor_composer.is_cursor_db(read_head(path)):
            return self._whole_database(path)
        state = _TranscriptRead()
        ledger = read_records(path, state.handle, label=LABEL, expected=EXPECTED)
        file = Path(path)
        parent = _parent_chat(file)
        return Transcript(
            session_id=file.stem,
            harness=NAME,
            events=state.turns.finish(),
            account=ledger.account(),
            root_session_id=parent,
            source_path=str(path),
            started_at=state.started_at,
        )

    def _whole_database(self, path: str) -> Transcript:
        """A database named without a chat: read it when it holds one chat, else say which."""
        chats = cursor_composer.list_composers(path)
        if len(chats) == 1:
            return cursor_composer.read_chat(path, chats[0].composer_id,
                                             cursor_composer.chat_path(path, chats[0].composer_id))
        shown = ", ".join(c.composer_id for c in chats[:3]) + (", …" if len(chats) > 3 else "")
        raise InputError(
            f"{path} is a Cursor database holding {len(chats)} chats"
            + (f" ({shown})" if chats else "") + "; a session is one chat",
            hint="run `chapters import cursor --source DIR` for every chat under DIR, or "
                 "archive one as PATH#<chat id> with --harness cursor")

    def watch_roots(self, cwd: str) -> list[Path]:
        """What `chapters watch` watches: the agent's project folders and the IDE's
        globalStorage folder (its database and write-ahead log)."""
        return [cursor_home() / "projects", cursor_composer.global_db().parent]

    def backing_file(self, path: str) -> str:
        """For `chapters import` and `watch`: the file whose size and time stand for a
        session's (an IDE chat's are its database's)."""
        return cursor_composer.backing_file(path)

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Transcripts and IDE chats under `source`, or this project's: the transcripts under
        ~/.cursor/projects/<slug>/agent-transcripts/ and the chats of the IDE's global
        database whose folder is this project."""
        if source:
            root = Path(source)
            transcripts = [p for p in jsonl_files(root)
                           if self.sniff(read_head(p, 1 << 16))]
            databases = sorted(p for p in root.rglob(cursor_composer.DB_NAME) if p.is_file()) \
                if root.is_dir() else []
            return _merge(transcripts, [(db, c) for db in databases
                                        for c in _chats(db, cwd="")])
        transcripts = []
        for spelling in dict.fromkeys((os.path.abspath(cwd), os.path.realpath(cwd))):
            folder = cursor_home() / "projects" / project_slug(spelling) / TRANSCRIPTS
            transcripts.extend(p for p in _ordered(folder) if p not in transcripts)
        db = cursor_composer.global_db()
        return _merge(transcripts, [(db, c) for c in _chats(db, cwd)])


def _chats(db: Path, cwd: str) -> list[cursor_composer.Composer]:
    if not db.is_file():
        return []
    try:
        chats = cursor_composer.list_composers(db)
    except InputError:
        return []  # an unreadable database hides its chats, never the transcripts
    if not cwd:
        return chats
    return [c for c in chats
            if same_directory(c.workspace, cwd) or any(same_directory(r, cwd)
                                                       for r in c.repositories)]


def _ordered(folder: Path) -> list[Path]:
    """A project's transcripts, each chat followed by its sub-agents."""
    def order(path: Path) -> tuple[str, ...]:
        parent = _parent_chat(path)
        return (parent, "1", path.name) if parent else (path.stem, "0", path.name)

    return sorted(jsonl_files(folder), key=order)


def _merge(transcripts: list[Path],
           chats: list[tuple[Path, cursor_composer.Composer]]) -> list[str]:
    """Each conversation once: a transcript that holds messages wins over the IDE's chat of
    the same id; a transcript of turn markers only gives way to the chat."""
    chat_ids = {c.composer_id for _, c in chats}
    kept: list[str] = []
    transcript_ids: set[str] = set()
    for path in transcripts:
        if path.stem in chat_ids and not _has_conversation(path):
            continue
        kept.append(str(path))
        transcript_ids.add(path.stem)
    kept.extend(cursor_composer.chat_path(db, c.composer_id) for db, c in chats
                if c.composer_id not in transcript_ids)
    return kept
