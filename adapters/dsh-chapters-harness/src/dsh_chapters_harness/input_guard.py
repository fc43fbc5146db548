"""The readers' boundary: bad input is an `InputError` with numbers, never an exception from
deeper down (§1 invariant 1: the archive path must not fall over on what a harness wrote).

- `open_regular`: a session file is a regular file; a FIFO, a device (`/dev/zero`), a socket
  or a directory is refused before one byte is read (a FIFO cannot block the open).
- `GuardLimits`/`limits`: the per-line size cap (`readerLineMaxBytes`) and the JSON nesting
  limit (`readerJsonMaxDepth`), set once by the application for the read it starts.
- `line_too_long`: the error a reader raises at the cap, with the line number and the numbers.
- `fast_record`: a line's record read by orjson when that reads it exactly as `json` does.
- `safe_loads`, `sane_record`: a decoded record within the depth limit, lone surrogates
  (`\\ud800`)
  replaced by U+FFFD (they cannot be written as UTF-8) and counted.
- `check_session_id`: an id becomes a directory name, so it is a plain name of bounded length.
- `read_side_file`: a side file (a tool output the harness moved next to its log) is read only
  when it is a regular file inside the session folder, reached without a symlink, and within
  `readerSideFileMaxBytes`; anything else (a FIFO, `/dev/zero`, a link to `/etc/passwd`) is
  refused unread and counted in the report.
- `decompressed_cap`: the most bytes a compressed log may decompress to
  (`readerDecompressedMaxBytes`); `decompressed_too_big` is the error at the cap.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson
from dsh_chapters_core import pool_layout
from dsh_chapters_core.config import DEFAULTS, Config
from dsh_chapters_core.errors import InputError

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class GuardLimits:
    """The limits a reader holds harness input to: line size, JSON depth, session id length, side
    file size and decompression."""

    line_max_bytes: int = DEFAULTS.reader_line_max_bytes
    json_max_depth: int = DEFAULTS.reader_json_max_depth
    session_id_max_chars: int = DEFAULTS.session_id_max_chars
    decompressed_max_bytes: int = DEFAULTS.reader_decompressed_max_bytes
    side_file_max_bytes: int = DEFAULTS.reader_side_file_max_bytes
    decompression_max_ratio: int = DEFAULTS.reader_decompression_max_ratio

    @classmethod
    def of(cls, config: Config) -> GuardLimits:
        return cls(config.reader_line_max_bytes, config.reader_json_max_depth,
                   config.session_id_max_chars, config.reader_decompressed_max_bytes,
                   config.reader_side_file_max_bytes, config.reader_decompression_max_ratio)


_DEFAULT_LIMITS = GuardLimits()
_LIMITS: contextvars.ContextVar[GuardLimits | None] = contextvars.ContextVar(
    "dsh_chapters_reader_limits", default=None
)


def current() -> GuardLimits:
    return _LIMITS.get() or _DEFAULT_LIMITS


@contextlib.contextmanager
def limits(value: GuardLimits) -> Iterator[None]:
    """The limits every reader applies for the reads inside this block."""
    token = _LIMITS.set(value)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str, label: str) -> BinaryIO:
    """A binary stream on a regular file, or InputError naming what the path is instead."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a {label} session file",
                         hint="pass one session file, or use `chapters import` for a "
                              "directory") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}",
                         hint="check that the path exists and is readable") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"{path} is {_kind(mode)}, not a {label} session file",
                         hint="pass a session file (.jsonl) the harness wrote")
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    return os.fdopen(fd, "rb")


def line_too_long(path: str, line_number: int, size: int, cap: int) -> InputError:
    return InputError(
        f"{path}: line {line_number} is over readerLineMaxBytes = {cap} bytes (read {size} "
        "bytes of it without a newline); the read stopped there",
        hint="if this is a real session line, raise readerLineMaxBytes in .dsh-chapters/"
             "config.toml; otherwise pass the session file, not this one",
    )


def _too_deep(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, dict | list))
    return False


def _scrub(value: Any) -> tuple[Any, int]:
    """The value with lone surrogates in its strings (and keys) replaced; how many."""
    if isinstance(value, str):
        return _LONE_SURROGATE.subn("\ufffd", value)
    if isinstance(value, list):
        total = 0
        out = []
        for item in value:
            clean, n = _scrub(item)
            out.append(clean)
            total += n
        return out, total
    if isinstance(value, dict):
        total = 0
        mapped = {}
        for key, item in value.items():
            clean_key, n = _scrub(key)
            clean, m = _scrub(item)
            mapped[clean_key] = clean
            total += n + m
        return mapped, total
    return value, 0


_SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F]")
# 19 digits may be an integer past 64 bits, which orjson reads as a float. Found as a run of
# zeros once every digit is a zero and every other byte a space: a C pass 8 times as fast as
# the regular expression `[0-9]{19}` on real transcripts.
_DIGITS_AS_ZEROS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_NINETEEN_DIGITS = b"0" * 19
# orjson reserves up to 14 times a line's size while it reads it (untouched, but reserved): a
# longer line (0.4% of real transcripts' bytes) goes the full path, which holds about twice.
_FAST_MAX_BYTES = 1 << 20


