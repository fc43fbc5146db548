"""Reading archived text back: artifacts and chapters, by path or bare sha (§8 "receipts").

The one read door of every caller: `chapters show` and `chapters artifact`, the viewer's
`/chapter/…` and the MCP server's `chapters_read` / `chapters_artifact`.
- Roots are searched in order (the store first, then the mirror); a miss names every root.
- Containment: `..`, absolute paths and symlinks that leave a root are refused, never read.
- Only documents are read: chapters, artifacts, rules and topic shards, in the root's layout
  (§2.2 for the mirror). `config.toml`, `state/`, `logs/`, `cache/`, `session.json`, `.git/`
  and anything else of either root is refused, and so is a pool file copy-in quarantined.
- A line is what `\n` ends (a `\r` inside a line is text): search anchors count lines so,
  and every page here does too (`split_lines`).
- Line caps: `artifactReadDefaultLines` (200) by default, `artifactReadMaxLines` (400) at
  most, and the answer always reports the totals and where the next page starts.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.errors import (
    Argument,
    ArgumentError,
    ArgumentWords,
    ChaptersError,
    NextStep,
    UsageError,
    plain_argument,
)
from dsh_chapters_core.pool_layout import (
    LOCAL_STORE_DIRS,
    SHARED_STORE_DIRS,
    WITHHOLD_ALL,
    path_problem,
)
from dsh_chapters_core.ports.search import ContainedTree

_SHA = re.compile(r"^[0-9a-f]{64}$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_NUMBERED_MD = re.compile(r"^[0-9]{3,}-[^/]*\.md$")
_SHARD = re.compile(r"^index/[^/]+\.md$")
# Store top-level names that are never a session (so never hold a chapter).
_NOT_SESSIONS = frozenset((*SHARED_STORE_DIRS, *LOCAL_STORE_DIRS))


class ReadableKind(enum.StrEnum):
    """What a read door serves; nothing else of a root is ever read."""

    CHAPTER = "chapter"
    ARTIFACT = "artifact"
    RULE = "rule"
    SHARD = "topic shard"


def split_lines(text: str) -> list[str]:
    """The lines of `text` as search anchors count them: each ends at `\n` (a `\r` inside a
    line is text, never a break); a final newline ends the last line, not a new empty one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


@dataclass(frozen=True, slots=True)
class ReadRoot:
    """A root to read from: its name ("store", "mirror"), its workspace-relative directory
    (`.dsh-chapters`), the tree, and the projectKey its artifact paths carry (mirror)."""

    name: str
    directory: str
    tree: ContainedTree
    project_key: str = ""
    mirror_layout: bool = False
    # Pool paths copy-in quarantined (path -> reason): never served (a path ending in `/`
    # withholds everything under it, as an unsafe directory entry does).
    withheld: Mapping[str, str] = field(default_factory=dict)

    def readable_kind(self, path: str) -> ReadableKind | None:
        """The one containment check of every read door: which document `path` (relative to
        this root) is, or None when it is none and must not be read."""
        if path_problem(path):
            return None
        parts = path.split("/")
        if _SHARD.match(path):
            return ReadableKind.SHARD
        if self.mirror_layout:  # §2.2: <kind>/<projectKey>/…
            if len(parts) == 4 and parts[0] == "chapters" and _NUMBERED_MD.match(parts[3]):
                return ReadableKind.CHAPTER
            if len(parts) == 4 and parts[0] == "rules" and parts[3].endswith(".md"):
                return ReadableKind.RULE
            if (len(parts) == 4 and parts[0] == "artifacts" and _SHA.match(parts[3])
                    and parts[2] == parts[3][:2]):
                return ReadableKind.ARTIFACT
            return None
        if len(parts) == 3 and parts[1] == "chapters" and _NUMBERED_MD.match(parts[2]) \
                and parts[0] not in _NOT_SESSIONS:
            return ReadableKind.CHAPTER
        if len(parts) == 3 and parts[0] == "rules" and parts[2].endswith(".md") \
                and not parts[2].startswith("."):
            return ReadableKind.RULE
        if (len(parts) == 3 and parts[0] == "artifacts" and parts[2].endswith(".txt")
                and _SHA.match(parts[2][:-4]) and parts[1] == parts[2][:2]):
            return ReadableKind.ARTIFACT
        return None

    def withheld_reason(self, path: str) -> str:
        """Why copy-in quarantined this path or a directory above it ("" when it did not);
        a withheld `/` withholds the whole root."""
        held = self.withheld
        if not held:
            return ""
        if WITHHOLD_ALL in held:
            return held[WITHHOLD_ALL] or "quarantined"
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            why = held.get("/".join(parts[:depth]))
            if why is not None:
                return why or "quarantined"
        return ""


