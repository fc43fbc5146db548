"""One JSON document whose members are a harness's records, read with every line accounted.

Gemini CLI before 0.39 rewrites its whole session as one `JSON.stringify(conversation, null,
2)` document, and `opencode export` prints one such document per session: the records are
members of the document (a message, a part), each spread over many lines. The line-accounting
rule (every line imported, skipped by a named rule, unknown or malformed) still holds, by
position: the document is walked with the stdlib decoder, each record's character span is kept,
and each line of the file takes the outcome of the record it belongs to.

- A line inside one record takes that record's outcome; a line shared by several records (a
  compact, one-line document) is counted once as `split`, as for JSONL lines holding several
  records; a line of the document's own brackets and keys is skipped by `document-structure`.
- A document that stops before its end is either a live rewrite caught half-written (what is
  left is a prefix of JSON: `unfinished-write`, and a last line without its newline is the
  truncated tail, as for JSONL) or damaged (its lines from the damage on are malformed). Only
  the records that end before the first unfinished or damaged line are read.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dsh_chapters_harness import input_guard
from dsh_chapters_harness.transcript_lines import (
    BLANK_LINE_RULE,
    MALFORMED,
    LineLedger,
    Outcome,
    decode_counting,
    skipped,
)

Path_ = tuple[str | int, ...]
STRUCTURE_RULE = "document-structure"
UNFINISHED_RULE = "unfinished-write"
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_OPENERS = {"{": "}", "[": "]"}


@dataclass(frozen=True, slots=True)
class Member:
    """One value of the document at `path`, and its character span `[start, end)`."""

    path: Path_
    start: int
    end: int
    value: Any


@dataclass(frozen=True, slots=True)
class DocumentScan:
    """The members the walk completed (children before their parents), and where it stopped."""

    text: str
    members: tuple[Member, ...]
    complete: bool  # the whole document was read (trailing whitespace allowed)
    stop: int  # offset where reading stopped: len(text) when complete
    unfinished: bool  # what follows `stop` is a prefix of JSON (a write in progress)
    trailing: int  # offset of non-whitespace after a complete document (len(text) if none)


class _Stop(Exception):
    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


def scan_document(text: str, expand: Callable[[Path_], bool]) -> DocumentScan:
    """Walk `text`: containers whose path `expand` accepts are entered (their members kept
    one by one); any other value is decoded whole, by the stdlib decoder, as one member."""
    members: list[Member] = []
    start = _WHITESPACE.match(text, 0)
    position = start.end() if start else 0
    try:
        _, end = _value(text, position, (), expand, members)
    except _Stop as stop:
        return DocumentScan(text, tuple(members), False, stop.position,
                            _is_json_prefix(text, stop.position), len(text))
    after = _WHITESPACE.match(text, end)
    rest = after.end() if after else end
    return DocumentScan(text, tuple(members), True, end, False, rest)


def _skip(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position


def _value(text: str, position: int, path: Path_, expand: Callable[[Path_], bool],
           out: list[Member]) -> tuple[Any, int]:
    position = _skip(text, position)
    if position >= len(text):
        raise _Stop(position)
    opener = text[position]
    if opener in _OPENERS and expand(path):
        return _container(text, position, path, expand, out)
    try:
        value, end = _DECODER.raw_decode(text, position)
    except (ValueError, RecursionError):
        raise _Stop(position) from None
    out.append(Member(path, position, end, value))
    return value, end


def _container(text: str, start: int, path: Path_, expand: Callable[[Path_], bool],
               out: list[Member]) -> tuple[Any, int]:
    is_object = text[start] == "{"
    closer = _OPENERS[text[start]]
    result: Any = {} if is_object else []
    position = _skip(text, start + 1)
    if text.startswith(closer, position):
        out.append(Member(path, start, position + 1, result))
        return result, position + 1
    index = 0
    while True:
        position = _skip(text, position)
        key: str | int = index
        if is_object:
            if not text.startswith('"', position):
                raise _Stop(position)
            try:
                name, position = _DECODER.raw_decode(text, position)
            except ValueError:
                raise _Stop(position) from None
            position = _skip(text, position)
            if not text.startswith(":", position):
                raise _Stop(position)
            key = name
            position += 1
        value, position = _value(text, position, (*path, key), expand, out)
        if is_object:
            result[key] = value  # a repeated key: the last wins, as in JSON.parse
        else:
            result.append(value)
        index += 1
        position = _skip(text, position)
        if text.startswith(",", position):
            position += 1
            continue
        if text.startswith(closer, position):
            out.append(Member(path, start, position + 1, result))
            return result, position + 1
        raise _Stop(position)


def _is_json_prefix(text: str, position: int) -> bool:
    """True when `text[position:]` could be the start of the rest of the document: brackets
    close in order, strings are left open only at the very end (a rewrite caught mid-way)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text[position:]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            elif char == "\n":
                return False  # JSON strings hold no raw newline
            continue
        if char == '"':
            in_string = True
        elif char in _OPENERS:
            stack.append(_OPENERS[char])
        elif char in "}]" and (not stack or stack.pop() != char):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Record:
    """A member the reader counts as one record, and what it became."""

    start: int
    end: int
    outcome: Outcome


