"""Fakes of the search ports: a derived tree in memory, a frontmatter reader, and a cache.

`MemorySearchIndex` keeps documents and their passages in dicts and builds postings on demand,
so service tests run the indexed path without SQLite, and the SQLite index is compared with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.ports.search import FieldHits
from dsh_chapters_core.search.dates import TimeWindow
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.impacts import ImpactList, adds, impact_list
from dsh_chapters_core.search.passages import BodyStats, Passage, body_passages, body_stats
from dsh_chapters_core.search.stitching import is_legacy_fragment
from dsh_chapters_core.search.topk import DocFacts, Postings, TermPostings
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


class MemorySearchIndex:
    """The `SearchIndex` contract in memory: documents by id, their passages, the state.

    Postings are built from the passages on each query, the way the contract defines them,
    so it is also the reference the SQLite index is compared with.

    `lists` (documents per part, holders from which a part keeps a list, how many it keeps,
    and the average passage length it was written at, as a share of today's) splits every
    term's postings into parts with lists of their strongest holders (impacts.py), as a
    segmented index writes them; None: one part, no list."""

    def __init__(self, *, passage_lines: int = DEFAULTS.search_passage_lines,
                 lists: tuple[int, int, int, float] | None = None) -> None:
        self.passage_lines = passage_lines
        self.lists = lists
        self.docs: dict[int, tuple[SearchEntry, str, list[Passage]]] = {}
        self.by_path: dict[str, int] = {}
        self._state: dict[str, str] = {}
        self._next = 1
        self.applies = 0

    def state(self) -> Mapping[str, str]:
        return dict(self._state)

    def shas(self) -> Mapping[str, str]:
        return {e.path: sha for e, sha, _ in self.docs.values()}

    def apply(self, *, upserts: Iterable[tuple[SearchEntry, str]], removed: Iterable[str],
              state: Mapping[str, str], reset: bool = False) -> None:
        self.applies += 1
        if reset:
            self.docs.clear()
            self.by_path.clear()
        for path in removed:
            doc = self.by_path.pop(path, None)
            if doc is not None:
                del self.docs[doc]
        for entry, sha in upserts:
            old = self.by_path.get(entry.path)
            if old is not None and self.docs[old][1] == sha:
                # The same bytes under other aliases: the fields change, the body does not.
                self.docs[old] = (dataclasses.replace(entry, body=""), sha, self.docs[old][2])
                continue
            if old is not None:
                del self.docs[old]
            doc = self._next
            self._next += 1
            self.docs[doc] = (dataclasses.replace(entry, body=""), sha,
                              body_passages(entry.body, self.passage_lines))
            self.by_path[entry.path] = doc
        if state:
            self._state = dict(state)

    def seed_from(self, other: object, paths: Mapping[str, str]) -> int:
        if (self.docs or not isinstance(other, MemorySearchIndex)
                or other.passage_lines != self.passage_lines):
            return 0
        for doc in sorted(other.docs):
            entry, sha, passages = other.docs[doc]
            twin = paths.get(entry.path)
            if twin is None:
                continue
            self.docs[self._next] = (dataclasses.replace(entry, path=twin), sha, passages)
            self.by_path[twin] = self._next
            self._next += 1
        self._state = {}
        return len(self.docs)

    def stats(self, terms: Sequence[str]) -> BodyStats:
        return body_stats((ps for _, _, ps in self.docs.values()), terms,
                          documents=len(self.docs))

    def postings(self, terms: Sequence[str]) -> list[Postings | None]:
        out: list[Postings | None] = []
        for term in terms:
            rows = [(doc, i, p.tf[term], p.length, p.mentions()[term])
                    for doc in sorted(self.docs)
                    for i, p in enumerate(self.docs[doc][2]) if term in p.tf]
            out.append(TermPostings([r[0] for r in rows], [r[1] for r in rows],
                                    [r[2] for r in rows], [r[3] for r in rows],
                                    max(r[2] for r in rows), min(r[3] for r in rows),
                                    [r[4] for r in rows], list(dict.fromkeys(r[0] for r in rows)),
                                    self._parts(rows))
                       if rows else None)
        return out

    def _parts(self, rows: Sequence[tuple[int, int, int, int, int]]
               ) -> list[tuple[int, ImpactList | None]]:
        if self.lists is None:
            return []
        size, holders, keep, share = self.lists
        docs = sorted(self.docs)
        expected = self.stats(()).expected * share
        parts: list[tuple[int, ImpactList | None]] = []
        for first in range(0, len(docs), size):
            low, high = docs[first], docs[min(first + size, len(docs)) - 1]
            part = [r for r in rows if low <= r[0] <= high]
            if not part:
                continue
            found = adds([r[0] for r in part], [r[2] for r in part], [r[3] for r in part],
                         expected) if expected > 0 else {}
            kept = impact_list(found, expected, keep=keep) if len(found) >= holders else None
            parts.append((len(part), kept))
        return parts

    def field_hits(self, terms: Sequence[str]) -> Mapping[int, FieldHits]:
        wanted = tuple(dict.fromkeys(terms))
        out: dict[int, FieldHits] = {}
        for doc, (e, _, _) in self.docs.items():
            hits = FieldHits(sum(t in e.topic_terms for t in wanted),
                             sum(t in e.title_terms for t in wanted),
                             sum(t in e.summary_terms for t in wanted),
                             any(t in e.category_terms for t in wanted),
                             (e.rule_id, e.path) if e.kind is DocumentKind.RULE else ("", ""))
            if hits.topic or hits.title or hits.summary or hits.category:
                out[doc] = hits
        return out

    def excluded(self, project_key: str) -> AbstractSet[int]:
        if not project_key:
            return frozenset()
        return frozenset(doc for doc, (e, _, _) in self.docs.items()
                         if e.project_key not in (project_key, ""))

    def facts(self, ids: Sequence[int]) -> Mapping[int, DocFacts]:
        return {doc: DocFacts(e.path, e.date_key, [p.first for p in ps], [p.lines for p in ps])
                for doc in ids if doc in self.docs for e, _, ps in (self.docs[doc],)}

    def entries(self, ids: Sequence[int]) -> Mapping[int, SearchEntry]:
        return {doc: self.docs[doc][0] for doc in ids if doc in self.docs}

    def ids(self, paths: Iterable[str]) -> Mapping[str, int]:
        return {p: self.by_path[p] for p in paths if p in self.by_path}

    def dated(self, window: TimeWindow) -> frozenset[int]:
        return frozenset(doc for doc, (e, _, _) in self.docs.items()
                         if window.holds_key(e.date_key))

    def has_legacy(self) -> bool:
        return any(is_legacy_fragment(e) for e, _, _ in self.docs.values())

    def fragments(self, session_dirs: Iterable[str]) -> list[SearchEntry]:
        dirs = set(session_dirs)
        return [e for e, _, _ in self.docs.values()
                if e.session_dir in dirs and is_legacy_fragment(e)]

    def by_paths(self, paths: Iterable[str]) -> list[SearchEntry]:
        return [self.docs[self.by_path[p]][0] for p in paths if p in self.by_path]

    def chapter_shas(self) -> Mapping[str, str]:
        return {e.path: sha for e, sha, _ in self.docs.values()
                if e.kind is DocumentKind.CHAPTER}

    def count(self, prefix: str = "") -> int:
        return sum(1 for e, _, _ in self.docs.values() if e.path.startswith(prefix))

    def release(self) -> None:
        return None

    def close(self) -> None:
        return None


def chapter_path(session: str, number: int, slug: str) -> str:
    """A store chapter path: `<sid>/chapters/NNN-<slug>.md`."""
    return f"{session}/chapters/{number:03d}-{slug}.md"