@dataclass(frozen=True, slots=True)
class ResolvedFile:
    """A document a read reference resolved to: the root that holds it and its path in that root."""

    root: ReadRoot
    path: str  # root-relative

    @property
    def display(self) -> str:
        return f"{self.root.directory}/{self.path}"


@dataclass(frozen=True, slots=True)
class LineSlice:
    """One page of a document's lines, with the file's line total, the effective limit and whether
    the caller asked for more than the cap."""

    path: str
    offset: int  # 0-based first line returned
    lines: tuple[str, ...]
    total_lines: int
    limit: int  # the effective limit after the cap
    capped: bool  # the caller asked for more than `artifactReadMaxLines`

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.lines)
        return end if end < self.total_lines else None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "offset": self.offset, "limit": self.limit,
                "lines": list(self.lines), "returned": len(self.lines),
                "totalLines": self.total_lines, "nextOffset": self.next_offset,
                "capped": self.capped}

    def text(self, words: ArgumentWords = plain_argument) -> str:
        end = self.offset + len(self.lines)
        head = f"{self.path}: lines {self.offset + 1}-{end} of {self.total_lines}"
        if self.capped:
            head += f" (capped at {self.limit} lines)"
        if self.next_offset is not None:
            head += f"; next: {words(Argument.OFFSET, self.next_offset)}"
        width = len(str(max(end, 1)))
        body = [f"{n:>{width}}  {line}" for n, line in enumerate(self.lines, start=self.offset + 1)]
        return "\n".join((head, *body))


@dataclass(frozen=True, slots=True)
class TocEntry:
    """One table-of-contents row: a heading (or a block of lines), its 1-based line and level."""

    line: int  # 1-based
    level: int
    title: str


@dataclass(frozen=True, slots=True)
class Toc:
    """A document's table of contents: its headings with line numbers, or one entry per block of
    lines when it has none."""

    path: str
    total_lines: int
    entries: tuple[TocEntry, ...]
    block: int  # without headings: the toc lists one entry per block of this many lines

    def to_json(self) -> dict[str, Any]:
        entries = [{"line": e.line, "level": e.level, "title": e.title} for e in self.entries]
        return {"path": self.path, "totalLines": self.total_lines, "entries": entries}

    def text(self, words: ArgumentWords = plain_argument) -> str:
        head = f"{self.path}: {self.total_lines} lines, {len(self.entries)} toc entries"
        rows = (f"{e.line:>6}  {'  ' * (e.level - 1)}{e.title}" for e in self.entries)
        return "\n".join((head, *rows))


@dataclass(frozen=True, slots=True)
class LineMatches:
    """The lines of a document holding every word of a query, capped, with match and line totals."""

    path: str
    query: str
    matches: tuple[tuple[int, str], ...]  # (1-based line, text)
    total_matches: int
    total_lines: int
    limit: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "query": self.query, "totalLines": self.total_lines,
                "totalMatches": self.total_matches, "shown": len(self.matches),
                "matches": [{"line": n, "text": t} for n, t in self.matches]}

    def text(self, words: ArgumentWords = plain_argument) -> str:
        head = (f"{self.path}: {self.total_matches} lines match {self.query!r} "
                f"(showing {len(self.matches)}) of {self.total_lines} lines")
        if len(self.matches) < self.total_matches:
            head += ("; narrow the query or read with "
                     f"{words(Argument.OFFSET, self.matches[-1][0])}")
        return "\n".join((head, *(f"{n:>6}  {t}" for n, t in self.matches)))


