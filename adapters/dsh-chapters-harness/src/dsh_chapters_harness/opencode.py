"""The OpenCode binding: its session store, and `opencode export` files (docs/formats.md).

Built from OpenCode's own code (anomalyco/opencode, formerly sst/opencode:
`packages/opencode/src/session/message-v2.ts` for the records, `storage/json-migration.ts`
and `session.sql.ts` for where they live, `cli/cmd/export.ts` for the export). A session is
its info `{id, projectID, parentID?, directory, title, version, time}` and its messages, each
an info `{id, role: user|assistant, time: {created, completed?}, finish?, error?, summary?,
…}` with its parts `{id, type, …}`: `text` (`synthetic` when OpenCode wrote it, `ignored`
when a plugin's notice), `reasoning`, `tool` (`{callID, tool, state: {status, input,
output|error}}`), `file`, `agent`, `subtask`, `compaction`, `step-start`, `step-finish`,
`snapshot`, `patch`, `retry`. Three places hold them:

- since 1.2, the SQLite database `~/.local/share/opencode/opencode.db` (tables `session`,
  `message`, `part`; a row's `data` is the record without its ids), read read-only with the
  stdlib `sqlite3`; a session there is named `<database>#<session id>`;
- before, JSON files: `storage/session/<projectID>/<id>.json`, `storage/message/<session
  id>/<id>.json`, `storage/part/<message id>/<id>.json` (a session is named by its file);
- `opencode export <id>`: `JSON.stringify({info, messages: [{info, parts}]}, null, 2)`, one
  document, its lines accounted by position (`json_document`).

Every row, file or line is accounted. A turn starts at a prompt (the user's own text parts)
and is complete at the assistant message that ends OpenCode's loop: completed with a `finish`
other than `tool-calls`/`unknown` (prompt.ts continues on those), or with an error (an
abort). Synthetic text (an attached file's content, reminders, "continue" nudges) and ignored
text are screened as host context; a compaction's summary message becomes its marker.

`seq` is a message's creation time (epoch ms × 1000) plus 1 + the part's index: it survives
a revert (OpenCode deletes reverted messages) and reads the same from all three places.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import InputError
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

from dsh_chapters_harness import input_guard
from dsh_chapters_harness import json_document as doc
from dsh_chapters_harness.discovery import read_head, same_directory
from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    MALFORMED,
    LineLedger,
    Outcome,
    decode_counting,
    not_a_transcript,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "opencode"
LABEL = "OpenCode session"
EXPECTED = (
    'an OpenCode session: `opencode export` JSON {"info": {"id": "ses_…"}, "messages": '
    '[{"info", "parts"}]}, a storage/session/<project>/<id>.json file, or opencode.db#<id>'
)
SQLITE_MAGIC = b"SQLite format 3\x00"
SESSION_MARK = "#"
# prompt.ts: the loop goes on after a step that finished for these reasons (or none).
CONTINUES = frozenset({"tool-calls", "unknown"})
_SKIPPED_PARTS = {
    "step-start": "step-boundary",
    "step-finish": "step-boundary",
    "snapshot": "snapshot",
    "patch": "file-patch",
    "retry": "retry-notice",
    "agent": "agent-mention",
    "file": "file-attachment",
}
_EXPORT_HEAD = re.compile(rb'\A\s*\{\s*"info"\s*:\s*\{\s*"id"\s*:\s*"ses_')
_STORAGE_HEAD = re.compile(rb'\A\s*\{\s*"id"\s*:\s*"ses_')
_SEQ_PER_MS = 1000


def _created(info: Mapping[str, Any]) -> int | None:
    time = info.get("time")
    created = time.get("created") if isinstance(time, dict) else None
    return created if isinstance(created, int) and not isinstance(created, bool) else None


def _iso(ms: int | None) -> str:
    if ms is None:
        return ""
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")\
            .replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class _OpenCodeRead:
    """One session's read: its info, the assembler, how many records were OpenCode's."""

    turns: TurnAssembler = field(default_factory=TurnAssembler)
    session_id: str = ""
    parent_id: str = ""
    cwd: str = ""
    started_at: str = ""
    recognized: int = 0
    last_seq: int = 0

    def session(self, info: Any) -> Outcome:
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            return unknown("session:<no id>")
        self.recognized += 1
        self.session_id = info["id"]
        self.parent_id = _text(info.get("parentID"))
        self.cwd = _text(info.get("directory"))
        self.started_at = _iso(_created(info))
        return IMPORTED

    def message(self, info: Any, parts: list[Any]) -> tuple[Outcome, list[Outcome]]:
        """The outcome of the message's info and of each of its parts, events added."""
        role = info.get("role") if isinstance(info, dict) else None
        if role not in ("user", "assistant"):
            kind = f"message:{role}" if isinstance(role, str) else "message:<no role>"
            return unknown(kind), [unknown(kind) for _ in parts]
        assert isinstance(info, dict)
        self.recognized += 1
        created = _created(info)
        base = max(created * _SEQ_PER_MS if created is not None else 0, self.last_seq + 1)
        self.last_seq = base + len(parts)
        time = _iso(created)
        if role == "user":
            return IMPORTED, self._user(base, time, parts)
        outcomes = self._assistant(base, time, info, parts)
        self._maybe_end(base + len(parts), time, info)
        return IMPORTED, outcomes

    def _user(self, base: int, time: str, parts: list[Any]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        typed = [p for p in parts if isinstance(p, dict) and p.get("type") == "text"
                 and not p.get("synthetic") and not p.get("ignored")]
        prompted = False
        for index, part in enumerate(parts):
            seq = base + 1 + index
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(part, dict) or not isinstance(kind, str):
                outcomes.append(unknown("part:<no type>"))
                continue
            self.recognized += 1
            if kind == "text":
                text = _text(part.get("text"))
                if part.get("ignored") or part.get("synthetic"):
                    which = (InjectionKind.PLUGIN_NOTICE if part.get("ignored")
                             else InjectionKind.RUNTIME_CONTEXT)
                    self.turns.ambient(HostInjection(seq, which, text, time))
                    outcomes.append(IMPORTED)
                elif not text.strip():
                    outcomes.append(skipped("empty-text"))
                else:
                    prompted = self._said(UserMessage(seq, text, time), prompted)
                    outcomes.append(IMPORTED)
            elif kind == "subtask":
                # A command run as a subagent: its prompt is the request (no text part).
                prompt = _text(part.get("prompt"))
                if typed or not prompt.strip():
                    outcomes.append(skipped("subtask-of-prompt"))
                else:
                    prompted = self._said(UserMessage(seq, prompt, time), prompted)
                    outcomes.append(IMPORTED)
            elif kind == "compaction":
                self.turns.ambient(CompactionMarker(seq, "", time))
                outcomes.append(IMPORTED)
            elif kind in _SKIPPED_PARTS:
                outcomes.append(skipped(_SKIPPED_PARTS[kind]))
            else:
                self.recognized -= 1
                outcomes.append(unknown(f"part:{kind}"))
        return outcomes

    def _said(self, message: UserMessage, prompted: bool) -> bool:
        if prompted:
            self.turns.conversation(message)  # a second typed part of the same prompt
        else:
            self.turns.prompt(message)
        return True

    def _assistant(self, base: int, time: str, info: Mapping[str, Any],
                   parts: list[Any]) -> list[Outcome]:
        summary = info.get("summary") is True  # compaction: the summary of what came before
        outcomes: list[Outcome] = []
        for index, part in enumerate(parts):
            seq = base + 1 + index
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(part, dict) or not isinstance(kind, str):
                outcomes.append(unknown("part:<no type>"))
                continue
            self.recognized += 1
            if kind == "text":
                text = _text(part.get("text"))
                if not text.strip():
                    outcomes.append(skipped("empty-text"))
                elif summary:
                    self.turns.ambient(CompactionMarker(seq, text, time))
                    outcomes.append(IMPORTED)
                else:
                    self.turns.conversation(AssistantMessage(seq, text, time))
                    outcomes.append(IMPORTED)
            elif kind == "reasoning":
                text = _text(part.get("text"))
                if not text.strip():
                    outcomes.append(skipped("empty-reasoning"))
                elif summary:
                    outcomes.append(skipped("compaction-reasoning"))
                else:
                    self.turns.conversation(Reasoning(seq, text, time))
                    outcomes.append(IMPORTED)
            elif kind == "tool":
                outcomes.append(self._tool(seq, time, part))
            elif kind in _SKIPPED_PARTS:
                outcomes.append(skipped(_SKIPPED_PARTS[kind]))
            else:
                self.recognized -= 1
                outcomes.append(unknown(f"part:{kind}"))
        return outcomes

    def _tool(self, seq: int, time: str, part: Mapping[str, Any]) -> Outcome:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        assert isinstance(state, dict)
        call_id = _text(part.get("callID")) or _text(part.get("id"))
        arguments = state.get("input", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        self.turns.conversation(ToolCall(seq, call_id, _text(part.get("tool")), arguments, time))
        status = state.get("status")
        if status == "completed":
            self.turns.conversation(ToolResult(seq, call_id, _text(state.get("output")), False,
                                               time))
        elif status == "error":
            self.turns.conversation(ToolResult(seq, call_id, _text(state.get("error")), True,
                                               time))
        return IMPORTED

    def _maybe_end(self, seq: int, time: str, info: Mapping[str, Any]) -> None:
        error = info.get("error")
        if error:
            name = error.get("name") if isinstance(error, dict) else None
            self.turns.end_here(seq, time, "aborted" if name == "MessageAbortedError"
                                else "error")
            return
        completed = info.get("time", {}).get("completed") if isinstance(info.get("time"),
                                                                        dict) else None
        finish = info.get("finish")
        if completed is not None and isinstance(finish, str) and finish not in CONTINUES:
            self.turns.end_after_conversation()

    def transcript(self, path: str, ledger: LineLedger) -> Transcript:
        if self.recognized == 0 or not self.session_id:
            raise not_a_transcript(path, ledger, label=LABEL, expected=EXPECTED)
        return Transcript(
            session_id=self.session_id,
            harness=NAME,
            events=self.turns.finish(),
            account=ledger.account(),
            root_session_id=self.parent_id if self.parent_id != self.session_id else "",
            cwd=self.cwd,
            source_path=path,
            started_at=self.started_at,
        )


# ---- `opencode export` ---------------------------------------------------------------------
def _export_expand(path: doc.Path_) -> bool:
    return (path in ((), ("messages",))
            or (len(path) == 2 and path[0] == "messages")
            or (len(path) == 3 and path[0] == "messages" and path[2] == "parts"))


def _read_export(path: str) -> Transcript:
    ledger = LineLedger()
    state = _OpenCodeRead()
    text = doc.read_document_text(path, LABEL, ledger)
    scan = doc.scan_document(text, _export_expand)
    lines = doc.LineMap(text)
    by_path = {m.path: m for m in scan.members}
    units = sorted((m for m in scan.members if len(m.path) == 2 and m.path[0] == "messages"),
                   key=lambda m: m.start)
    top = [m for m in scan.members if len(m.path) == 1 and m.path[0] != "messages"]
    resume = max([m.end for m in units] or [m.end for m in top] or [0])
    unread = doc.unread_line(scan, lines, resume)
    records: list[doc.Record] = []
    for member in sorted(top, key=lambda m: m.start):
        if not doc.usable(member, lines, unread):
            continue
        if member.path == ("info",):
            value, _ = doc.guarded(member.value, text[member.start:member.end])
            outcome = state.session(value)
        else:
            outcome = skipped("metadata")  # `todos` and anything else beside the messages
        records.append(doc.Record(member.start, member.end, outcome))
    for unit in units:
        if not doc.usable(unit, lines, unread):
            continue
        records.extend(_export_message(state, unit, by_path, text))
    doc.account_lines(scan, lines, records, ledger, unread)
    return state.transcript(path, ledger)


def _export_message(state: _OpenCodeRead, unit: doc.Member, by_path: Mapping[doc.Path_,
                    doc.Member], text: str) -> list[doc.Record]:
    index = unit.path[1]
    info_member = by_path.get(("messages", index, "info"))
    part_members = sorted((m for p, m in by_path.items()
                           if len(p) == 4 and p[:3] == ("messages", index, "parts")),
                          key=lambda m: m.start)
    value, _ = doc.guarded(unit.value, text[unit.start:unit.end])
    if info_member is None or not isinstance(value, dict):
        return [doc.Record(unit.start, unit.end, unknown("message:<no info>"))]
    parts = value.get("parts")
    info_outcome, part_outcomes = state.message(value.get("info"),
                                                list(parts) if isinstance(parts, list) else [])
    records = [doc.Record(info_member.start, info_member.end, info_outcome)]
    records.extend(doc.Record(m.start, m.end, o)
                   for m, o in zip(part_members, part_outcomes, strict=False))
    for key, member in by_path.items():
        if len(key) == 3 and key[:2] == ("messages", index) and key[2] not in ("info", "parts"):
            records.append(doc.Record(member.start, member.end, skipped("metadata")))
    return records


# ---- the SQLite store ----------------------------------------------------------------------
def split_session_path(path: str) -> tuple[str, str] | None:
    """(`<database>`, `<session id>`) for a session named inside OpenCode's database."""
    base, mark, session = path.rpartition(SESSION_MARK)
    if not mark or not session.startswith("ses_") or not base:
        return None
    return base, session


def is_database(path: str | Path) -> bool:
    return read_head(path, len(SQLITE_MAGIC)) == SQLITE_MAGIC


def _connect(database: str) -> sqlite3.Connection:
    """Read-only: we never write OpenCode's store (a WAL database still needs its -shm)."""
    try:
        connection = sqlite3.connect(f"{Path(database).absolute().as_uri()}?mode=ro", uri=True,
                                     timeout=5)
        connection.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise InputError(f"cannot open OpenCode's database {database}: {exc}",
                         hint="check that the file is readable; OpenCode keeps it in "
                              "~/.local/share/opencode") from None
    return connection


def _row_record(row_id: Any, data: Any, ledger: LineLedger) -> Any:
    """A row's `data` JSON as a record, its id put back (the table keeps it in a column)."""
    if isinstance(data, bytes):
        data, replaced = decode_counting(data)
        ledger.replaced_bytes += replaced
    if not isinstance(data, str):
        return None
    try:
        value = input_guard.safe_loads(data)
    except ValueError:
        return None
    value, lone = doc.guarded(value, data)
    ledger.replaced_bytes += lone
    if isinstance(value, dict) and isinstance(row_id, str):
        value.setdefault("id", row_id)
    return value


def _account_message(state: _OpenCodeRead, ledger: LineLedger, number: int, info: Any,
                     parts: list[Any]) -> int:
    """One message record and its part records, read from the database or the JSON storage:
    each is one accounted record after `number`; the last record's number is returned. An
    unreadable message's parts are skipped with it, an unreadable part is malformed."""
    number += 1
    if not isinstance(info, dict):
        ledger.record(number, MALFORMED)
        for _ in parts:
            number += 1
            ledger.record(number, skipped("part-of-unreadable-message"))
        return number
    outcome, outcomes = state.message(info, [p for p in parts if p is not None])
    ledger.record(number, outcome)
    read = iter(outcomes)
    for part in parts:
        number += 1
        ledger.record(number, next(read, IMPORTED) if part is not None else MALFORMED)
    return number


def _read_database(path: str, database: str, session_id: str) -> Transcript:
    """One session of the database: its row, then its messages (by creation time, as OpenCode
    lists them) each with its parts (by id); each row is one accounted record."""
    ledger = LineLedger()
    state = _OpenCodeRead()
    connection = _connect(database)
    try:
        rows = _session_rows(connection, session_id)
    except sqlite3.Error as exc:
        raise InputError(f"{database}: cannot read session {session_id} ({exc})",
                         hint="the database may be from an OpenCode version this reader "
                              "does not know; `opencode export` the session and import the "
                              "file") from None
    finally:
        connection.close()
    if rows is None:
        raise InputError(f"{database} has no session {session_id}",
                         hint="list this project's sessions with `chapters import opencode`")
    session, messages = rows
    number = 1
    ledger.record(number, state.session(session))
    for (message_id, message_data), part_rows in messages:
        info = _row_record(message_id, message_data, ledger)
        parts = [_row_record(i, d, ledger) for i, d in part_rows]
        number = _account_message(state, ledger, number, info, parts)
    ledger.lines = number
    return state.transcript(path, ledger)


Row = tuple[Any, Any]


def _session_rows(connection: sqlite3.Connection, session_id: str
                  ) -> tuple[dict[str, Any], list[tuple[Row, list[Row]]]] | None:
    connection.row_factory = sqlite3.Row
    row = connection.execute("SELECT * FROM session WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        return None
    columns = set(row.keys())
    session: dict[str, Any] = {"id": row["id"]}
    for column, key in (("parent_id", "parentID"), ("directory", "directory"),
                        ("project_id", "projectID"), ("title", "title")):
        if column in columns and row[column] is not None:
            session[key] = row[column]
    if "time_created" in columns:
        session["time"] = {"created": row["time_created"]}
    parts: dict[str, list[Row]] = {}
    for part in connection.execute(
            "SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id",
            (session_id,)):
        parts.setdefault(part["message_id"], []).append((part["id"], part["data"]))
    messages: list[tuple[Row, list[Row]]] = []
    for message in connection.execute(
            "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
            (session_id,)):
        messages.append(((message["id"], message["data"]), parts.get(message["id"], [])))
    return session, messages


def database_sessions(database: str | Path, cwd: str | None) -> list[str]:
    """The session ids of the database (those whose directory or project worktree is `cwd`,
    when given), oldest first."""
    try:
        connection = _connect(str(database))
    except InputError:
        return []
    try:
        connection.row_factory = sqlite3.Row
        rows = connection.execute(
            "SELECT s.id AS id, s.directory AS directory, p.worktree AS worktree "
            "FROM session s LEFT JOIN project p ON p.id = s.project_id "
            "ORDER BY s.time_created, s.id").fetchall()
    except sqlite3.Error:
        return []
    finally:
        connection.close()
    return [row["id"] for row in rows
            if cwd is None or same_directory(row["directory"] or "", cwd)
            or (row["worktree"] not in (None, "", "/") and same_directory(row["worktree"], cwd))]


# ---- the JSON storage before 1.2 ------------------------------------------------------------
def _storage_root(session_file: Path) -> Path | None:
    """`…/storage` for `…/storage/session/<projectID>/<id>.json`."""
    parents = session_file.parents
    if len(parents) >= 3 and parents[1].name == "session":
        return parents[2]
    return None


def _read_json_file(path: Path, ledger: LineLedger) -> Any:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    text, replaced = decode_counting(raw)
    ledger.replaced_bytes += replaced
    ledger.bytes_read += len(raw)
    try:
        value = input_guard.safe_loads(text)
    except ValueError:
        return None
    value, lone = doc.guarded(value, text)
    ledger.replaced_bytes += lone
    return value


def _read_storage(path: str) -> Transcript:
    """A session of the JSON storage: its file, then each message file of the session in id
    order (ids ascend with time) with its part files; each file is one accounted record."""
    file = Path(path)
    ledger = LineLedger()
    state = _OpenCodeRead()
    with input_guard.open_regular(path, LABEL):
        pass  # the same refusals as a session file: a FIFO, a device, a directory
    info = _read_json_file(file, ledger)
    number = 1
    if info is None:
        ledger.record(number, MALFORMED)
    else:
        ledger.record(number, state.session(info))
    root = _storage_root(file)
    session_id = info.get("id") if isinstance(info, dict) else None
    if root is not None and isinstance(session_id, str):
        for message_file in _json_files(root / "message" / session_id):
            message = _read_json_file(message_file, ledger)
            message_id = message.get("id") if isinstance(message, dict) else message_file.stem
            part_files = _json_files(root / "part" / str(message_id))
            parts = [_read_json_file(p, ledger) for p in part_files]
            number = _account_message(state, ledger, number, message, parts)
    ledger.lines = number
    return state.transcript(path, ledger)


def _json_files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.is_file())
    except OSError:
        return []


# ---- the reader ------------------------------------------------------------------------------
def is_export(head: bytes) -> bool:
    return bool(_EXPORT_HEAD.match(head))


def is_storage_session(head: bytes) -> bool:
    return bool(_STORAGE_HEAD.match(head))


class OpenCodeReader:
    """`dsh_chapters.harnesses` entry point `opencode`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        return is_export(head) or is_storage_session(head)

    def read(self, path: str) -> Transcript:
        inside = split_session_path(path)
        if inside is not None and Path(inside[0]).is_file() and is_database(inside[0]):
            return _read_database(path, *inside)
        head = read_head(path, 4096)
        if is_storage_session(head) and _storage_root(Path(path)) is not None:
            return _read_storage(path)
        return _read_export(path)

    def backing_file(self, path: str) -> str:
        """For `chapters watch`: the file whose size and time stand for the session's."""
        return backing_file(path)

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Sessions under `source` (export files, storage session files, and every session of
        an `opencode*.db` there), or this project's in OpenCode's data folder (those whose
        directory, or project worktree, is `cwd`)."""
        if source:
            return list(_found(Path(source), None, self.sniff))
        return list(_found(data_dir(), cwd, self.sniff))


def _found(root: Path, cwd: str | None, sniff: Any) -> Iterator[str]:
    if not root.is_dir():
        return
    for database in sorted(root.glob("opencode*.db")):
        if database.is_file() and is_database(database):
            for session in database_sessions(database, cwd):
                yield f"{database}{SESSION_MARK}{session}"
    storage = root / "storage" / "session"
    if cwd is not None:
        for file in _storage_sessions(storage):
            info = _read_json_file(file, LineLedger())
            if isinstance(info, dict) and same_directory(_text(info.get("directory")), cwd):
                yield str(file)
        return
    for file in sorted(root.rglob("*.json*")):
        if file.suffix in (".json", ".jsonl") and file.is_file() and sniff(read_head(file, 4096)):
            if is_storage_session(read_head(file, 4096)) and _storage_root(file) is None:
                continue
            yield str(file)


def _storage_sessions(storage: Path) -> Iterable[Path]:
    if not storage.is_dir():
        return []
    return sorted(p for p in storage.glob("*/*.json") if p.is_file())


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """OpenCode's data folder: `$XDG_DATA_HOME/opencode`, else `~/.local/share/opencode`
    (global/index.ts, by xdg-basedir)."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME", "")
    return (Path(base).expanduser() if base else Path.home() / ".local" / "share") / "opencode"


def backing_file(path: str) -> str:
    """The file whose writes show a session's: its database's write-ahead log when OpenCode
    keeps one (the database itself changes only at checkpoints), else the file itself."""
    inside = split_session_path(path)
    if inside is None:
        return path
    database = inside[0]
    wal = database + "-wal"
    try:
        if os.stat(wal).st_mtime >= os.stat(database).st_mtime:
            return wal
    except OSError:
        pass
    return database
