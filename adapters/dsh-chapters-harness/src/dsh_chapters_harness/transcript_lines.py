"""Streaming JSONL reading with a ledger that accounts for every input line.

Issue #3: every line is imported, skipped by a named rule, unknown (counted by type) or
malformed (with its line number); a peer tool once lost whole sessions by dropping lines it did
not understand. This module owns the byte-level half shared by the three bindings:

- lines are read one at a time from a binary stream, so a big file is never held whole;
- non-UTF-8 bytes become U+FFFD and are counted (`replaced_bytes`);
- a last line with no newline that does not parse is a live session's partial write: the read
  stops at the last complete line and `truncated_tail` is set (that tail is not a line);
- a line that is not a JSON object is malformed; it is never decoded further than needed;
- a line that holds several complete JSON objects with nothing but whitespace between them
  (Claude Code sometimes writes two records with no newline) is split with
  `json.JSONDecoder.raw_decode`: every record is read and the line is counted `split`.

A file in which no line is a record of the expected format raises `InputError` with the
numbers (lines, bytes, classes) and a next step.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import attrs
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import LineAccount, LineClass

from dsh_chapters_harness import input_guard

# A record line opens with "{" after optional whitespace; anything else is rejected before it
# is decoded, so a 50 MB line of garbage is never turned into a 50 MB str.
_RECORD_START = re.compile(rb"[ \t\r\f\v]*\{")
_BLANK = re.compile(rb"\s*")
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_PIECE = 1 << 16  # bytes read at a time from one line
_MALFORMED_SHOWN = 5  # line numbers an error message quotes; the account keeps them all

AUTO_HINT = (
    "check the path; `chapters archive PATH --harness auto` detects DSH, Claude Code and Codex "
    "files, or name the format with --harness dsh|claude-code|codex"
)


@attrs.frozen
class Outcome:
    """What one complete, well-formed line became. `name` is the skip rule or the record type."""

    kind: LineClass
    name: str = ""


IMPORTED = Outcome(LineClass.IMPORTED)


def skipped(rule: str) -> Outcome:
    return Outcome(LineClass.SKIPPED, rule)


def unknown(record_type: str) -> Outcome:
    return Outcome(LineClass.UNKNOWN, record_type)


MALFORMED = Outcome(LineClass.MALFORMED)

BLANK_LINE_RULE = "blank-line"


class LineLedger:
    """Mutable per-read counters that end as one frozen `LineAccount`."""

    def __init__(self) -> None:
        self.imported = 0
        self.skip_rules: Counter[str] = Counter()
        self.unknown_types: Counter[str] = Counter()
        self.malformed_lines: list[int] = []
        self.split_lines: list[int] = []
        self.split_records = 0
        self.split_recognized = 0  # records of split lines that are of the expected format
        self.truncated_tail = False
        self.replaced_bytes = 0
        self.side_files_refused = 0
        self.lines = 0  # complete lines read
        self.bytes_read = 0  # including a truncated tail

    def record(self, line_number: int, outcome: Outcome) -> None:
        if outcome.kind is LineClass.IMPORTED:
            self.imported += 1
        elif outcome.kind is LineClass.SKIPPED:
            self.skip_rules[outcome.name] += 1
        elif outcome.kind is LineClass.UNKNOWN:
            self.unknown_types[outcome.name] += 1
        else:
            self.malformed_lines.append(line_number)

    def move(self, line_number: int, old: Outcome, new: Outcome) -> None:
        """Count a line already recorded as `old` as `new` instead: a reader learned later what
        the line held (a queued message sent as the next prompt, a chunk that is an answer's
        only copy). A split line stays split, counted once; only imported and skipped move."""
        if line_number in self.split_lines:
            return
        for outcome, step in ((old, -1), (new, 1)):
            if outcome.kind is LineClass.IMPORTED:
                self.imported += step
            elif outcome.kind is LineClass.SKIPPED:
                self.skip_rules[outcome.name] += step
                if not self.skip_rules[outcome.name]:
                    del self.skip_rules[outcome.name]
            else:
                raise ValueError(f"move: {outcome.kind} lines do not move")

    def record_split(self, line_number: int, outcomes: list[Outcome]) -> None:
        """One line that held several records: counted once, as `split`."""
        self.split_lines.append(line_number)
        self.split_records += len(outcomes)
        self.split_recognized += sum(
            1 for o in outcomes if o.kind in (LineClass.IMPORTED, LineClass.SKIPPED)
        )

    @property
    def recognized(self) -> int:
        """Lines that are records of the expected format (imported or skipped by a format rule)."""
        return self.imported + self.split_recognized + sum(
            n for rule, n in self.skip_rules.items() if rule != BLANK_LINE_RULE
        )

    def account(self) -> LineAccount:
        return LineAccount(
            imported=self.imported,
            skipped=sum(self.skip_rules.values()),
            unknown=sum(self.unknown_types.values()),
            malformed=len(self.malformed_lines),
            truncated_tail=self.truncated_tail,
            replaced_bytes=self.replaced_bytes,
            skip_rules=tuple(sorted(self.skip_rules.items())),
            unknown_types=tuple(sorted(self.unknown_types.items())),
            malformed_lines=tuple(self.malformed_lines),
            split=len(self.split_lines),
            split_lines=tuple(self.split_lines),
            split_records=self.split_records,
            side_files_refused=self.side_files_refused,
        )


def decode_counting(raw: bytes | bytearray) -> tuple[str, int]:
    """UTF-8 text with each undecodable byte as U+FFFD, and how many bytes were replaced."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        pass
    escaped = raw.decode("utf-8", "surrogateescape")  # one lone surrogate per bad byte
    text, count = _ESCAPED_BYTE.subn("\ufffd", escaped)
    return text, count


