"""Cursor's IDE conversations in `globalStorage/state.vscdb`, read-only, with the stdlib sqlite3.

The IDE keeps a composer (a chat) in the `cursorDiskKV` table of its global database:
`composerData:<composerId>` holds the chat's metadata and the order of its messages
(`fullConversationHeadersOnly`, `{bubbleId, type}` with type 1 the user, 2 the assistant), and
`bubbleId:<composerId>:<bubbleId>` holds one message ("bubble"): its `text`, `thinking.text`,
and for a tool call `toolFormerData` (`name`, `toolCallId`, `rawArgs`, `params`, `result`,
`status`). Chats of older releases keep their bubbles inline (`conversation`, or
`conversationMap` by bubble id). Cursor is closed source; these keys are what its databases hold
(docs/formats.md names the sources).

A database is not lines, so its records are counted as lines are: record 1 is the
`composerData` row and record N + 1 the chat's N-th bubble, in the chat's own order, each
imported, skipped by a named rule, unknown or malformed. The database is opened read-only
(`mode=ro`): Cursor may be writing to it, and nothing here ever writes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    UserMessage,
)

from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    MALFORMED,
    LineLedger,
    Outcome,
    decode_counting,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

DB_NAME = "state.vscdb"
SQLITE_MAGIC = b"SQLite format 3\x00"
TABLE = b"cursorDiskKV"
COMPOSER_PREFIX = "composerData:"
BUBBLE_PREFIX = "bubbleId:"
SELECTOR = "#"  # `<state.vscdb>#<composerId>`: one chat of a database, as a session "path"
USER, ASSISTANT = 1, 2
# Composer statuses of a chat still being answered: its last turn is not over yet.
_GENERATING = frozenset({"generating", "loading"})
_BUSY_MS = 2000  # how long a read waits for Cursor's write lock before giving up


@dataclass(frozen=True, slots=True)
class Composer:
    """One chat of a database, as discovery sees it."""

    composer_id: str
    workspace: str  # the folder the chat was opened in ("" when the chat does not say)
    repositories: tuple[str, ...]
    messages: int


def cursor_user_dir(env: Mapping[str, str] | None = None) -> Path:
    """The IDE's user data folder (VS Code's layout): macOS `~/Library/Application Support`,
    Windows `%APPDATA%`, elsewhere `$XDG_CONFIG_HOME` (default ~/.config), then `Cursor/User`."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"
    else:
        base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return base / "Cursor" / "User"


def global_db(env: Mapping[str, str] | None = None) -> Path:
    return cursor_user_dir(env) / "globalStorage" / DB_NAME


def is_cursor_db(head: bytes) -> bool:
    """A SQLite file whose schema (on its first page) names Cursor's `cursorDiskKV` table."""
    return head.startswith(SQLITE_MAGIC) and TABLE in head


def split_selector(path: str) -> tuple[str, str]:
    """(database path, composer id) of `<db>#<id>`; (path, "") for a plain path."""
    base, sep, composer = path.rpartition(SELECTOR)
    if sep and composer and not os.path.exists(path) and Path(base).name == DB_NAME:
        return base, composer
    return path, ""


def chat_path(db: str | Path, composer_id: str) -> str:
    return f"{db}{SELECTOR}{composer_id}"


def backing_file(path: str) -> str:
    """The file whose writes show a chat's: the database's write-ahead log when it is the
    newer (SQLite writes there first), else the database; a transcript is its own file."""
    db, composer_id = split_selector(path)
    if not composer_id:
        return path
    wal = db + "-wal"
    try:
        if os.stat(wal).st_mtime >= os.stat(db).st_mtime:
            return wal
    except OSError:
        pass
    return db


@contextmanager
def _readonly(db: str) -> Iterator[sqlite3.Connection]:
    """The database opened read-only; an unreadable one is an InputError with a next step."""
    uri = Path(db).absolute().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_MS / 1000)
    except sqlite3.Error as exc:
        raise InputError(f"{db}: cannot open the Cursor database read-only ({exc})",
                         hint="check the path; Cursor keeps it under "
                              "<user data>/Cursor/User/globalStorage/state.vscdb") from None
    try:
        with closing(conn):
            yield conn
    except sqlite3.Error as exc:
        raise InputError(f"{db}: the Cursor database could not be read ({exc})",
                         hint="retry once Cursor has finished writing, or close Cursor") from None


