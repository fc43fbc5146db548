"""Stitching legacy compaction fragments into one search entry (search.md, "Stitching").

Old pressure-sliced chapters are titled "Earlier history" or "Conversation span". When such
fragments sit next to each other in one session (chapter numbers n, n+1, ...), search shows
them as ONE entry that cites every member. It is a read view: nothing is merged on disk and
no chapter is rewritten. A stitched entry is a function of its session's fragments only, so a
cache that fetches a candidate's session siblings stitches exactly as a full scan does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.search.entries import SearchEntry

LEGACY_TITLE = re.compile(r"^\s*(earlier history|conversation span)\b", re.IGNORECASE)


def is_legacy_fragment(entry: SearchEntry) -> bool:
    return (
        entry.kind is DocumentKind.CHAPTER
        and not entry.members
        and bool(LEGACY_TITLE.match(entry.title))
        and entry.number > 0
    )


def stitch_run(run: Sequence[SearchEntry]) -> SearchEntry:
    """One entry for adjacent fragments: the union of their terms, every member cited."""
    first = run[0]
    if len(run) == 1:
        return first
    newest = max(run, key=lambda e: (e.date_key, e.path))
    topics = sorted({t for e in run for t in e.topics})
    return SearchEntry(
        path=first.path,
        kind=first.kind,
        title=f"{first.title} (stitched: {len(run)} fragments)",
        date=newest.date,
        topics=tuple(topics),
        summary=" ".join(e.summary for e in run if e.summary),
        project_key=first.project_key,
        session_id=first.session_id,
        members=tuple(e.path for e in run),
        date_key=newest.date_key,
        topic_terms=frozenset().union(*(e.topic_terms for e in run)),
        title_terms=frozenset().union(*(e.title_terms for e in run)),
        summary_terms=frozenset().union(*(e.summary_terms for e in run)),
        category_terms=frozenset(),
        raw_topics=tuple(dict.fromkeys(t for e in run for t in e.raw_topics)),
    )


def stitch_fragments(entries: Iterable[SearchEntry]) -> tuple[SearchEntry, ...]:
    """Replace each run of adjacent legacy fragments by one stitched entry.

    Everything else passes through unchanged and in order; a stitched entry takes the place
    of its first member.
    """
    items = list(entries)
    by_session: dict[str, list[SearchEntry]] = {}
    for entry in items:
        if is_legacy_fragment(entry):
            by_session.setdefault(entry.session_dir, []).append(entry)
    if not by_session:
        return tuple(items)
    replacement: dict[str, SearchEntry | None] = {}
    for fragments in by_session.values():
        fragments.sort(key=lambda e: (e.number, e.path))
        run: list[SearchEntry] = []
        for fragment in fragments:
            if run and fragment.number != run[-1].number + 1:
                _close(run, replacement)
                run = []
            run.append(fragment)
        _close(run, replacement)
    out: list[SearchEntry] = []
    for entry in items:
        if entry.path in replacement and is_legacy_fragment(entry):
            stitched = replacement[entry.path]
            if stitched is not None:
                out.append(stitched)
        else:
            out.append(entry)
    return tuple(out)


def _close(run: list[SearchEntry], replacement: dict[str, SearchEntry | None]) -> None:
    if len(run) < 2:
        return
    stitched = stitch_run(run)
    replacement[run[0].path] = stitched
    for member in run[1:]:
        replacement[member.path] = None
