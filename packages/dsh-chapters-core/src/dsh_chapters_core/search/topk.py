"""The best matches without scoring every body (search.md "Reading few bodies").

Scoring a body means reading it line by line; a common word is held by most of a corpus. So
the cache hands over every match with a ceiling of its score (frontmatter hits exactly, the
body by its profile: passages.BodyBound), best ceiling first, and the matches are scored
exactly, a batch at a time. A scored match is *certain* once its exact score is above the
next ceiling: nothing further down can reach it, so it is the next entry of the ranking.

The ranking is handed out lazily (`Ranking`): an answer packs lines best first until its
token budget is full, so a 400-token answer that shows four lines certifies four entries,
not the most any budget could show. What is handed out is exactly the head of
`rank_entries` over every match (the same scorer decides; the ceiling only says where to
stop).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import overload

from dsh_chapters_core.ports.search import DoorMaxima, Holding
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import BodyBound
from dsh_chapters_core.search.scorer import LexicalWeights, ScoredEntry

# A ceiling is computed in another engine's floating point: a margin far above rounding noise
# and far below any score difference the scorer can make (scores are rounded to 9 digits).
CEILING_MARGIN = 1e-6
# Bodies read per round: the first round is what a clear answer needs; a flat one (many
# near-equal scores) reads more per round, so the per-round cost of a lookup stays small.
FIRST_BATCH = 8
MAX_BATCH = 256


def certified(
    ceilings: Iterator[tuple[str, float]],
    *,
    limit: int,
    load: Callable[[Sequence[str]], Iterable[SearchEntry]],
    score: Callable[[Sequence[SearchEntry]], Sequence[ScoredEntry]],
    floor: float | None = None,
) -> Generator[ScoredEntry, None, float | None]:
    """The matches in exact rank order, at most `limit`, each yielded as soon as it is certain.
    `ceilings` are (path, ceiling) pairs, best ceiling first. With `floor`, matches that are
    not listed may exist, each scoring at most `floor`: nothing at or below it is certain, and
    the generator returns the best score it could not certify (None when it had none)."""
    batch = FIRST_BATCH
    waiting: list[ScoredEntry] = []  # scored, not yet certain; kept in rank order
    ahead: list[tuple[str, float]] = []  # the next ceilings, read but not scored
    given = 0
    while given < limit:
        if not ahead:
            ahead = list(islice(ceilings, batch))
        bar = max(ahead[0][1] if ahead else -math.inf,
                  floor if floor is not None else -math.inf)
        while waiting and given < limit and waiting[0].score > bar + CEILING_MARGIN:
            yield waiting.pop(0)
            given += 1
        if given >= limit:
            return None
        if not ahead or (floor is not None and ahead[0][1] <= floor + CEILING_MARGIN):
            # Nothing left here can rise above the floor: reading on would certify nothing.
            return waiting[0].score if waiting else None
        paths = [p for p, _ in ahead]
        ahead = []
        for item in score(list(load(paths))):
            bisect.insort(waiting, item, key=lambda s: s.sort_key)
        batch = min(batch * 2, MAX_BATCH)
    return None


@dataclass(frozen=True, slots=True)
class Element:
    """What one query word can give a match: its frontmatter `terms` and its body `word` (the
    index in `BodyBound.terms`, -1 for none), and the most they add to a ceiling in this door
    (`fields` from the frontmatter, `body` from the body's BM25 term, before its weight)."""

    fields: float
    body: float
    terms: frozenset[str] = frozenset()
    word: int = -1
    category: bool = False  # one of `terms` is some entry's category

    def bound(self, body_weight: float) -> float:
        return self.fields + body_weight * self.body


def elements(terms: Sequence[str], body: BodyBound | None, maxima: DoorMaxima,
             weights: LexicalWeights, body_weight: float) -> tuple[Element, ...]:
    """The query's elements that some entry holds, largest bound first (then a fixed order).
    A frontmatter term goes with the body word it is a term of (a word is rare or common in
    both places alike), unless the word weighs less in any body than the term in the
    frontmatter: a word every body holds (`session` of `render_session_config`) would make
    the term's holders everyone's, so the term stands alone and is listed by itself. A body
    word's bound is its BM25 term at the largest m and the smallest l its terms reach in any
    body. Any grouping gives the same answer; this one only decides what a round lists."""
    words = range(len(body.terms)) if body is not None else range(0)
    word_bound: dict[int, float] = {}
    if body is not None:
        for key in words:
            found = [maxima.body[t] for t in body.terms[key] if t in maxima.body]
            word_bound[key] = body.word_ceiling(key, sum(m for m, _ in found), min(
                length for _, length in found)) if found else 0.0
    fields: dict[int, list[str]] = {}
    for term in dict.fromkeys(terms):
        marks = maxima.fields.get(term)
        if not marks:
            continue  # no entry holds it: it matches nothing
        word = next((i for i, ts in enumerate(body.terms) if term in ts), -1) if body else -1
        if word >= 0 and body_weight * word_bound[word] < _weight(marks, weights):
            word = -1
        fields.setdefault(word if word >= 0 else -1 - len(fields), []).append(term)
    out: list[Element] = []
    for key in sorted({*fields, *words}):
        held = fields.get(key, [])
        lexical = sum(_weight(maxima.fields[t], weights, category=False) for t in held)
        category = any("c" in maxima.fields[t] for t in held)
        ceiling = word_bound.get(key, 0.0)
        if held or ceiling > 0:
            out.append(Element(lexical, ceiling, frozenset(held),
                               key if key >= 0 and ceiling > 0 else -1, category))
    return tuple(sorted(out, key=lambda e: (-e.bound(body_weight), sorted(e.terms), e.word)))


def _weight(marks: str, weights: LexicalWeights, *, category: bool = True) -> float:
    """The most a frontmatter term held in the fields `marks` names adds to a score."""
    return (weights.topic * ("t" in marks) + weights.title * ("i" in marks)
            + weights.summary * ("s" in marks) + (weights.category * ("c" in marks)
                                                  if category else 0.0))


def rest_bound(rest: Sequence[Element], body: BodyBound | None, weights: LexicalWeights,
               body_weight: float, slack: float) -> float:
    """The highest ceiling of an entry that holds only elements of `rest` (the cache's
    ceiling expression, each part at its largest)."""
    total = slack + sum(e.fields for e in rest)
    if any(e.category for e in rest):
        total += weights.category
    if body is not None:
        total += body_weight * body.held_ceiling((e.word, e.body) for e in rest if e.word >= 0)
    return total


def rounds(order: Sequence[Element], body: BodyBound | None, weights: LexicalWeights,
           body_weight: float, slack: float) -> list[tuple[Holding | None, float | None]]:
    """What each round lists and the most an entry it leaves out can score (MaxScore, search.md
    "Reading few bodies"); the last lists every match and leaves nothing out (None).

    First the holders of *every* one of the strongest elements: the query's words together
    are what the coordination factor and the phrase bonus reward, so an entry missing one of
    them scores at most the bound of the others, and the few entries holding them all are
    often certain at once. Each such round drops the weakest element; it is kept when that
    lowers its floor, to no more than halfway from round 1's floor to the most any entry
    can score. Then the holders of *any* of the first k elements, k = 1, 2, ..."""
    def holding(elements_: Sequence[Element]) -> Holding:
        return Holding(terms=frozenset(t for e in elements_ for t in e.terms),
                       words=frozenset(e.word for e in elements_ if e.word >= 0))

    def bound(rest: Sequence[Element]) -> float:
        return rest_bound(rest, body, weights, body_weight, slack)

    out: list[tuple[Holding | None, float | None]] = []
    # Kept only when its floor is nearer round 1's than the best any entry can score: a set
    # with a weak element leaves out entries scoring nearly that best, and certifies nothing.
    worth = (bound(order[1:]) + bound(order)) / 2 if order else -math.inf
    last = math.inf
    for j in range(len(order), 1, -1):
        floor = max(bound([*order[:i], *order[i + 1:]]) for i in range(j))
        if floor < last - CEILING_MARGIN and floor <= worth:
            out.append((Holding(all_of=tuple(holding([e]) for e in order[:j])), floor))
            last = floor
    out += [(holding(order[:k]), bound(order[k:])) for k in range(1, len(order))]
    out.append((None, None))
    return out


def deepening(
    floors: Sequence[float | None],
    rows: Callable[[int], Iterator[tuple[str, float]]],
    *,
    limit: int,
    load: Callable[[Sequence[str]], Iterable[SearchEntry]],
    score: Callable[[Sequence[SearchEntry]], Sequence[ScoredEntry]],
) -> Iterator[ScoredEntry]:
    """The ranking's head by rounds (`rounds`): round i lists `rows(i)`, and an entry it
    leaves out scores at most `floors[i]`, so what scores above that is certain after reading
    few rows. When a round stalls, the next ones whose floor is not below the best score
    still waiting are skipped; the last round (floor None) lists every match. Scores are kept
    across rounds, and a round re-certifies what earlier ones gave (the order is total)."""
    known: dict[str, ScoredEntry | None] = {}

    def scored(entries: Sequence[SearchEntry]) -> Sequence[ScoredEntry]:
        fresh = [e for e in entries if e.path not in known]
        for item in score(fresh):
            # Kept without its body: the anchor is taken, and a flat query keeps thousands.
            known[item.entry.path] = dataclasses.replace(
                item, entry=dataclasses.replace(item.entry, body=""))
        for e in fresh:
            known.setdefault(e.path, None)
        return [s for e in entries if (s := known[e.path]) is not None]

    given = 0
    i = 0
    while True:
        floor = floors[i]
        gen = certified(rows(i), limit=limit, load=load, score=scored, floor=floor)
        n = 0
        while True:
            try:
                item = next(gen)
            except StopIteration as stop:
                waiting: float | None = stop.value
                break
            n += 1
            if n > given:
                yield item
                given += 1
        if floor is None or given >= limit:
            return
        i += 1
        if waiting is not None:
            while (next_floor := floors[i]) is not None and next_floor >= waiting - CEILING_MARGIN:
                i += 1


class Ranking(Sequence[ScoredEntry]):
    """A ranking read on demand: indexing, slicing and iterating pull only as far as asked;
    `len()` pulls it all (up to the generator's limit)."""

    def __init__(self, items: Iterator[ScoredEntry]) -> None:
        self._items = items
        self._seen: list[ScoredEntry] = []
        self._done = False

    def _pull(self, upto: int | None) -> None:
        while not self._done and (upto is None or len(self._seen) < upto):
            item = next(self._items, None)
            if item is None:
                self._done = True
            else:
                self._seen.append(item)

    @overload
    def __getitem__(self, index: int) -> ScoredEntry: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ScoredEntry, ...]: ...

    def __getitem__(self, index: int | slice) -> ScoredEntry | tuple[ScoredEntry, ...]:
        if isinstance(index, slice):
            bounded = index.stop is not None and index.stop >= 0 and (
                index.start is None or index.start >= 0)
            self._pull(index.stop if bounded else None)
            return tuple(self._seen[index])
        self._pull(index + 1 if index >= 0 else None)
        return self._seen[index]

    def __iter__(self) -> Iterator[ScoredEntry]:
        n = 0
        while True:
            self._pull(n + 1)
            if n >= len(self._seen):
                return
            yield self._seen[n]
            n += 1

    def __len__(self) -> int:
        self._pull(None)
        return len(self._seen)

    def __bool__(self) -> bool:
        self._pull(1)
        return bool(self._seen)
