"""Stitching (search.md): adjacent legacy fragments come back as ONE entry; nothing on disk."""

from __future__ import annotations

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.search import make_entry, rank_entries, stitch_fragments
from dsh_chapters_core.search.entries import SearchEntry


def frag(session: str, n: int, title: str, summary: str = "", topics: tuple[str, ...] = ()
         ) -> SearchEntry:
    return make_entry(path=f"{session}/chapters/{n:03d}-part.md", kind=DocumentKind.CHAPTER,
                      title=title, summary=summary, topics=topics, date=f"2026-01-{n:02d}")


def test_adjacent_fragments_in_one_session_become_one_entry() -> None:
    entries = [
        frag("s", 1, "Earlier history", "deploy script", ("deploy",)),
        frag("s", 2, "Conversation span 2", "sqlite cache", ("cache",)),
        frag("s", 3, "Earlier history", "more cache"),
        frag("s", 4, "Real chapter about cache"),
        frag("s", 5, "Earlier history", "isolated"),
    ]
    out = stitch_fragments(entries)
    assert [e.cited_paths for e in out] == [
        ("s/chapters/001-part.md", "s/chapters/002-part.md", "s/chapters/003-part.md"),
        ("s/chapters/004-part.md",),
        ("s/chapters/005-part.md",),
    ]
    stitched = out[0]
    assert stitched.topics == ("cache", "deploy")
    assert stitched.date == "2026-01-03"  # the newest member
    assert "(stitched: 3 fragments)" in stitched.title


def test_a_query_hitting_one_member_finds_the_whole_span() -> None:
    entries = [frag("s", 1, "Earlier history", "deploy script"),
               frag("s", 2, "Earlier history", "sqlite cache")]
    (hit,) = rank_entries(stitch_fragments(entries), "sqlite", config=DEFAULTS)
    assert hit.entry.members == ("s/chapters/001-part.md", "s/chapters/002-part.md")


def test_fragments_in_different_sessions_or_with_gaps_stay_apart() -> None:
    entries = [frag("a", 1, "Earlier history"), frag("b", 2, "Earlier history"),
               frag("a", 3, "Earlier history")]
    assert [e.members for e in stitch_fragments(entries)] == [(), (), ()]


def test_stitching_is_order_independent() -> None:
    entries = [frag("s", n, "Earlier history", f"part {n}") for n in (3, 1, 2)]
    (one,) = stitch_fragments(entries)
    assert one.members == tuple(f"s/chapters/{n:03d}-part.md" for n in (1, 2, 3))
