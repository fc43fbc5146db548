"""A common word's strongest holders, kept where its postings are written (search.md "Top
matches").

A word most chapters hold has postings too long to walk for every question that names it. So
each part of its postings (one segment of the index) with at least `HOLDERS` holders keeps,
beside its rows, a list: the `KEEP` holders the word adds most to (the most it adds to one of
their passages plus the second passage's share of the next most, as a walk counts it, without
its idf), and the most any other holder of the part gets (`rest`). A question takes those
holders as candidates, each with what the word adds to it, and bounds every other document by
`rest`, instead of reading every row (topk.py).

What a word adds depends on the door's average passage length (`expected`), which moves as
chapters are written. A list keeps the length it was computed at. With a longer average, BM25
never adds more than the ratio of the two lengths times what it added; with a shorter one, never
more at all. So a question raises each addition by that ratio when its own length is longer,
and the list still bounds it. The rules' k1, b and second share are the defaults'; a search
under other settings walks the word's postings whole, as without the lists.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.search.passages import PassageRules

# A part with this many holders keeps a list; a smaller part is walked whole (its rows are
# few), so a list is written only where it saves a walk.
HOLDERS = 2048
# How many holders a list keeps: a question over common words takes a few hundred of each
# word's strongest before the first answers are certain (measured on generated chapters).
KEEP = 256

_K1 = DEFAULTS.search_bm25_k1
_B = DEFAULTS.search_bm25_b
_SHARE = DEFAULTS.search_second_passage_share


@dataclass(frozen=True, slots=True)
class ImpactList:
    """A part's strongest holders of a word, strongest first, with what the word adds to
    each (without its idf, at `expected`); `rest` bounds every other holder of the part."""

    docs: Sequence[int]
    adds: Sequence[float]
    rest: float
    expected: float


def usable(rules: PassageRules) -> bool:
    """Whether lists bound a search under these rules: they are written under the defaults."""
    return rules.k1 == _K1 and rules.b == _B and rules.second_share == _SHARE


def raised(found: ImpactList, expected: float) -> float:
    """What bounds the list's additions under a door of this average passage length."""
    return expected / found.expected if expected > found.expected else 1.0


def additions(docs: Sequence[int], tf: Sequence[int], length: Sequence[int], top: float,
              base: float, slope: float, share: float) -> dict[int, float]:
    """Per holder (rows in document order), the most a word adds to one of its passages plus
    `share` of the next most: BM25 as top·tf / (tf + base + slope·words), per row. A
    document's rows are consecutive, so its two largest are kept as they are read."""
    out: dict[int, float] = {}
    at, most, next_most = -1, 0.0, 0.0
    for doc, t, words in zip(docs, tf, length, strict=True):
        c = top * t / (t + base + slope * words)
        if doc != at:
            if at >= 0:
                out[at] = most + share * next_most
            at, most, next_most = doc, c, 0.0
        elif c > most:
            most, next_most = c, most
        elif c > next_most:
            next_most = c
    if at >= 0:
        out[at] = most + share * next_most
    return out


def adds(docs: Sequence[int], tf: Sequence[int], length: Sequence[int],
         expected: float) -> dict[int, float]:
    """`additions` under the default rules, without the word's idf: what a list keeps."""
    return additions(docs, tf, length, _K1 + 1.0, _K1 * (1.0 - _B), _K1 * _B / expected,
                     _SHARE)


def impact_list(found: Mapping[int, float], expected: float, rest: float = 0.0,
                keep: int | None = None) -> ImpactList:
    """The strongest `keep` (else `KEEP`) of these holders' additions (ties: the lower id
    first); `rest` is the most the others get, at least the given one."""
    keep = KEEP if keep is None else keep
    best = heapq.nlargest(keep + 1, found.items(), key=_strength)
    if len(best) > keep:
        rest = max(rest, best[keep][1])
        best = best[:keep]
    return ImpactList([d for d, _ in best], [a for _, a in best], rest, expected)


def _strength(item: tuple[int, float]) -> tuple[float, int]:
    return item[1], -item[0]


def merged_list(lists: Iterable[ImpactList], walked: Mapping[int, float], expected: float,
                dead: AbstractSet[int] = frozenset()) -> ImpactList:
    """One list of adjacent parts: their lists, and `walked` (the additions of the parts
    without one, computed at `expected`), each raised to the longest length among them, so
    every addition still bounds; a dead document is dropped."""
    parts = list(lists)
    at = max([*(p.expected for p in parts), *([expected] if walked else [])])
    found: dict[int, float] = {}
    rest = 0.0
    for p in parts:
        factor = at / p.expected
        rest = max(rest, p.rest * factor)
        found.update((d, a * factor) for d, a in zip(p.docs, p.adds, strict=True))
    if walked:
        factor = at / expected
        found.update((d, a * factor) for d, a in walked.items())
    for d in dead & found.keys():
        del found[d]
    return impact_list(found, at, rest)