def _read_line(stream: BinaryIO, cap: int = 0) -> tuple[bytes | bytearray | None, int, bool]:
    """(the line, its size in bytes, whether it ends with a newline); (None, 0, False) at EOF.

    A line longer than one piece that does not open like a record is consumed piece by piece
    and returned as None: its bytes are counted, never held (a 50 MB line of garbage).
    """
    piece = stream.readline(_PIECE)
    if not piece:
        return None, 0, False
    size = len(piece)
    if cap and size > cap and _RECORD_START.match(piece):
        raise input_guard.LineTooLong(0, size, cap)
    if piece.endswith(b"\n"):
        return piece, size, True
    if not _RECORD_START.match(piece):
        while more := stream.readline(_PIECE):
            size += len(more)  # counted, never held: the cap is for lines that are held
            if more.endswith(b"\n"):
                return None, size, True
        return None, size, False
    line = bytearray(piece)  # grows in place: one copy of a big record, not two
    while more := stream.readline(_PIECE):
        line += more
        size += len(more)
        if cap and size > cap:
            raise input_guard.LineTooLong(0, size, cap)
        if more.endswith(b"\n"):
            return line, size, True
    return line, size, False


_DECODER = json.JSONDecoder()


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _split_records(text: str) -> list[dict[str, Any]] | None:
    """Several JSON objects written on one line with only whitespace between them, or None."""
    records: list[dict[str, Any]] = []
    position = _skip_space(text, 0)
    while position < len(text):
        try:
            value, position = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):  # nested past the stack: malformed, never a crash
            return None
        if not isinstance(value, dict):
            return None
        records.append(value)
        position = _skip_space(text, position)
    return records if len(records) > 1 else None


def _parse_records(text: str) -> list[dict[str, Any]] | None:
    """The line's record, or its records when several were written on it; None if malformed."""
    try:
        value = input_guard.safe_loads(text)  # tolerates the trailing newline
    except ValueError:
        return _split_records(text)
    return [value] if isinstance(value, dict) else None


