"""`--harness auto`: which reader a file is for, from its first bytes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dsh_chapters_core.errors import InputError
from dsh_chapters_core.ports.harness import HarnessReader

from dsh_chapters_harness.discovery import HEAD_BYTES, read_head


def detect_harness(path: str, readers: Sequence[HarnessReader]) -> str:
    """The name of the first reader whose `sniff` accepts the file's head.

    Raises `InputError` with the bytes and lines looked at when none does.
    """
    file = Path(path)
    if file.is_dir():
        raise InputError(
            f"{path} is a directory, not a session file",
            hint="pass one session file, or use `chapters import` for a directory",
        )
    if not file.exists():
        raise InputError(f"{path} does not exist", hint="check the path")
    head = read_head(file, HEAD_BYTES)
    if not head:
        raise InputError(
            f"{path} is empty (0 bytes): there is no session to read",
            hint="point at a session file that has at least one complete line",
        )
    for reader in readers:
        try:
            accepted = reader.sniff(head)
        except (ValueError, RecursionError, UnicodeError):
            # a head a reader's parser chokes on (100,000 nested `{`) is not its format
            accepted = False
        if accepted:
            return reader.name
    names = ", ".join(r.name for r in readers) or "none installed"
    lines = head.count(b"\n")
    raise InputError(
        f"{path} is not a transcript any installed reader recognizes: its first {len(head)} "
        f"bytes ({lines} complete lines) match none of: {names}",
        hint="check the path, or name the format with --harness dsh|claude-code|codex",
    )