def check_relative(ref: str) -> str:
    """A plain relative path; `..` and absolute paths are refused (containment)."""
    norm = ref.replace("\\", "/")
    parts = norm.split("/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm) or ".." in parts:
        raise ChaptersError(f"refused: {ref!r} leaves the archive (absolute or '..')",
                            hint="pass a path inside .dsh-chapters/ or .dsh-knowledge/, or a sha")
    return "/".join(p for p in parts if p not in ("", "."))


def _candidates(ref: str, root: ReadRoot) -> list[str]:
    if _SHA.match(ref):
        if root.mirror_layout:
            return [f"artifacts/{root.project_key}/{ref[:2]}/{ref}"] if root.project_key else []
        return [f"artifacts/{ref[:2]}/{ref}.txt"]
    path = check_relative(ref)
    prefix = root.directory.rstrip("/") + "/"
    if path.startswith(prefix):
        return [path[len(prefix):]]
    if any(path.startswith(r) for r in (".dsh-chapters/", ".dsh-knowledge/")):
        return []  # it names the other root
    return [path]


def resolve(ref: str, roots: Sequence[ReadRoot],
            kinds: frozenset[ReadableKind] = frozenset(ReadableKind)) -> ResolvedFile:
    """The first root holding `ref` (a path, workspace- or root-relative, or a bare sha) as a
    document of one of `kinds`. Anything else is refused before it is looked for, so a read
    door never says whether an internal file exists."""
    ref = ref.strip()
    if not ref:
        raise UsageError("no path or sha given", step=NextStep.NAME_FILE)
    refused: list[str] = []
    looked = False  # some root takes it for a document: a miss is then "not found"
    for root in roots:
        for path in _candidates(ref, root):
            if not path:
                continue
            kind = root.readable_kind(path)
            if kind is None or kind not in kinds:
                refused.append(f"{root.directory}/{path}")
                continue
            looked = True
            why = root.withheld_reason(path)
            if why:
                # a pool file the last sync set aside is never served; the doctor names it
                raise ChaptersError(f"refused: {root.directory}/{path} is quarantined ({why})",
                                    step=NextStep.REPAIR_UNSAFE_FILE)
            # Containment next: a tree refuses to say a symlink exists, but one that leaves
            # the root is named as what it is.
            if not root.tree.contains(path):
                raise ChaptersError(
                    f"refused: {root.directory}/{path} is a symlink that leaves {root.directory}",
                    hint="only files inside the archive are read")
            if not root.tree.exists(path):
                continue
            return ResolvedFile(root, path)
    if refused and not looked:
        names = [str(k) for k in ReadableKind if k in kinds]
        what = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        raise ChaptersError(
            f"refused: {refused[0]} is not a {what} (a read door reads nothing else of the "
            "archive)", step=NextStep.COPY_SEARCH_PATH)
    searched = ", ".join(f"{r.name} ({r.directory})" for r in roots) or "no roots"
    raise ChaptersError(f"not found: {ref!r}; searched {len(roots)} roots: {searched}",
                        step=NextStep.COPY_SEARCH_PATH)


def read_text(file: ResolvedFile) -> str:
    return file.root.tree.read(file.path).decode("utf-8", errors="replace")


def _limit(limit: int | None, config: Config) -> tuple[int, bool]:
    wanted = config.artifact_read_default_lines if limit is None else limit
    if wanted < 1:
        raise ArgumentError(Argument.LIMIT, f"must be at least 1, got {wanted}",
                            hint=f"the default is {config.artifact_read_default_lines}")
    cap = config.artifact_read_max_lines
    return (cap, True) if wanted > cap else (wanted, False)


def read_lines(text: str, *, path: str, config: Config, offset: int = 0,
               limit: int | None = None) -> LineSlice:
    if offset < 0:
        raise ArgumentError(Argument.OFFSET, f"must be 0 or more, got {offset}",
                            step=NextStep.READ_FROM_TOP)
    effective, capped = _limit(limit, config)
    lines = split_lines(text)
    if offset > len(lines):
        raise ArgumentError(Argument.OFFSET, f"is past the end: {path} has {len(lines)} lines",
                            value=offset, hint=f"use an offset below {len(lines)}")
    return LineSlice(path=path, offset=offset, lines=tuple(lines[offset:offset + effective]),
                     total_lines=len(lines), limit=effective, capped=capped)


def table_of_contents(text: str, *, path: str, config: Config) -> Toc:
    """Markdown headings with line numbers; a file without any gets one entry per block."""
    lines = split_lines(text)
    entries: list[TocEntry] = []
    fenced = False
    for n, line in enumerate(lines, start=1):
        if line.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            entries.append(TocEntry(n, len(match.group(1)), match.group(2)))
    block = config.artifact_read_default_lines
    if not entries:
        for start in range(0, len(lines), block):
            first = next((s.strip() for s in lines[start:start + block] if s.strip()), "")
            entries.append(TocEntry(start + 1, 1, first[:80] or "(blank)"))
    cap = config.artifact_read_max_lines
    return Toc(path=path, total_lines=len(lines), entries=tuple(entries[:cap]), block=block)


def search_lines(text: str, query: str, *, path: str, config: Config,
                 limit: int | None = None) -> LineMatches:
    """Lines containing every word of `query` (case-insensitive), capped like a read."""
    words = [w for w in query.casefold().split() if w]
    if not words:
        raise UsageError("artifact search needs words",
                         step=NextStep.NAME_LINE_WORDS)
    effective, _ = _limit(limit, config)
    lines = split_lines(text)
    hits = [(n, line) for n, line in enumerate(lines, start=1)
            if all(w in line.casefold() for w in words)]
    return LineMatches(path=path, query=query, matches=tuple(hits[:effective]),
                       total_matches=len(hits), total_lines=len(lines), limit=effective)
