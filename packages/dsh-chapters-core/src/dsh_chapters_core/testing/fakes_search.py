"""Fakes of the search ports: a derived tree in memory, a frontmatter reader, and a cache.

`MemorySearchCache` is a plain dict with a term -> paths map; it honours the cache contract
(a superset of candidates, never a miss), so service tests run the cached path without SQLite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.ports.search import BoundedCandidates, CandidatePage, DoorMaxima, Holding
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import BodyBound, BodyStats, body_profile, body_stats
from dsh_chapters_core.search.passages import body_terms as search_body_terms
from dsh_chapters_core.search.scorer import LexicalWeights
from dsh_chapters_core.search.stitching import is_legacy_fragment
from dsh_chapters_core.search.terms import QueryWord
from dsh_chapters_core.testing.fakes_rules import document_from_text
from dsh_chapters_core.testing.fakes_transport import MemoryTree


class MemoryDerivedTree(MemoryTree):
    """A MemoryTree with `remove`, `fingerprint` (a write counter) and `contains`.

    `links` maps a path to the target it points at, to test symlink containment.
    """

    def __init__(self, root: str = "mem://tree", files: Mapping[str, bytes] | None = None) -> None:
        super().__init__(root, files)
        self.versions: dict[str, int] = dict.fromkeys(self.files, 1)
        self.reads: list[str] = []
        self.links: dict[str, str] = {}

    def write(self, path: str, data: bytes) -> None:
        super().write(path, data)
        self.versions[path] = self.versions.get(path, 0) + 1

    def write_chunks(self, path: str, chunks: Iterable[bytes]) -> None:
        self.write(path, b"".join(chunks))

    def read(self, path: str) -> bytes:
        self.reads.append(path)
        return super().read(path)

    def remove(self, path: str) -> None:
        self.files.pop(path, None)
        self.versions.pop(path, None)

    def fingerprint(self, path: str) -> str:
        if path not in self.files:
            return ""
        return f"{len(self.files[path])}:{self.versions.get(path, 0)}"

    def fingerprints(self, prefix: str = "", *, skip: Iterable[str] = ()) -> Mapping[str, str]:
        skipped = tuple(f"{d}/" for d in skip)
        return {p: self.fingerprint(p) for p in sorted(self.files)
                if p.startswith(prefix) and not p.startswith(skipped)}

    def contains(self, path: str) -> bool:
        target = self.links.get(path)
        return target is None or not (target.startswith("/") or ".." in target.split("/"))


class CoreFrontmatterReader:
    """Reads the frontmatter the core writes, without YAML (the fs adapter uses yaml)."""

    def parse(self, path: str, data: bytes) -> Document | None:
        try:
            text = data.decode("utf-8")
            doc = document_from_text(path, text)
        except (ValueError, TypeError, UnicodeDecodeError):
            return None
        if doc.kind is DocumentKind.RULE or not doc.body:
            return doc
        first_line = text.count("\n", 0, len(text) - len(doc.body)) + 1
        return dataclasses.replace(doc, body_line=first_line)


def document_text(
    *,
    title: str,
    summary: str = "",
    topics: Sequence[str] = (),
    date: str = "",
    kind: str = "chapter",
    project_key: str = "",
    category: str = "",
    body: str = "body\n",
) -> bytes:
    """A chapter or rule file as the archive writes it (frontmatter + verbatim body)."""
    fields: dict[str, object] = {"title": title, "summary": summary, "topics": list(topics),
                                 "date": date, "kind": kind}
    if project_key:
        fields["projectKey"] = project_key
    if category:
        fields["category"] = category
    return (dump_frontmatter(fields) + body).encode("utf-8")


class MemorySearchCache:
    """The `SearchCache` contract in memory: rows, a term index, and the recorded state."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[SearchEntry, str]] = {}
        self._state: dict[str, str] = {}
        self.applies = 0

    def state(self) -> Mapping[str, str]:
        return dict(self._state)

    def shas(self) -> Mapping[str, str]:
        return {p: sha for p, (_, sha) in self.rows.items()}

    def apply(self, *, upserts: Iterable[tuple[SearchEntry, str]], removed: Iterable[str],
              state: Mapping[str, str], reset: bool = False) -> None:
        self.applies += 1
        if reset:
            self.rows.clear()
        for path in removed:
            self.rows.pop(path, None)
        for entry, sha in upserts:
            self.rows[entry.path] = (entry, sha)
        self._state = dict(state)

    def candidates(self, terms: Sequence[str],
                   body_terms: Sequence[str] = ()) -> list[SearchEntry]:
        wanted, in_body = set(terms), set(body_terms)
        return [e for e, _ in self.rows.values()
                if wanted & (e.topic_terms | e.title_terms | e.summary_terms | e.category_terms)
                or (in_body and in_body & search_body_terms(e.body))]

    def body_stats(self, words: Sequence[QueryWord]) -> BodyStats:
        return body_stats((e.body for e, _ in self.rows.values()), words)

    def top_candidates(self, terms: Sequence[str], *, weights: LexicalWeights, limit: int,
                       project_key: str = "", special: frozenset[str] = frozenset()
                       ) -> CandidatePage:
        """Every match in scope (a superset of any top `limit`): the contract, simply kept."""
        found = [e for e in self.candidates(terms) if is_legacy_fragment(e)
                 or not project_key or e.project_key in (project_key, "")]
        return CandidatePage(entries=found,
                             plain_total=sum(1 for e in found if not is_legacy_fragment(e)))

    def bounded(self, terms: Sequence[str], body: BodyBound | None, *,
                weights: LexicalWeights, body_weight: float, slack: float,
                project_key: str = "", within: Holding | None = None,
                count: bool = True) -> BoundedCandidates | None:
        """The contract by the core's reference expressions (`BodyBound.ceiling`)."""
        entries = [e for e, _ in self.rows.values()]
        if any(is_legacy_fragment(e) for e in entries):
            return None
        wanted = set(terms)
        rows: list[tuple[float, float, str]] = []
        total = 0
        for e in entries:
            if project_key and e.project_key not in (project_key, ""):
                continue
            fm = sum(weights.topic * (t in e.topic_terms) + weights.title * (t in e.title_terms)
                     + weights.summary * (t in e.summary_terms) for t in wanted)
            fm += weights.category if wanted & e.category_terms else 0.0
            fields = e.topic_terms | e.title_terms | e.summary_terms | e.category_terms
            held = wanted & fields
            ceiling = 0.0
            counts: tuple[tuple[int, int], ...] = ()
            if body is not None and e.body:
                profile = body_profile(e.body, body.lines)
                counts = body.word_counts(profile)
                ceiling = body.ceiling(counts)
            if not held and ceiling <= 0:
                continue
            total += 1
            if within is not None and not within.held(
                    fields, {i for i, (m, _) in enumerate(counts) if m}):
                continue
            rows.append((fm + slack + body_weight * ceiling, e.date_key, e.path))
        rows.sort(key=lambda r: (-r[0], -r[1], r[2]))
        return BoundedCandidates(total=total if count or within is None else 0,
                                 rows=iter([(p, c) for c, _, p in rows]))

    def maxima(self, terms: Sequence[str], bound: BodyBound | None) -> DoorMaxima:
        fields: dict[str, str] = {}
        body: dict[str, tuple[int, int]] = {}
        wanted = {t for ts in bound.terms for t in ts} if bound is not None else set()
        for e, _ in self.rows.values():
            for term in terms:
                marks = "".join(mark for mark, held in zip(
                    "tisc", (e.topic_terms, e.title_terms, e.summary_terms, e.category_terms),
                    strict=True) if term in held)
                fields[term] = "".join(m for m in "tisc" if m in fields.get(term, "") + marks)
            if bound is not None and wanted and e.body:
                profile = body_profile(e.body, bound.lines)
                for term in wanted & profile.counts.keys():
                    most, fewest = body.get(term, (0, profile.shortest[term]))
                    body[term] = (max(most, profile.counts[term]),
                                  min(fewest, profile.shortest[term]))
        return DoorMaxima(fields=fields, body=body)

    def fragments(self, session_dirs: Iterable[str]) -> list[SearchEntry]:
        dirs = set(session_dirs)
        return [e for e, _ in self.rows.values() if e.session_dir in dirs and is_legacy_fragment(e)]

    def by_paths(self, paths: Iterable[str]) -> list[SearchEntry]:
        return [self.rows[p][0] for p in paths if p in self.rows]

    def count(self) -> int:
        return len(self.rows)

    def close(self) -> None:
        return None


def chapter_path(session: str, number: int, slug: str) -> str:
    """A store chapter path: `<sid>/chapters/NNN-<slug>.md`."""
    return f"{session}/chapters/{number:03d}-{slug}.md"
