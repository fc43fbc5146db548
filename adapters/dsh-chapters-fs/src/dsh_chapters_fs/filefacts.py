"""Facts about files, kept by their stat: what a file's bytes said, reused while it is unchanged.

`chapters status` counts the store's chapters, names the ones that do not read and the ones
modified since archived, and compares every chapter of ours with its copy in the pool mirror;
`chapters sync` makes the same comparison. Each of these read every file of the store and
of the mirror, on every run: seconds at a few thousand chapters, minutes at a hundred thousand.
Here each file's facts (its sha256, whether its frontmatter reads, its kind, whether its body
still matches its recorded sha256) are kept under its stat, as git's index keeps a file's hash,
so a run reads only the files that changed since the last one.

A stat is the file's size, modification and change times in nanoseconds, inode and device.
A program cannot set the change time back (`touch -d` sets the modification time only), and a
file replaced by a rename is another inode, so a file whose stat is unchanged holds the same
bytes. One case remains, as git knows: a file written twice within its timestamps' granularity
keeps its stat. So a file changed in the last `RACY_SECONDS` is read every time and its facts are
not kept until it is older.

The facts live in the store's machine-local `cache/` (never published; deleting them is always
safe) and are written back once, when the process ends, if it learned anything. A file that
fails to read is never kept, so it is judged again on every run.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from stat import S_ISREG
from typing import Any

from dsh_chapters_core.errors import ChaptersError

from dsh_chapters_fs.atomic import write_atomic
from dsh_chapters_fs.containment import contained_stat

FORMAT = 1  # raised whenever what a fact means changes: older files are then ignored whole
RACY_SECONDS = 2  # a file changed this recently may change again within one timestamp tick


def stat_key(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}"


class FileFacts:
    """Facts of the files under `root`, by relative path, each valid for one stat, kept in the
    file `path` (in the store's `cache/`, whichever tree they describe).

    Read lazily (a command that never asks loads nothing) and written back at exit."""

    def __init__(self, path: str | os.PathLike[str], root: str | os.PathLike[str], *,
                 racy_seconds: float | None = None) -> None:
        self.path = Path(path)
        self.root = Path(root)
        seconds = RACY_SECONDS if racy_seconds is None else racy_seconds
        self._racy_ns = int(seconds * 1_000_000_000)
        self._files: dict[str, list[Any]] | None = None  # relpath -> [stat key, {fact: value}]
        self._seen: set[str] = set()
        self._learned: dict[str, list[Any]] = {}  # what this process found, to be written

    def _loaded(self) -> dict[str, list[Any]]:
        if self._files is None:
            self._files = self._read()
        return self._files

    def _read(self) -> dict[str, list[Any]]:
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}  # absent or damaged: every file is read once more
        files = data.get("files") if isinstance(data, dict) else None
        if not isinstance(files, dict) or data.get("format") != FORMAT:
            return {}
        return {k: v for k, v in files.items()
                if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
                and isinstance(v[1], dict)}

    def recall(self, relpath: str, kinds: Mapping[str, type],
               read: Callable[[], dict[str, Any]]) -> Mapping[str, Any]:
        """The facts `kinds` names (each of its type) of the file at `relpath`: kept ones while
        its stat is unchanged, else `read()`'s, kept for the next run. `read` raises as the
        file's own read does for a file that is gone or does not read."""
        try:
            # Kept facts are of this very inode, read before through the containment check:
            # an unchanged stat is enough to trust them. Only a file read now is checked
            # again, component by component.
            st = os.lstat(os.path.join(self.root, relpath))
        except OSError:
            pass
        else:
            known = self.get(relpath, st) if S_ISREG(st.st_mode) else {}
            if all(isinstance(known.get(name), kind) for name, kind in kinds.items()):
                return known
        fresh = contained_stat(str(self.root), relpath)  # taken before the read it keys
        facts = read()
        if fresh is not None:
            self.put(relpath, fresh, facts)
        return facts

    def get(self, relpath: str, st: os.stat_result) -> Mapping[str, Any]:
        """The facts kept for the file as `st` finds it: empty when it changed since."""
        self._seen.add(relpath)
        entry = self._loaded().get(relpath)
        if entry is None or entry[0] != stat_key(st):
            return {}
        facts: Mapping[str, Any] = entry[1]
        return facts

    def put(self, relpath: str, st: os.stat_result, facts: Mapping[str, Any]) -> None:
        """Keep `facts` of the file whose stat was `st` when it was read (taken before reading:
        a file changed meanwhile has another stat by the next run, and is read again)."""
        if max(st.st_mtime_ns, st.st_ctime_ns) > time.time_ns() - self._racy_ns:
            return
        self._seen.add(relpath)
        files = self._loaded()
        key = stat_key(st)
        entry = files.get(relpath)
        merged = {**entry[1], **facts} if entry is not None and entry[0] == key else dict(facts)
        if entry is None or entry[0] != key or entry[1] != merged:
            files[relpath] = self._learned[relpath] = [key, merged]
            _keep_at_exit(self)

    def save(self) -> None:
        """Write back what this process learned, over what the file holds now (another
        process may have written it meanwhile). Facts of a file not asked about here are kept
        while the file is there."""
        if not self._learned:
            return
        if not self.path.parent.parent.is_dir():
            return  # the store is gone (or never was): never create it for a cache
        files = self._read()
        files.update(self._learned)
        kept = {relpath: entry for relpath, entry in sorted(files.items())
                if relpath in self._seen or os.path.lexists(self.root / relpath)}
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(exist_ok=True)
        with contextlib.suppress(OSError, ChaptersError):  # a cache: a failed write costs a read
            write_atomic(self.path, json.dumps(
                {"format": FORMAT, "files": kept}, separators=(",", ":")).encode())
            self._learned = {}


# Held until written, one a facts file: a command's App is gone by the time the process exits.
# A long-running process (the MCP server, `chapters watch`) composes an App again and again:
# an older FileFacts of the same file is written as a newer one takes its place, so what waits
# for the exit stays one object a file.
_pending: dict[str, FileFacts] = {}


def _keep_at_exit(facts: FileFacts) -> None:
    key = str(facts.path)
    older = _pending.get(key)
    if older is facts:
        return
    if not _pending:
        atexit.unregister(save_all)  # registered once however often it empties
        atexit.register(save_all)
    _pending[key] = facts
    if older is not None:
        older.save()


def save_all() -> None:
    """Write back every FileFacts that learned something since it was last written (at exit)."""
    while _pending:
        _pending.pop(next(iter(_pending))).save()