def _load(raw: Any) -> tuple[Any, int]:
    """A stored JSON value (TEXT or BLOB), its non-UTF-8 bytes counted; ValueError if bad."""
    if raw is None:
        return None, 0
    text, replaced = decode_counting(raw) if isinstance(raw, bytes) else (str(raw), 0)
    return json.loads(text), replaced


_SUMMARY = """
SELECT key,
       json_extract(CAST(value AS TEXT), '$.workspaceIdentifier.uri.fsPath'),
       json_extract(CAST(value AS TEXT), '$.trackedGitRepos'),
       COALESCE(json_array_length(CAST(value AS TEXT), '$.fullConversationHeadersOnly'), 0),
       COALESCE(json_array_length(CAST(value AS TEXT), '$.conversation'), 0)
FROM cursorDiskKV WHERE key >= ? AND key < ?
"""


def list_composers(db: str | Path) -> list[Composer]:
    """Every chat of the database that holds at least one message.

    A chat's row can hold megabytes (file states, code blocks): SQLite's JSON functions read
    the few fields discovery needs in place. A database where they fail (no JSON support, a
    row that is not JSON) is read row by row instead, skipping the rows that do not parse."""
    with _readonly(str(db)) as conn:
        bounds = (COMPOSER_PREFIX, COMPOSER_PREFIX + "\uffff")
        try:
            rows = conn.execute(_SUMMARY, bounds).fetchall()
        except sqlite3.OperationalError:
            return _list_composers_slowly(conn, bounds)
    found: list[Composer] = []
    for key, workspace, repos_json, headers, inline in rows:
        count = headers or inline
        if not count:
            continue
        try:
            repos = json.loads(repos_json) if isinstance(repos_json, str) else []
        except ValueError:
            repos = []
        _, paths = _places({"trackedGitRepos": repos})
        found.append(Composer(key[len(COMPOSER_PREFIX):],
                              workspace if isinstance(workspace, str) else "", paths, count))
    return found


def _list_composers_slowly(conn: sqlite3.Connection, bounds: tuple[str, str]) -> list[Composer]:
    found: list[Composer] = []
    for key, raw in conn.execute("SELECT key, value FROM cursorDiskKV WHERE key >= ? AND key < ?",
                                 bounds):
        try:
            data, _ = _load(raw)
        except ValueError:
            continue
        count = len(_order(data)) if isinstance(data, dict) else 0
        if count:
            workspace, repos = _places(data)
            found.append(Composer(key[len(COMPOSER_PREFIX):], workspace, repos, count))
    return found


