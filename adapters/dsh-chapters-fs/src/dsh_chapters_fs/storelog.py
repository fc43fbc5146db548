"""The store's own log, `.dsh-chapters/logs/chapters.log` (machine-local, never published).

One JSON object a line. Callers pass counts, paths and codes, never content: a line here must
never carry a transcript's text or a token.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dsh_chapters_fs.atomic import make_dirs

LOG_RELPATH = "logs/chapters.log"


class StoreLog:
    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        self.path = Path(store_root) / LOG_RELPATH

    def write(self, event: str, at: str, **fields: Any) -> None:
        """Append one line. A single O_APPEND write keeps concurrent lines whole."""
        make_dirs(self.path.parent)
        line = json.dumps({"at": at, "event": event, **fields}, ensure_ascii=False,
                          sort_keys=True, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    def entries(self, event: str | None = None) -> Iterator[dict[str, Any]]:
        """Lines in order; a line a crash cut short is skipped."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and (event is None or entry.get("event") == event):
                yield entry

    def last(self, event: str) -> dict[str, Any] | None:
        found = None
        for entry in self.entries(event):
            found = entry
        return found
