"""Documents in a store or a pool mirror, as search, rules and the notice see them.

Adapters parse frontmatter (yaml.safe_load at the edge) into these records; the core never
parses YAML. `path` is always relative to the door's root (`.dsh-chapters/` or `.dsh-knowledge/`)
and uses forward slashes, so the same document has the same identity on every machine.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class DocumentKind(enum.StrEnum):
    CHAPTER = "chapter"
    PLAN = "plan"
    RULE = "rule"


@dataclass(frozen=True, slots=True)
class Provenance:
    """One link of the `generated:` chain (§2.4), newest first in a chapter's frontmatter."""

    by: str  # "deterministic" | "model"
    model: str = ""
    at: str = ""


@dataclass(frozen=True, slots=True)
class Document:
    """A chapter, plan or rule as the core reads it: frontmatter fields and the body."""

    path: str
    kind: DocumentKind
    title: str
    summary: str = ""
    topics: tuple[str, ...] = ()
    date: str = ""  # ISO-8601; recency only ever breaks ties (§8)
    project_key: str = ""
    session_id: str = ""
    harness_id: str = ""
    category: str = ""  # rules only
    status: str = ""  # rules: the file's own status (always "proposed"; approval is a fact)
    body: str = ""  # rules: the text, which scores as the summary; chapters: "" unless asked
    body_line: int = 0  # 1-based file line of the body's first line, when `body` was read
    sha256: str = ""  # the frontmatter's claim about the body
    body_sha256: str = ""  # what the body hashes to now; differs => "modified since archived"
    seq_range: tuple[int, int] = (0, 0)
    messages: tuple[tuple[str, int], ...] = ()  # (role, count): (("assistant", 4), ("user", 2))
    extra: tuple[tuple[str, str], ...] = field(default=())  # unknown frontmatter, kept verbatim

    @property
    def modified_since_archived(self) -> bool:
        return bool(self.sha256) and bool(self.body_sha256) and self.sha256 != self.body_sha256


@dataclass(frozen=True, slots=True)
class ChapterTally:
    """What `chapters status` says of a store's chapters."""

    chapters: int
    modified: int  # chapters whose body no longer hashes to the sha256 they record
