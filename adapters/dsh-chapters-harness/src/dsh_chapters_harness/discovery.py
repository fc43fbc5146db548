"""Finding session files on disk: the shared pieces of each binding's `discover()`."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dsh_chapters_harness.transcript_lines import head_records

# Bytes read to sniff a format or find a session's header record. Codex puts AGENTS.md into its
# session_meta line, so a header may be tens of KB; a MiB covers it without reading whole files.
HEAD_BYTES = 1 << 20
HEADER_LINES = 20


def read_head(path: str | Path, size: int = HEAD_BYTES) -> bytes:
    """The first `size` bytes of a file; b"" if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def header_records(path: str | Path) -> list[dict[str, Any]]:
    """The JSON-object records among a file's first lines (for cwd matching, never imported)."""
    return head_records(read_head(path), limit=HEADER_LINES)


def same_directory(a: str, b: str) -> bool:
    """Two spellings of one directory: equal once normalized, or once symlinks are resolved."""
    if not a or not b:
        return False
    if os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b)):
        return True
    return os.path.realpath(a) == os.path.realpath(b)


def jsonl_files(root: Path, pattern: str = "*.jsonl") -> Iterable[Path]:
    """Files matching `pattern` anywhere under `root`, in a stable order."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob(pattern) if p.is_file())