class LineMap:
    """Where each line of the text starts, to turn character offsets into line numbers."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        self.starts.extend(m.end() for m in re.finditer("\n", text))
        if self.starts[-1] == len(text):
            self.starts.pop()  # a final newline opens no line
        if not text:
            self.starts = []

    @property
    def count(self) -> int:
        return len(self.starts)

    def line_of(self, offset: int) -> int:
        """1-based line number of the character at `offset`."""
        return bisect.bisect_right(self.starts, offset)

    def last_line_of(self, start: int, end: int) -> int:
        return self.line_of(max(start, end - 1))


def unread_line(scan: DocumentScan, lines: LineMap, resume: int) -> int:
    """The first line that is not read (0: every line is). A complete document followed by
    anything but whitespace stops at that text; an incomplete one at the first line after
    `resume`, the end of the last whole record unit the reader kept (a message, with its
    parts): what follows belongs to a unit still being written, or to the damage."""
    if scan.complete:
        return lines.line_of(scan.trailing) if scan.trailing < len(scan.text) else 0
    if not lines.count:
        return 0
    after = _skip(scan.text, min(resume, scan.stop))
    return lines.line_of(min(after, scan.stop))


def usable(member: Member, lines: LineMap, unread: int) -> bool:
    """Whether a completed member lies wholly on lines before the first unread line."""
    return unread == 0 or lines.last_line_of(member.start, member.end) < unread


def account_lines(scan: DocumentScan, lines: LineMap, records: Sequence[Record],
                  ledger: LineLedger, unread: int) -> None:
    """Give every line of the document its outcome (see the module's docstring)."""
    owners: list[list[Outcome]] = [[] for _ in range(lines.count + 1)]
    for record in records:
        first = lines.line_of(record.start)
        last = lines.last_line_of(record.start, record.end)
        for number in range(first, last + 1):
            owners[number].append(record.outcome)
    text = scan.text
    for number in range(1, lines.count + 1):
        start = lines.starts[number - 1]
        end = lines.starts[number] if number < lines.count else len(text)
        has_newline = text.endswith("\n", start, end) if end > start else False
        if unread and number >= unread:
            if scan.complete or not scan.unfinished:
                ledger.record(number, MALFORMED)
            elif number == lines.count and not has_newline:
                ledger.truncated_tail = True  # a live rewrite's partial last line
            else:
                ledger.record(number, skipped(UNFINISHED_RULE))
            continue
        if owners[number]:
            if len(owners[number]) == 1:
                ledger.record(number, owners[number][0])
            else:
                ledger.record_split(number, owners[number])
        elif not text[start:end].strip():
            ledger.record(number, skipped(BLANK_LINE_RULE))
        else:
            ledger.record(number, skipped(STRUCTURE_RULE))
    ledger.lines = lines.count if not ledger.truncated_tail else lines.count - 1


def read_document_text(path: str, label: str, ledger: LineLedger) -> str:
    """The file's text, its bad bytes counted, refused past the per-line cap like a JSONL
    line (a compact document is one line)."""
    with input_guard.open_regular(path, label) as stream:
        raw = stream.read()
    ledger.bytes_read = len(raw)
    cap = input_guard.current().line_max_bytes
    if cap:
        number, position = 0, 0
        while position < len(raw):
            number += 1
            newline = raw.find(b"\n", position)
            end = len(raw) if newline < 0 else newline + 1
            if end - position > cap:
                raise input_guard.line_too_long(path, number, end - position, cap)
            position = end
    text, replaced = decode_counting(raw)
    ledger.replaced_bytes += replaced
    return text


def guarded(value: Any, text: str) -> tuple[Any, int]:
    """A record within the nesting limit, lone surrogates replaced; (None, 0) past it."""
    if not isinstance(value, dict):
        return value, 0
    return input_guard.sane_record(value, text)
