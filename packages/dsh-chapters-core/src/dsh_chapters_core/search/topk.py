"""The best `limit` matches without scoring every body (search.md "Reading few bodies").

Scoring a body means reading it line by line; a common word is held by most of a corpus. So
the cache hands over every match with a ceiling of its score (frontmatter hits exactly, the
body by its profile: passages.BodyBound), best ceiling first, and the matches are scored
exactly, a batch at a time, until the `limit`-th best exact score is above the next ceiling:
nothing further down can reach the top. The answer is exactly the head of `rank_entries`
over every match (the same scorer decides; the ceiling only says where to stop).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice

from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.scorer import ScoredEntry

# A ceiling is computed in another engine's floating point: a margin far above rounding noise
# and far below any score difference the scorer can make (scores are rounded to 9 digits).
CEILING_MARGIN = 1e-6


def best_of(
    ceilings: Iterator[tuple[str, float]],
    *,
    limit: int,
    load: Callable[[Sequence[str]], Iterable[SearchEntry]],
    score: Callable[[Sequence[SearchEntry]], Sequence[ScoredEntry]],
    batch: int = 0,
) -> tuple[tuple[ScoredEntry, ...], int]:
    """The best `limit` of the matches, exactly ranked, and how many entries were scored.
    Batches are `limit` entries (at least 8) unless `batch` says otherwise: the first batch
    is usually all a clear answer needs."""
    batch = batch or max(8, limit)
    best: list[ScoredEntry] = []
    scored = 0
    pending: list[tuple[str, float]] = []
    while True:
        pending.extend(islice(ceilings, batch - len(pending)))
        if not pending:
            break
        # Stop when the `limit`-th exact score beats the best ceiling left.
        if len(best) >= limit and best[limit - 1].score > pending[0][1] + CEILING_MARGIN:
            break
        paths = [p for p, _ in pending]
        pending = []
        entries = list(load(paths))
        scored += len(entries)
        best = sorted([*best, *score(entries)], key=lambda s: s.sort_key)[:limit]
    return tuple(best), scored