def _places(data: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    identifier = data.get("workspaceIdentifier")
    workspace = ""
    if isinstance(identifier, dict) and isinstance(identifier.get("uri"), dict):
        fs_path = identifier["uri"].get("fsPath")
        workspace = fs_path if isinstance(fs_path, str) else ""
    repos = data.get("trackedGitRepos")
    paths = tuple(r["repoPath"] for r in repos if isinstance(r, dict)
                  and isinstance(r.get("repoPath"), str)) if isinstance(repos, list) else ()
    return workspace, paths


def _order(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat's messages in order: the headers of current releases, else the inline list."""
    for key in ("fullConversationHeadersOnly", "conversation"):
        items = data.get(key)
        if isinstance(items, list) and items:
            return [item for item in items if isinstance(item, dict)]
    return []


def _iso_ms(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return datetime.fromtimestamp(value / 1000, UTC).isoformat().replace("+00:00", "Z")
    return ""


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


class _ChatRead:
    """One chat's bubbles into events, each counted as a line."""

    def __init__(self, ledger: LineLedger) -> None:
        self.ledger = ledger
        self.turns = TurnAssembler()

    def bubble(self, seq: int, header: dict[str, Any], bubble: Any) -> Outcome:
        if not isinstance(bubble, dict):
            return MALFORMED
        kind = header.get("type", bubble.get("type"))
        created = bubble.get("createdAt")
        time = created if isinstance(created, str) else ""
        if kind == USER:
            return self._user(seq, time, bubble)
        if kind == ASSISTANT:
            return self._assistant(seq, time, bubble)
        return unknown(f"bubble:type-{kind}")

    def _user(self, seq: int, time: str, bubble: dict[str, Any]) -> Outcome:
        raw = bubble.get("text")
        text = raw if isinstance(raw, str) else ""
        images = bubble.get("images")
        if isinstance(images, list) and images:
            text = "\n\n".join(p for p in (text, *["[image]"] * len(images)) if p)
        if not text.strip():
            return skipped("empty-bubble")
        self.turns.prompt(UserMessage(seq, text, time))
        return IMPORTED

    def _assistant(self, seq: int, time: str, bubble: dict[str, Any]) -> Outcome:
        emitted = False
        thinking = bubble.get("thinking")
        if isinstance(thinking, dict) and isinstance(thinking.get("text"), str) \
                and thinking["text"].strip():
            self.turns.conversation(Reasoning(seq, thinking["text"], time))
            emitted = True
        text = bubble.get("text")
        if isinstance(text, str) and text.strip():
            self.turns.conversation(AssistantMessage(seq, text, time))
            emitted = True
        tool = bubble.get("toolFormerData")
        if isinstance(tool, dict) and (tool.get("name") or tool.get("toolCallId")):
            call_id = _json_text(tool.get("toolCallId")) or f"cursor-{bubble.get('bubbleId', seq)}"
            arguments = _json_text(tool.get("rawArgs")) or _json_text(tool.get("params"))
            self.turns.conversation(
                ToolCall(seq, call_id, _json_text(tool.get("name")), arguments, time))
            if tool.get("result") is not None:
                failed = tool.get("status") == "error"
                self.turns.conversation(
                    ToolResult(seq, call_id, _json_text(tool["result"]), failed, time))
            emitted = True
        # Cursor writes a bubble per streaming step; most hold nothing but state.
        return IMPORTED if emitted else skipped("empty-bubble")


def read_chat(db: str, composer_id: str, source_path: str) -> Transcript:
    """One chat of a Cursor database as a transcript (`reader.read` of `<db>#<id>`)."""
    ledger = LineLedger()
    with _readonly(db) as conn:
        row = conn.execute("SELECT value FROM cursorDiskKV WHERE key = ?",
                           (COMPOSER_PREFIX + composer_id,)).fetchone()
        if row is None:
            raise InputError(f"{source_path}: no Cursor chat {composer_id!r} in {db}",
                             hint="run `chapters import cursor` to list this project's chats")
        bubbles = {key[len(BUBBLE_PREFIX) + len(composer_id) + 1:]: raw for key, raw in
                   conn.execute("SELECT key, value FROM cursorDiskKV WHERE key >= ? AND key < ?",
                                (f"{BUBBLE_PREFIX}{composer_id}:",
                                 f"{BUBBLE_PREFIX}{composer_id}:\uffff"))}
    ledger.lines = 1
    try:
        data, replaced = _load(row[0])
    except ValueError:
        data, replaced = None, 0
    if not isinstance(data, dict):
        raise InputError(f"{source_path}: the chat's composerData is not a JSON object",
                         hint="the database may be mid-write; retry once Cursor is idle")
    ledger.replaced_bytes += replaced
    ledger.record(1, IMPORTED)  # the chat itself: its id, folder, start and status
    chat = _ChatRead(ledger)
    mapped = data.get("conversationMap")
    inline: dict[str, Any] = mapped if isinstance(mapped, dict) else {}
    for number, header in enumerate(_order(data), start=2):
        ledger.lines += 1
        bubble_id = header.get("bubbleId")
        if "text" in header or "toolFormerData" in header:  # an inline bubble of old releases
            body: Any = header
        elif isinstance(bubble_id, str) and bubbles.get(bubble_id) is not None:
            try:
                body, replaced = _load(bubbles[bubble_id])
            except ValueError:
                ledger.record(number, MALFORMED)
                continue
            ledger.replaced_bytes += replaced
        elif isinstance(bubble_id, str) and isinstance(inline.get(bubble_id), dict):
            body = inline[bubble_id]
        else:
            # Cursor prunes old bubbles: the header stays, the body row is gone or NULL.
            ledger.record(number, skipped("bubble-pruned"))
            continue
        ledger.record(number, chat.bubble(number, header, body))
    status = data.get("status")
    generating = data.get("generatingBubbleIds")
    if status not in _GENERATING and not (isinstance(generating, list) and generating):
        chat.turns.end_after_conversation()  # the IDE is not answering: the last turn is over
    workspace, repos = _places(data)
    info = data.get("subagentInfo")
    parent = info.get("parentComposerId") if isinstance(info, dict) else None
    return Transcript(
        session_id=composer_id,
        harness="cursor",
        events=chat.turns.finish(),
        account=ledger.account(),
        root_session_id=parent if isinstance(parent, str) and parent != composer_id else "",
        cwd=workspace or (repos[0] if repos else ""),
        source_path=source_path,
        started_at=_iso_ms(data.get("createdAt")),
    )
