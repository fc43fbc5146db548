"""Search and the two-layer index (§8, §10, search.md): one scorer for every door and kind."""

from dsh_chapters_core.search.aliases import EMPTY_ALIASES, AliasMap, slugify, tokenize
from dsh_chapters_core.search.entries import SearchEntry, entry_from_document, make_entry
from dsh_chapters_core.search.packing import (
    AnswerStatus,
    Budget,
    SearchAnswer,
    SearchRefusal,
    pack_results,
    render_line,
)
from dsh_chapters_core.search.scorer import ScoredEntry, rank_entries
from dsh_chapters_core.search.stitching import stitch_fragments

__all__ = [
    "EMPTY_ALIASES",
    "AliasMap",
    "AnswerStatus",
    "Budget",
    "ScoredEntry",
    "SearchAnswer",
    "SearchEntry",
    "SearchRefusal",
    "entry_from_document",
    "make_entry",
    "pack_results",
    "rank_entries",
    "render_line",
    "slugify",
    "stitch_fragments",
    "tokenize",
]
