"""Search entries: a document as the scorer sees it, with its canonical terms precomputed.

Terms are computed once, when the entry is built (from a document, or by the search cache),
so a query costs set lookups, not tokenization. An entry is built under one `AliasMap`; the
cache records which one and rebuilds its rows when the curation facts change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.search.aliases import EMPTY_ALIASES, AliasMap

_NUMBERED = re.compile(r"^([0-9]+)-")


@dataclass(frozen=True, slots=True)
class SearchEntry:
    """One rankable unit. `path` is door-relative; a stitched entry cites all `members`."""

    path: str
    kind: DocumentKind
    title: str
    date: str = ""
    topics: tuple[str, ...] = ()  # canonical labels, sorted, distinct
    summary: str = ""  # the scored text: a chapter's summary, a rule's body
    category: str = ""
    project_key: str = ""
    session_id: str = ""
    rule_id: str = ""  # rules: "<harnessId>/<NNN>", the id rule-status facts name
    members: tuple[str, ...] = ()  # stitched legacy fragments, in order; () for a plain entry
    date_key: float = 0.0  # epoch seconds of `date` (0 when unknown); breaks ties only
    topic_terms: frozenset[str] = field(default=frozenset())
    title_terms: frozenset[str] = field(default=frozenset())
    summary_terms: frozenset[str] = field(default=frozenset())
    category_terms: frozenset[str] = field(default=frozenset())
    raw_topics: tuple[str, ...] = ()  # the labels as the file has them (before aliases)
    body: str = ""  # a chapter's body as written (scored by passages; "" for rules and plans)
    body_line: int = 0  # the file line of the body's first line (anchors are file lines)

    @property
    def cited_paths(self) -> tuple[str, ...]:
        return self.members or (self.path,)

    @property
    def session_dir(self) -> str:
        """The directory that holds this entry's file: the session, for chapters."""
        return self.path.rsplit("/", 1)[0] if "/" in self.path else ""

    @property
    def number(self) -> int:
        """The chapter's NNN (0 when the file name has none)."""
        match = _NUMBERED.match(self.path.rsplit("/", 1)[-1])
        return int(match.group(1)) if match else 0


def date_key(date: str) -> float:
    """Epoch seconds of an ISO-8601 date or timestamp; 0.0 when absent or unreadable."""
    if not date:
        return 0.0
    try:
        moment = datetime.fromisoformat(date.strip().replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def rule_id_of(path: str) -> str:
    """`rules/[<projectKey>/]<harnessId>/NNN-<category>-<slug>.md` -> `<harnessId>/<NNN>`."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "rules":
        return ""
    match = _NUMBERED.match(parts[-1])
    return f"{parts[-2]}/{match.group(1)}" if match else ""


def make_entry(
    *,
    path: str,
    kind: DocumentKind,
    title: str,
    summary: str = "",
    topics: Iterable[str] = (),
    date: str = "",
    category: str = "",
    project_key: str = "",
    session_id: str = "",
    aliases: AliasMap = EMPTY_ALIASES,
    pins: Iterable[str] = (),
    body: str = "",
    body_line: int = 0,
) -> SearchEntry:
    """Build an entry and its canonical terms. `pins` are extra topics from `topic-pin` facts.
    `body_line` is kept as given: an entry rebuilt from an index row has no body and still
    knows where its body starts in the file."""
    raw = tuple(topics)
    labels = sorted({c for c in (aliases.canonical(t) for t in (*raw, *pins)) if c})
    topic_terms: set[str] = set()
    for label in labels:
        topic_terms.update(aliases.label_terms(label))
    return SearchEntry(
        path=path,
        kind=kind,
        title=title,
        date=date,
        topics=tuple(labels),
        summary=summary,
        category=category,
        project_key=project_key,
        session_id=session_id,
        rule_id=rule_id_of(path) if kind is DocumentKind.RULE else "",
        date_key=date_key(date),
        topic_terms=frozenset(topic_terms),
        title_terms=frozenset(aliases.text_terms(title)),
        summary_terms=frozenset(aliases.text_terms(summary)),
        category_terms=frozenset(aliases.label_terms(category)) if category else frozenset(),
        raw_topics=raw,
        body=body,
        body_line=body_line,
    )


def scored_text(doc: Document) -> str:
    """§8: a rule's body scores as its summary."""
    if doc.kind is DocumentKind.RULE and doc.body:
        return doc.body
    return doc.summary


def entry_from_document(
    doc: Document, *, aliases: AliasMap = EMPTY_ALIASES, pins: Iterable[str] = ()
) -> SearchEntry:
    body = doc.body if doc.kind is not DocumentKind.RULE else ""
    return make_entry(
        path=doc.path,
        kind=doc.kind,
        title=doc.title,
        summary=scored_text(doc),
        topics=doc.topics,
        date=doc.date,
        category=doc.category,
        project_key=doc.project_key,
        session_id=doc.session_id,
        aliases=aliases,
        pins=pins,
        body=body,
        body_line=doc.body_line if body else 0,  # a line of no body (a rule's) is 0
    )
