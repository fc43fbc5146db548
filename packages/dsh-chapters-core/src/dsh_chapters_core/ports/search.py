"""Ports of search and the two-layer index (§8, §10): reading documents one at a time, cheap
change detection, removing derived files, path containment, and the persistent search cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from dsh_chapters_core.documents import Document
from dsh_chapters_core.ports.store import FileTree
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import BodyBound, BodyStats
from dsh_chapters_core.search.scorer import LexicalWeights
from dsh_chapters_core.search.terms import QueryWord


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


@dataclass(frozen=True, slots=True)
class CandidatePage:
    """What `SearchCache.top_candidates` hands over.

    `entries`: every matched entry that can be among the best `limit` of its scope (a
    superset), plus every matched special entry (legacy fragment, core rule) whatever its
    bound. `plain_total`: how many matched entries in scope are not legacy fragments.
    """

    entries: list[SearchEntry]
    plain_total: int


@dataclass(frozen=True, slots=True)
class BoundedCandidates:
    """What `SearchCache.bounded` hands over: every match in scope, as (path, ceiling) pairs
    in descending order of ceiling (then newest, then path), and how many there are. The rows
    are produced lazily: a caller that stops early never pays for the rest."""

    total: int
    rows: Iterator[tuple[str, float]]


@dataclass(frozen=True, slots=True)
class Holding:
    """Query elements a candidate must hold one of: frontmatter terms, and body words (by
    their index in `BodyBound.terms`). With `all_of`, a candidate must instead hold one of
    each of those holdings (every element of a set, each by any of its terms)."""

    terms: frozenset[str] = frozenset()
    words: frozenset[int] = frozenset()
    all_of: tuple[Holding, ...] = ()

    def held(self, fields: AbstractSet[str], words: AbstractSet[int]) -> bool:
        """Whether an entry with these frontmatter terms and body words (indices) is listed:
        the reference the caches are tested against."""
        if self.all_of:
            return all(part.held(fields, words) for part in self.all_of)
        return not self.terms.isdisjoint(fields) or not self.words.isdisjoint(words)


@dataclass(frozen=True, slots=True)
class DoorMaxima:
    """What any one entry of a door can hold at most, per query element: per frontmatter
    term the fields it occurs in anywhere (`t`opic, t`i`tle, `s`ummary, `c`ategory marks),
    and per body term the largest m and the smallest l of any body's profile (a term no body
    holds is absent). Bounds only: they may be looser than the door is now, never tighter."""

    fields: Mapping[str, str]
    body: Mapping[str, tuple[int, int]]


class SearchCache(Protocol):
    """A persistent, derived candidate index for one door (`.dsh-chapters/cache/`).

    It only narrows: `candidates` returns every entry holding at least one of the terms (a
    superset is allowed, a miss is not), and `rank_entries` scores them exactly, so the cache
    can never change a ranking. It is keyed by the index manifest and by the alias table;
    callers rebuild or patch it when either differs.
    """

    def state(self) -> Mapping[str, str]:
        """`{"manifest": key, "aliases": key, "manifestFingerprint": token}`; {} when missing."""
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
        """Write (entry, sha256) rows, drop paths, record the new state; `reset` empties first."""
        ...

    def candidates(self, terms: Sequence[str],
                   body_terms: Sequence[str] = ()) -> list[SearchEntry]:
        """Every entry holding one of `terms` in a frontmatter field or one of `body_terms`
        (code-aware terms, search/terms.py) in its body."""
        ...

    def body_stats(self, words: Sequence[QueryWord]) -> BodyStats:
        """The door's body statistics for these query words (documents, df, line length)."""
        ...

    def top_candidates(
        self,
        terms: Sequence[str],
        *,
        weights: LexicalWeights,
        limit: int,
        project_key: str = "",
        special: frozenset[str] = frozenset(),
    ) -> CandidatePage:
        """Matched entries in scope (`project_key` or none; "" = every project), narrowed by
        the lexical bound (`weights` per term and field, category once) to a superset of the
        best `limit` non-special ones (ties by date, then path), plus all matched specials:
        legacy fragments (whatever their project: a span is scoped by its first member, after
        stitching) and rules whose id or path is in `special`."""
        ...

    def bounded(
        self,
        terms: Sequence[str],
        body: BodyBound | None,
        *,
        weights: LexicalWeights,
        body_weight: float,
        slack: float,
        project_key: str = "",
        within: Holding | None = None,
        count: bool = True,
    ) -> BoundedCandidates | None:
        """Every entry in scope that holds a frontmatter term or a query word in its body, with
        a ceiling of its score: the lexical bound (`weights`, as `top_candidates`) plus
        `slack`, plus `body_weight` times `body.ceiling` of its body's profile. With `within`,
        only the entries holding one of its elements are listed (their ceilings still count
        every element), and `total` still counts every match in scope (0 without `count`: a
        later round of the same query has it already). None when the door
        cannot be bounded (legacy fragments are stitched before they are scored, or the
        profiles were built for another passage size): the caller scores every candidate."""
        ...

    def maxima(self, terms: Sequence[str], body: BodyBound | None) -> DoorMaxima:
        """The door's maxima for these frontmatter terms and `body`'s terms (`DoorMaxima`),
        for profiles cut at `body.lines`."""
        ...

    def fragments(self, session_dirs: Iterable[str]) -> list[SearchEntry]:
        """Every legacy fragment of these sessions (stitching needs a candidate's siblings)."""
        ...

    def by_paths(self, paths: Iterable[str]) -> list[SearchEntry]: ...

    def count(self) -> int: ...

    def close(self) -> None: ...
