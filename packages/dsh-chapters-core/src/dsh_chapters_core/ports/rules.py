"""What rules and the notice read besides plain files (§7): single documents by path.

Writing needs nothing new: a rule file and a curation line are atomic `FileTree.write`s under
the writer lock. Reading goes through `FileTree.list` for paths (only `rules/` and this
session's `chapters/`, never the whole corpus: §1 invariant 6) and this port for the parse,
so the frontmatter → `Document` mapping stays in one place, at the edge.
"""

from __future__ import annotations

from typing import Protocol

from dsh_chapters_core.documents import Document


class DocumentShelf(Protocol):
    """One store document by its store-relative path, frontmatter parsed at the edge."""

    def document(self, path: str) -> Document: ...
