"""Opening a DSH session log as a stream of lines, compressed or not (docs/formats.md, "DSH").

DSH writes `session.jsonl.zstd` by default: a concatenation of independent, checksummed
Zstandard frames (one for the header line, one per durable append batch); with compression off
it writes the same lines raw to `session.jsonl`. Both are read as a stream, never whole, so a
long session costs one line of memory.

A log still being written can end inside a frame. The frames before it are complete and are
read; the torn frame's decoded prefix still counts as far as it has complete lines, and the read
reports that it stopped there (`torn_frame`), as the line reader does for a partial last line.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

import zstandard

from dsh_chapters_harness import input_guard

ZSTD_SUFFIX = ".zstd"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # every Zstandard frame opens with it (RFC 8878 §3.1.1)
# Compressed bytes fed to the decoder at a time (JSONL: ~10x that out). Zstandard can expand
# 4 bytes into a 128 KiB block, so a piece bounds what one call may hold in memory: 2 KiB in
# is at most 64 MiB out, a bomb's worst, whatever the file (readerDecompressionMaxRatio and
# readerDecompressedMaxBytes then stop the read).
_INPUT_PIECE = 1 << 11


class ZstdFrames(io.RawIOBase):
    """The decompressed bytes of a concatenation of Zstandard frames, read frame by frame.

    `torn_frame` is set at EOF when the last frame started but never ended (a live writer).
    """

    def __init__(self, raw: BinaryIO, path: str = "") -> None:
        self._raw = raw
        self._path = path
        self._out = 0  # decompressed bytes so far
        self._in = 0  # compressed bytes so far
        self._decoder = zstandard.ZstdDecompressor().decompressobj()
        self._fed = False  # the current frame has consumed input
        self._pending = b""
        self._offset = 0
        self._eof = False
        self.torn_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._offset >= len(self._pending) and not self._eof:
            self._decode_more()
        size = min(len(buffer), len(self._pending) - self._offset)
        # an offset into the decoded piece, never a re-slice: each byte is copied once
        buffer[:size] = memoryview(self._pending)[self._offset : self._offset + size]
        self._offset += size
        return size

    def _decode_more(self) -> None:
        chunk = self._raw.read(_INPUT_PIECE)
        if not chunk:
            self._eof = True
            self.torn_frame = self._fed
            return
        self._in += len(chunk)
        out = []
        while chunk:
            try:
                out.append(self._decoder.decompress(chunk))
            except zstandard.ZstdError:  # a damaged frame: keep what came before it, stop
                self._eof = self.torn_frame = True
                break
            self._fed = True
            if not self._decoder.eof:
                break
            chunk = self._decoder.unused_data  # the next frame starts in this piece
            self._decoder = zstandard.ZstdDecompressor().decompressobj()
            self._fed = False
        self._pending = b"".join(out)
        self._offset = 0
        self._out += len(self._pending)
        input_guard.decompression_check(self._path, self._out, self._in)

    def close(self) -> None:
        self._raw.close()
        super().close()


def is_compressed(path: str | Path, head: bytes = b"") -> bool:
    """A `.zstd` log, by its suffix or by its first bytes."""
    return str(path).endswith(ZSTD_SUFFIX) or head.startswith(ZSTD_MAGIC)


def open_log(path: str) -> BinaryIO:
    """A binary line stream over the log at `path`; raises OSError as `open` does."""
    raw = open(path, "rb")  # noqa: SIM115 - the caller closes the returned stream
    try:
        head = raw.peek(len(ZSTD_MAGIC))[: len(ZSTD_MAGIC)] if hasattr(raw, "peek") else b""
    except OSError:
        head = b""
    if not is_compressed(path, head):
        return raw
    return io.BufferedReader(ZstdFrames(raw, path))


def torn_frame(stream: BinaryIO) -> bool:
    """Whether a stream from `open_log` ended inside a Zstandard frame."""
    inner = getattr(stream, "raw", None)
    return isinstance(inner, ZstdFrames) and inner.torn_frame


def decompressed_head(path: str | Path, size: int) -> bytes:
    """The first `size` decompressed bytes of a log (its header line, for discovery)."""
    try:
        with open_log(str(path)) as stream:
            return stream.read(size)
    except (OSError, zstandard.ZstdError):
        return b""