def iter_records(stream: BinaryIO, ledger: LineLedger) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, record) for each record of each complete line (see
    `iter_line_records`; a split line gives each of its records, with the same number)."""
    for number, records in iter_line_records(stream, ledger):
        for record in records:
            yield number, record


def iter_line_records(
    stream: BinaryIO, ledger: LineLedger
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """(1-based line number, its records) for each complete JSON-object line: one record,
    or several when they were written on one line.

    Blank lines are skipped by the `blank-line` rule and bad lines recorded as malformed, here,
    so the caller accounts only for the records it is given.
    """
    number = 0
    limits = input_guard.current()  # for the whole read, not asked again per line
    cap = limits.line_max_bytes
    while True:
        try:
            line, size, complete = _read_line(stream, cap)
        except input_guard.LineTooLong as exc:
            raise input_guard.LineTooLong(number + 1, exc.size, exc.cap) from None
        if size == 0:
            return
        ledger.bytes_read += size
        if line is not None and _BLANK.fullmatch(line):
            if complete:
                number += 1
                ledger.lines += 1
                ledger.record(number, skipped(BLANK_LINE_RULE))
            continue
        records = None
        if line is not None and _RECORD_START.match(line):
            fast = input_guard.fast_record(line, limits)
            if fast is not None:
                records = [fast]
            else:
                text, replaced = decode_counting(line)
                del line  # hold the decoded text or the bytes of a big line, not both
                records = _parse_records(text)
                if records is not None:
                    # The boundary guard: depth bounded, lone surrogates replaced (counted once).
                    guarded = [input_guard.sane_record(record, text, limits)
                               for record in records]
                    records = None if any(r is None for r, _ in guarded) else [
                        r for r, _ in guarded if r is not None]
                    replaced += max((lone for _, lone in guarded), default=0)
                del text
                if records is not None:
                    ledger.replaced_bytes += replaced
        if not complete and records is None:
            # A live session's partial write: stop at the last complete line (issue #3).
            ledger.truncated_tail = True
            return
        number += 1
        ledger.lines += 1
        if records is None:
            ledger.record(number, MALFORMED)
            continue
        yield number, records


def _counted(items: Counter[str]) -> str:
    return ", ".join(f"{name} ×{n}" for name, n in items.most_common(5))


def not_a_transcript(path: str, ledger: LineLedger, *, label: str, expected: str) -> InputError:
    """The error for a file none of whose lines is a record of `label`'s format, with numbers."""
    if ledger.bytes_read == 0:
        return InputError(
            f"{path} is empty (0 bytes): there is no {label} session to read",
            hint="point at a session file that has at least one complete line",
        )
    if ledger.lines == 0:
        return InputError(
            f"{path} has no complete line: {ledger.bytes_read} bytes without a newline that do "
            f"not parse as a JSON object (a session still being written, or not JSONL)",
            hint="wait until the session has written a full line, or " + AUTO_HINT,
        )
    blank = ledger.skip_rules.get(BLANK_LINE_RULE, 0)
    if blank == ledger.lines:
        return InputError(
            f"{path} has no records: {ledger.lines} blank lines, {ledger.bytes_read} bytes",
            hint="point at a session file with records in it",
        )
    parts = []
    if ledger.malformed_lines:
        shown = ", ".join(str(n) for n in ledger.malformed_lines[:_MALFORMED_SHOWN])
        more = "…" if len(ledger.malformed_lines) > _MALFORMED_SHOWN else ""
        parts.append(f"{len(ledger.malformed_lines)} not JSON objects (lines {shown}{more})")
    unknown_total = sum(ledger.unknown_types.values())
    if unknown_total:
        parts.append(f"{unknown_total} of unknown record types ({_counted(ledger.unknown_types)})")
    if blank:
        parts.append(f"{blank} blank")
    tail = "; the last line is truncated" if ledger.truncated_tail else ""
    return InputError(
        f"{path} is not a {label} transcript: read {ledger.lines} lines "
        f"({ledger.bytes_read} bytes) and none is a {label} record: {', '.join(parts)}{tail}. "
        f"Expected {expected}",
        hint=AUTO_HINT,
    )



def read_records(
    path: str,
    handle: Callable[[int, dict[str, Any]], Outcome],
    *,
    label: str,
    expected: str,
    ledger: LineLedger | None = None,
    open_stream: Callable[[str], BinaryIO] | None = None,
    stopped_early: Callable[[BinaryIO], bool] | None = None,
) -> LineLedger:
    """Feed every record of `path` to `handle` and account for every line.

    Raises `InputError` if the file cannot be opened or none of its lines is a `label` record.
    A caller that reads side files while handling lines passes its own `ledger` to count them.
    A binding whose files are not plain lines (DSH's zstd frames) passes `open_stream`, and
    `stopped_early` to say whether the stream ended inside a unit it could not finish.
    """
    ledger = ledger if ledger is not None else LineLedger()
    stream = input_guard.open_regular(path, label)  # never a FIFO or /dev/zero
    if open_stream is not None:  # a framed file (DSH's zstd): the same refusals first
        stream.close()
        try:
            stream = open_stream(path)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}",
                             hint="check that the path exists and is readable") from None
    with stream:
        try:
            for number, records in iter_line_records(stream, ledger):
                if len(records) == 1:
                    ledger.record(number, handle(number, records[0]))
                else:
                    ledger.record_split(number, [handle(number, record) for record in records])
        except input_guard.LineTooLong as exc:
            raise input_guard.line_too_long(path, exc.line_number, exc.size, exc.cap) from None
        if stopped_early is not None and stopped_early(stream):
            ledger.truncated_tail = True
    if ledger.recognized == 0:
        raise not_a_transcript(path, ledger, label=label, expected=expected)
    return ledger


def read_text_counting(path: str, ledger: LineLedger) -> str | None:
    """A side file (an externalized tool output, `<session>/<dir>/<name>`) as text, its bad
    bytes counted; None if absent, or refused and counted (input_guard.read_side_file)."""
    try:
        raw = input_guard.read_side_file(path)
    except input_guard.SideFileRefused:
        ledger.side_files_refused += 1
        return None
    if raw is None:
        return None
    text, replaced = decode_counting(raw)
    ledger.replaced_bytes += replaced
    return text


def head_records(head: bytes, *, limit: int) -> list[dict[str, Any]]:
    """The JSON-object lines among the first `limit` complete lines of a file's first bytes."""
    records: list[dict[str, Any]] = []
    for raw in head.split(b"\n")[:-1][:limit]:
        if not _RECORD_START.match(raw):
            continue
        try:
            value = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records
