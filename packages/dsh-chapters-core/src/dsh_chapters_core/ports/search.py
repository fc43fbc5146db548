"""Ports of search and the two-layer index (§8, §10): reading documents one at a time, cheap
change detection, removing derived files, path containment, and the machine-local search index.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from dsh_chapters_core.documents import Document
from dsh_chapters_core.ports.store import FileTree
from dsh_chapters_core.search.dates import TimeWindow
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import BodyStats
from dsh_chapters_core.search.topk import DocFacts, Postings


class DocumentReader(Protocol):
    """Parses one chapter, plan or rule file (frontmatter is read at the edge).

    Returns None for a file that is not a readable document; the index counts it as skipped.
    """

    def parse(self, path: str, data: bytes) -> Document | None: ...


class DerivedTree(FileTree, Protocol):
    """A door's tree as the index sees it: a FileTree that may also drop a derived file,
    write one from pieces, and report a cheap, machine-local change token, so an update reads
    only what changed.
    """

    def write_chunks(self, path: str, chunks: Iterable[bytes]) -> None:
        """`write` of the chunks' concatenation, atomic the same way. A derived file that
        grows with the corpus (the manifest, the change tokens) is written as it is made, so
        it is never held whole in memory next to what it is made from."""
        ...

    def remove(self, path: str) -> None:
        """Delete a derived file (a shard whose topic is gone). Missing is not an error."""
        ...

    def fingerprint(self, path: str) -> str:
        """Size and modification time as a token; "" when the file does not exist."""
        ...

    def fingerprints(self, prefix: str = "", *, skip: Iterable[str] = ()) -> Mapping[str, str]:
        """Every file under `prefix` with its token, in one walk; top-level directories named
        in `skip` are not entered."""
        ...


class ContainedTree(FileTree, Protocol):
    """A FileTree that can tell whether a path stays inside its root once symlinks resolve."""

    def contains(self, path: str) -> bool: ...


class SearchIndex(Protocol):
    """A door's search index (`.dsh-chapters/cache/search-<door>.sqlite`): derived,
    machine-local, kept current where documents are written.

    It holds each document's frontmatter fields and terms, and its body as passages: per
    passage its line range and length, and per term the postings a query scores from
    (search/topk.py). A query reads the postings of its own terms and the facts of the
    documents it scores; it never reads a chapter's text. It is keyed by the index manifest
    and the curation facts; callers rebuild or patch it when either differs.
    """

    def state(self) -> Mapping[str, str]:
        """`{"manifest": key, "curation": key, "manifestFingerprint": token}`; {} when empty."""
        ...

    def shas(self) -> Mapping[str, str]:
        """Per document path, the content hash its row was built from."""
        ...

    def apply(
        self,
        *,
        upserts: Iterable[tuple[SearchEntry, str]],
        removed: Iterable[str],
        state: Mapping[str, str],
        reset: bool = False,
    ) -> None:
        """Index (entry, sha256) pairs (an entry's body is cut into passages here), drop
        paths, record the new state; `reset` empties first."""
        ...

    def seed_from(self, other: SearchIndex, paths: Mapping[str, str]) -> int:
        """An empty index takes `other`'s rows of these documents (`other`'s path: this
        index's path) as they are, as if it had read the same bytes; the rest of `other` is
        left out. Returns how many it took: 0 when it cannot (it is not empty, `other` is of
        another kind or cuts passages at another size). Its state is left empty, so the caller
        compares every row with its manifest next."""
        ...

    def stats(self, terms: Sequence[str]) -> BodyStats:
        """The door's documents, passages and passage words, and each body term's document
        frequency."""
        ...

    def postings(self, terms: Sequence[str]) -> list[Postings | None]:
        """Each body term's postings (None for a term no body holds)."""
        ...

    def field_hits(self, terms: Sequence[str]) -> Mapping[int, FieldHits]:
        """Per document whose frontmatter holds one of these (canonical) terms: its hits."""
        ...

    def excluded(self, project_key: str) -> AbstractSet[int]:
        """Documents a query must skip: gone since their postings were written, and, with a
        `project_key`, those of another project (a document of none is in every scope)."""
        ...

    def facts(self, ids: Sequence[int]) -> Mapping[int, DocFacts]:
        """What scoring needs of these documents (missing ids are gone)."""
        ...

    def entries(self, ids: Sequence[int]) -> Mapping[int, SearchEntry]:
        """These documents as entries (frontmatter fields; no body text)."""
        ...

    def ids(self, paths: Iterable[str]) -> Mapping[str, int]:
        """The document ids of these paths (missing paths are absent)."""
        ...

    def dated(self, window: TimeWindow) -> frozenset[int]:
        """The documents dated within the window (search/dates.py)."""
        ...

    def has_legacy(self) -> bool:
        """Whether the door holds legacy fragments (they are stitched before they rank)."""
        ...

    def fragments(self, session_dirs: Iterable[str]) -> list[SearchEntry]:
        """Every legacy fragment of these sessions (stitching needs a candidate's siblings)."""
        ...

    def by_paths(self, paths: Iterable[str]) -> list[SearchEntry]: ...

    def chapter_shas(self) -> Mapping[str, str]:
        """Per chapter path, the content hash its row was built from (rules and plans left
        out): what the mirror door compares to find this machine's unpublished chapters."""
        ...

    def count(self, prefix: str = "") -> int:
        """How many documents the index holds (whose path starts with `prefix`)."""
        ...

    def release(self) -> None:
        """Let go of what the last question read (cached reads; for SQLite, the read
        transaction that kept them consistent): the next question reads the index as it is
        then, and a long-lived caller (the viewer) holds nothing between questions."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FieldHits:
    """A document's frontmatter hits for one query: how many query terms hit a topic, the
    title and the summary, and whether one hit its category; `rule` names a rule's id and
    path, for the per-machine core bonus."""

    topic: int = 0
    title: int = 0
    summary: int = 0
    category: bool = False
    rule: tuple[str, str] = ("", "")


NO_FIELD_HITS = FieldHits()
