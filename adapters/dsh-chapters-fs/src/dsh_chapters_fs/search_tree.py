"""The filesystem side of search: a door's tree as the index and the readers see it.

`SearchTree` adds to `DirectoryTree` what the index needs (drop a derived shard, a cheap
change token from `stat`) and what reading needs (symlink containment). `FrontmatterReader`
turns one file's bytes into a `Document` with the store's own semantics (`parse_document`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path

from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.frontmatter import split_frontmatter

from dsh_chapters_fs.atomic import TEMP_SUFFIX, is_temp_name, note_write
from dsh_chapters_fs.chapterfile import (
    parse_document,
)
from dsh_chapters_fs.tree import _SKIPPED_DIRS as SKIPPED_DIRS
from dsh_chapters_fs.tree import DirectoryTree

# Derived, machine-rebuildable files: a crash may lose one (the next update finds it divergent
# or missing and re-renders it), so they skip the fsyncs a chapter or a fact needs.
DERIVED_PREFIXES = ("index/", "topics/", "cache/")


class SearchTree(DirectoryTree):
    """A DerivedTree and ContainedTree over a real directory (the store or the mirror)."""

    def write(self, path: str, data: bytes) -> None:
        """Atomic always (temp file, rename); durable (fsync) unless the file is derived."""
        if not path.startswith(DERIVED_PREFIXES):
            super().write(path, data)
            return
        self.write_chunks(path, (data,))

    def write_chunks(self, path: str, chunks: Iterable[bytes]) -> None:
        """`write`, with the chunks going into the temp file as they come: the manifest and
        the change tokens of a big corpus are never one string in memory."""
        if not path.startswith(DERIVED_PREFIXES):
            super().write(path, b"".join(chunks))
            return
        note_write()  # a writer section that refreshed the index did write (lock.py)
        target = self._abs(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        import secrets  # on write only: a search that writes nothing never loads it

        tmp = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}"
        try:
            with tmp.open("wb") as out:
                for chunk in chunks:
                    out.write(chunk)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def remove(self, path: str) -> None:
        try:
            self._abs(path).unlink()
        except FileNotFoundError:
            return

    def fingerprint(self, path: str) -> str:
        """`<size>:<mtime_ns>`: machine-local, so it is never written into a shared file."""
        try:
            st = os.stat(self._abs(path))
        except (FileNotFoundError, NotADirectoryError):
            return ""
        return f"{st.st_size}:{st.st_mtime_ns}"

    def fingerprints(self, prefix: str = "", *, skip: Iterable[str] = ()) -> dict[str, str]:
        """One walk with `os.scandir`: paths and `<size>:<mtime_ns>` tokens, no Path objects."""
        skipped = frozenset(skip)
        base = self.root.rstrip("/")
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        found: dict[str, str] = {}
        stack = [head]
        while stack:
            rel = stack.pop()
            try:
                entries = os.scandir(f"{base}/{rel}" if rel else base)
            except OSError:  # gone, not a directory, or unreadable: nothing of it is listed
                continue
            with entries:
                for entry in entries:
                    name = entry.name
                    path = f"{rel}/{name}" if rel else name
                    if entry.is_dir(follow_symlinks=False):
                        if name not in SKIPPED_DIRS and not (not rel and name in skipped):
                            stack.append(path)
                    elif not is_temp_name(name) and path.startswith(prefix):
                        try:
                            st = entry.stat()
                        except FileNotFoundError:
                            continue
                        found[path] = f"{st.st_size}:{st.st_mtime_ns}"
        return found

    def contains(self, path: str) -> bool:
        """True when the path, symlinks resolved, stays inside the root."""
        root = Path(os.path.realpath(self.root))
        target = Path(os.path.realpath(self._abs(path)))
        return target == root or root in target.parents


class FrontmatterReader:
    """A DocumentReader with the store's semantics: the store's own `parse_document` (json for
    the core's format, PyYAML for anything else), so a file reads exactly as `show` reads it;
    with `bodies`, the chapter's body and the line it starts on, which search needs."""

    def __init__(self, *, bodies: bool = False) -> None:
        self.bodies = bodies  # search reads chapter bodies; the store's own reads do not

    def parse(self, path: str, data: bytes) -> Document | None:
        text = data.decode("utf-8", errors="replace")
        doc = parse_document(path, text)  # quarantines what it cannot read
        if not self.bodies or doc.kind is DocumentKind.RULE:
            return doc
        # Search reads a chapter's body too, and where it starts, for anchors (search.md).
        body = split_frontmatter(text)[1]
        first_line = text.count("\n", 0, len(text) - len(body)) + 1
        return dataclasses.replace(doc, body=body, body_line=first_line)