def sane_record(record: dict[str, Any], text: str, limits: GuardLimits | None = None
                ) -> tuple[dict[str, Any] | None, int]:
    """(the record, lone surrogates replaced) or (None, 0) when it nests past the limit.
    `text` is the line it was decoded from: cheap scans of it skip the walks when they
    cannot find anything (few brackets, no surrogate escape)."""
    if _nested_past(record, text.count("[") + text.count("{"), limits):
        return None, 0
    if not _SURROGATE_ESCAPE.search(text):
        return record, 0
    clean, replaced = _scrub(record)
    return clean, replaced


def fast_record(line: bytes | bytearray, limits: GuardLimits | None = None
                ) -> dict[str, Any] | None:
    """The line's one record as `json.loads` and `sane_record` would give it, read by orjson
    (three times as fast on real transcripts), or None when the full path must decide.

    orjson refuses what needs that path (a lone surrogate, bytes that are not UTF-8, `NaN`,
    several records on one line, nesting past 1,024), so a record it returns holds nothing to
    replace. The one thing it reads differently is an integer past 64 bits (a float, where
    `json` keeps the int): a line with a run of 19 digits goes the full path. A record nested
    past `readerJsonMaxDepth` is None too, and the full path finds it malformed as before. A
    line over 1 MiB always goes the full path."""
    if len(line) > _FAST_MAX_BYTES or _NINETEEN_DIGITS in line.translate(_DIGITS_AS_ZEROS):
        return None
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    if _nested_past(value, line.count(b"[") + line.count(b"{"), limits):
        return None
    return value


def _nested_past(record: dict[str, Any], brackets: int, limits: GuardLimits | None) -> bool:
    """Whether `record` nests past `readerJsonMaxDepth`; walked only when its line opens more
    brackets than that (a line with fewer cannot nest so deep)."""
    bound = (limits or current()).json_max_depth
    return brackets > bound and _too_deep(record, bound)


def safe_loads(text: str) -> Any:
    """`json.loads`, with nesting past the interpreter's stack as a ValueError (malformed)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested deeper than the parser's stack") from None


def check_session_id(session_id: str, path: str, limits: GuardLimits | None = None) -> None:
    """A session id names a store directory: the core's rule, at this read's bound."""
    pool_layout.check_session_id(session_id, path, (limits or current()).session_id_max_chars)


class LineTooLong(Exception):
    """A line past `readerLineMaxBytes`: the reader turns it into `line_too_long`."""

    def __init__(self, line_number: int, size: int, cap: int) -> None:
        super().__init__(line_number, size, cap)
        self.line_number, self.size, self.cap = line_number, size, cap


class SideFileRefused(Exception):
    """A side file that is not a regular file inside its session folder, or too big."""


# A side file lives at `<session folder>/<dir>/<name>` (Claude Code's `tool-results/`): the
# two path elements below the session folder must be a real directory and a regular file.
_SIDE_FILE_DEPTH = 2


def read_side_file(path: str, limits: GuardLimits | None = None) -> bytes | None:
    """The bytes of a side file; None when there is nothing there. SideFileRefused when it is
    a FIFO, a device, a directory, a symlink (to `/etc/passwd`, to `/dev/zero`), reached
    through a symlinked directory, or over `readerSideFileMaxBytes`: never opened for reading
    a byte of it, never waited on."""
    cap = (limits or current()).side_file_max_bytes
    folder = os.path.dirname(os.path.dirname(path))
    here = folder
    for part in os.path.relpath(path, folder).split(os.sep)[:_SIDE_FILE_DEPTH - 1]:
        here = os.path.join(here, part)
        try:
            mode = os.lstat(here).st_mode
        except OSError:
            return None
        if not stat.S_ISDIR(mode):  # a symlinked directory leads out of the session folder
            raise SideFileRefused(here)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:  # ELOOP: a symlink; EACCES and the rest: not ours to read
        if os.path.lexists(path):
            raise SideFileRefused(path) from None
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            raise SideFileRefused(path)
        data = handle.read(cap + 1)
    if len(data) > cap:  # grew while we read it
        raise SideFileRefused(path)
    return data


# The ratio is judged only past this much output: a short log's header frame may expand more.
RATIO_FLOOR_BYTES = 1024 * 1024


def decompression_check(path: str, produced: int, consumed: int,
                        limits: GuardLimits | None = None) -> None:
    """InputError once a compressed log has decompressed past `readerDecompressedMaxBytes`,
    or (past RATIO_FLOOR_BYTES) to more than `readerDecompressionMaxRatio` times what it read:
    a bomb stops within a few MiB, before its lines cost anything."""
    bound = limits or current()
    if produced > bound.decompressed_max_bytes:
        raise InputError(
            f"{path}: decompresses past readerDecompressedMaxBytes = "
            f"{bound.decompressed_max_bytes} bytes (from {consumed} compressed bytes read); "
            "the read stopped there and nothing of it was archived",
            hint="a log this large is not what DSH writes; if it is real, raise "
                 "readerDecompressedMaxBytes in .dsh-chapters/config.toml")
    ratio = bound.decompression_max_ratio
    if produced > RATIO_FLOOR_BYTES and produced > consumed * ratio:
        raise InputError(
            f"{path}: {consumed} compressed bytes decompress to {produced} bytes, over "
            f"readerDecompressionMaxRatio = {ratio} (a compression bomb); the read stopped "
            "there and nothing of it was archived",
            hint="if this is a real session log, raise readerDecompressionMaxRatio in "
                 ".dsh-chapters/config.toml")
