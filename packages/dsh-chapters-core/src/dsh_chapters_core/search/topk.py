"""The best matches from the index's postings alone (search.md "Top matches").

Every query term has postings: the documents whose body holds it, each with the most words
holding it in one passage (m) and the fewest words of a passage holding it (l), and per
(document, passage) the term's frequency. A document's body scores at most
Σ idf·sat(m, l) over the terms it holds, times the share it holds (`passages.term_ceiling`),
so its *ceiling* is known without scoring it, and its exact score needs only its own rows of
each term's postings and its passages' lengths. No chapter is read. (A term the best passage
lacks but another passage holds counts `chapter_share` of a held one: the passage's coverage
never passes the share of terms the document holds somewhere, so the ceiling still holds.
A body also adds `second_share` of its second-best passage's score. Two passages take each
term's two largest additions at most, one each: so a term adds its most plus the share of its
next most, and a term one passage alone holds adds no more than before.)

MaxScore (Turtle & Flood, 1995) over those: the terms are taken strongest first (the largest
most-any-passage-can-add, usually the rarest). Only the documents holding a term taken so far
(and those whose frontmatter matched) are candidates; a document holding none of them can
score at most what the other terms can add together, so once a match scores above that, the
weak terms' long lists are never walked, only looked up for the candidates. Candidates are
scored exactly, best ceiling first, and a scored match is *certain* once it scores above every
ceiling left and above what a document outside the candidates can reach: it is the next
entry of the ranking, exactly as scoring every match and sorting would place it (a property
test holds it to `rank_entries` over random corpora).

A common word's postings may also carry lists of its strongest holders (impacts.py): when
widening would walk such a word, its lists are taken instead. Each listed holder becomes a
candidate with what the word adds to it, and every other document may get at most the lists'
`rest` from the word. The word is walked whole only if a document outside could still beat
every candidate after that. At 100k generated chapters, a question of three words each held by
nine chapters in ten is certain after a few hundred holders of each.

The ranking is handed out lazily (`Ranking`): an answer packs lines best first until its
token budget is full, so a 400-token answer that shows four lines certifies four matches.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol, overload

from dsh_chapters_core.search import impacts
from dsh_chapters_core.search.impacts import ImpactList
from dsh_chapters_core.search.passages import (
    NO_BODY_MATCH,
    BodyMatch,
    PassageRules,
    adjacent_pairs,
    body_match,
    term_ceiling,
)
from dsh_chapters_core.search.scorer import ScoredEntry, dated_score, total_score

# A ceiling is compared with exact scores that were rounded to 9 digits: a margin far above
# that rounding and far below any score difference the scorer can make.
CEILING_MARGIN = 1e-6
# Documents scored per batch: the first batch is what a clear answer needs; a flat one (many
# near-equal ceilings) scores more per batch, so the cost of a lookup stays small.
FIRST_BATCH = 8
MAX_BATCH = 256
# Rows of postings walked before any document is scored, cheapest terms first (see
# `top_matches`): a cost knob of the search, never of its answer.
EAGER_ROWS = 8_000
# What one lookup of a document in a term's postings costs beyond its own rows (two binary
# searches), counted in rows walked: when lookups have cost more than walking the next term's
# rows, that term is walked instead. A cost knob, never of the answer.
LOOKUP_ROWS = 8


@dataclass(frozen=True, slots=True)
class TermPostings:
    """One body term's postings over a door: a row per (document, passage) that holds it, in
    document order, then passage order. Per row: the document's id, the passage's index in its
    document, the term's frequency there, the passage's words and the term's first mention
    among the passage's terms. `most` and `shortest` bound every row: no passage holds the
    term more often, none that holds it is shorter."""

    docs: Sequence[int]
    passage: Sequence[int]
    tf: Sequence[int]
    length: Sequence[int]
    most: int
    shortest: int
    mention: Sequence[int] = ()  # per row: the term's first mention among the passage's terms
    holders: Sequence[int] = ()  # the distinct documents, ascending (its df before removals)
    # The rows' parts in order (one per segment): how many rows, and the part's list of its
    # strongest holders when it keeps one (impacts.py). Empty: one part, without a list.
    parts: Sequence[tuple[int, ImpactList | None]] = ()

    @property
    def rows(self) -> int:
        return len(self.docs)

    def span(self, doc: int) -> tuple[int, int]:
        lo = bisect.bisect_left(self.docs, doc)
        return lo, bisect.bisect_right(self.docs, doc, lo)

    def rows_at(self, lo: int, hi: int, *, weights: bool = False) -> tuple[int, RowColumns]:
        return 0, (self.docs, self.passage, self.tf, self.length, self.mention)


# A term's rows by column (document, passage, frequency, passage words, first mention).
RowColumns = tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int], Sequence[int]]


class Postings(Protocol):
    """A term's postings as the search reads them: `TermPostings`, or an index's own that
    reads its columns only when a walk needs them all, and a lookup's rows alone before."""

    @property
    def docs(self) -> Sequence[int]: ...
    @property
    def passage(self) -> Sequence[int]: ...
    @property
    def tf(self) -> Sequence[int]: ...
    @property
    def length(self) -> Sequence[int]: ...
    @property
    def mention(self) -> Sequence[int]: ...
    @property
    def most(self) -> int: ...
    @property
    def shortest(self) -> int: ...
    @property
    def holders(self) -> Sequence[int]: ...
    @property
    def parts(self) -> Sequence[tuple[int, ImpactList | None]]: ...

    @property
    def rows(self) -> int:
        """How many rows (the columns' length), without reading them."""

    def span(self, doc: int) -> tuple[int, int]:
        """The document's rows, [lo, hi) (empty when it does not hold the term)."""

    def rows_at(self, lo: int, hi: int, *, weights: bool = False) -> tuple[int, RowColumns]:
        """Columns holding rows lo..hi-1, and the row their index 0 holds: row r is at
        r - base (the whole columns, base 0, when they are read). With `weights`, only the
        frequencies and passage words need hold them (a ceiling's lookup)."""


@dataclass(frozen=True, slots=True)
class DocFacts:
    """What ordering and anchors need of one document: its path and date key, and per passage
    its first body line (0-based) and its line count."""

    path: str
    date_key: float
    firsts: Sequence[int]
    spans: Sequence[int]


@dataclass(frozen=True, slots=True)
class Hit:
    """An exactly scored match: its document, score, frontmatter part and best passage."""

    doc: int
    score: float
    front: float
    body: BodyMatch
    facts: DocFacts
    dated: float = 0.0

    @property
    def sort_key(self) -> tuple[float, float, str]:
        return (-self.score, -self.facts.date_key, self.facts.path)


@dataclass(frozen=True, slots=True)
class BodyQuery:
    """A query's body side over one door: per term its postings (None when no body holds it)
    and inverse document frequency, the door's average passage length, and the rules."""

    postings: Sequence[Postings | None]
    idf: Sequence[float]
    expected: float
    rules: PassageRules
    weight: float

    @property
    def size(self) -> int:
        return len(self.idf)

    def upper(self, i: int) -> float:
        """The most term i adds to any passage of the door (its largest m, smallest l)."""
        p = self.postings[i]
        if p is None or not p.rows:
            return 0.0
        return term_ceiling(self.idf[i], p.most, p.shortest, self.rules.k1, self.rules.b,
                            self.expected)

    def best(self, doc: int, facts: DocFacts) -> BodyMatch:
        """The document's best passage, from its rows of each term's postings (the first of
        equal scores, as `passages.best_passage` picks it). The hot path of a query: the
        arithmetic is `passages.passage_score`'s, written out in the same order (terms in
        query order, each passage's sum started at its first term), so the floats agree."""
        q = self.size
        rules = self.rules
        k1, b, expected, idf = rules.k1, rules.b, self.expected, self.idf
        bonus, near, share = rules.phrase_bonus, rules.phrase_terms, rules.chapter_share
        acc: dict[int, list[float]] = {}  # passage -> [bm25, held, norm]
        mentions: dict[int, list[int]] = {}
        anywhere = 0  # the query terms the document holds in some passage
        for i, p in enumerate(self.postings):
            if p is None:
                continue
            lo, hi = p.span(doc)
            if lo == hi:
                continue
            anywhere += 1
            weight = idf[i]
            base, (_, passage, tf, length, mention) = p.rows_at(lo, hi)
            for row in range(lo - base, hi - base):
                at = passage[row]
                t = tf[row]
                held = acc.get(at)
                if held is None:
                    norm = k1 * (1.0 - b + b * length[row] / expected)
                    held = acc[at] = [0.0, 0, norm]
                    if bonus:
                        mentions[at] = [-1] * q
                held[0] += weight * (t * (k1 + 1.0)) / (t + held[2])
                held[1] += 1
                if bonus:
                    mentions[at][i] = mention[row]
        if not acc:
            return NO_BODY_MATCH
        best, at, apart, second = -1.0, -1, 0, 0.0
        for index in sorted(acc):
            bm25, count, _ = acc[index]
            elsewhere = anywhere - int(count) if share else 0
            score = bm25 * (count + share * elsewhere) / q
            if bonus:
                seen = mentions[index]
                pairs = sum(1 for i in range(1, q) if seen[i] >= 0 and seen[i - 1] >= 0
                            and abs(seen[i] - seen[i - 1]) <= near)
                score += bonus * pairs
            if score > best:
                best, at, apart, second = score, index, elsewhere, max(best, second)
            elif score > second:
                second = score
        return body_match(best, second, rules.second_share, at, facts.firsts[at],
                          facts.spans[at], apart)


def matching(body: BodyQuery, front: Mapping[int, float], excluded: AbstractSet[int]) -> int:
    """How many documents match: their body holds a term or their frontmatter matched."""
    found: set[int] = set(front)
    for p in body.postings:
        if p is not None:
            found.update(p.holders or p.docs)
    return len(found - excluded) if excluded else len(found)


_UNREAD, _LISTED, _WALKED = 0, 1, 2  # how far a term's postings have been read


def top_matches(
    body: BodyQuery,
    front: Mapping[int, float],
    *,
    excluded: AbstractSet[int],
    facts: Callable[[Sequence[int]], Mapping[int, DocFacts]],
    dated: Mapping[int, float] | None = None,
    eager_rows: int = EAGER_ROWS,
    lookup_rows: int = LOOKUP_ROWS,
) -> Iterator[Hit]:
    """Every match in exact rank order (score, then newest, then path), each handed out as
    soon as it is certain (see the module). `front` holds the frontmatter score of every
    document whose frontmatter matched, core-rule bonus included; `excluded` are documents
    out of scope or gone; `facts` reads what scoring needs of a batch of documents; `dated`
    adds a bonus to the documents dated when the question says (if they match). `eager_rows`
    and `lookup_rows` are the cost knobs above: they change how much is read, never the
    answer."""
    dated = dated or {}
    q = body.size if body.weight > 0 else 0
    # A body adds a share of its second-best passage. Of two passages, one takes a term's most
    # and the other at most its next most: so a term known by its rows adds its most plus the
    # share of its next most (a term held in one passage adds its most), and a term known only
    # by its bound adds that bound raised by the share.
    w = body.weight
    second_share = body.rules.second_share
    lifted = w * (1.0 + second_share)
    upper = [body.upper(i) for i in range(q)]
    # Strongest first; a term no body holds adds nothing and is left out.
    order = [i for i in sorted(range(q), key=lambda i: (-upper[i], i)) if upper[i] > 0]
    rules, expected, idf = body.rules, body.expected, body.idf
    # Per term: how far it is read. A listed term (its lists taken) adds to a listed holder
    # what the list says, and to any other document at most `rest_of`.
    state = [_UNREAD] * q
    rest_of = [0.0] * q
    # Per candidate: Σ over the terms read that it holds of the most the term adds to one of its
    # passages plus the share of the next most (another passage's). For a listed term, what it
    # adds less its `rest_of`, and `held` does not count it: then `ceiling`'s one expression,
    # which adds every open term's bound and counts it, holds for listed and unlisted alike.
    sums: dict[int, float] = {}
    held: dict[int, int] = {}  # per candidate: how many terms read it holds
    masks: dict[int, int] = {}  # per candidate: which terms read it holds (bit i: term i)
    bonus = rules.phrase_bonus

    def pairs(mask: int) -> int:
        """The most proximity pairs a passage holding these terms can have."""
        return adjacent_pairs([bool(mask >> i & 1) for i in range(q)]) if bonus else 0
    done: set[int] = set(excluded)  # scored, or never to be
    waiting: list[tuple[tuple[float, float, str], Hit]] = []  # scored, not yet certain
    heap: list[tuple[float, int]] = []  # (-ceiling, doc) of the candidates not yet scored

    reads = 0  # terms read so far, walked or listed: what `rest_bound` is cached by
    bounds: dict[int, tuple[float, int, int]] = {}

    def rest_bound() -> tuple[float, int, int]:
        """The open terms (not walked): the most they add together to a document that is not
        listed (an unread term its bound raised by the second passage's share, a listed one
        its rest), how many, which."""
        found = bounds.get(reads)
        if found is None:
            unread = [i for i in order if state[i] == _UNREAD]
            listed = [i for i in order if state[i] == _LISTED]
            found = bounds[reads] = (
                (1.0 + second_share) * sum(upper[i] for i in unread)
                + sum(rest_of[i] for i in listed),
                len(unread) + len(listed), sum(1 << i for i in (*unread, *listed)))
        return found

    def outside() -> float:
        """The most a document that is not a candidate can score."""
        total, n, rest = rest_bound()
        if not n:
            return -math.inf
        return w * total * n / q + lifted * bonus * pairs(rest) + CEILING_MARGIN

    def ceiling(doc: int) -> float:
        total, n, rest = rest_bound()
        s = sums.get(doc, 0.0)
        h = held.get(doc, 0)
        mask = masks.get(doc, 0)
        tight = tightened.get(doc)
        if tight is not None:  # the open terms, read off this document's own rows
            total, n, rest = tight
        body_part = (w * (s + total) * (h + n) / q + lifted * bonus * pairs(mask | rest)
                     if q and (h or n) else 0.0)
        return front.get(doc, 0.0) + dated.get(doc, 0.0) + body_part + CEILING_MARGIN

    def rebuild() -> None:
        heap.clear()
        candidates = (sums.keys() | front.keys() | dated.keys()) - done
        # Nothing is tightened here: a rebuild follows a read, which forgets every tightening.
        if bonus or not q:
            heap.extend((-ceiling(doc), doc) for doc in candidates)
        else:  # `ceiling` written out, as one comprehension: this runs once per candidate
            # after every read (100,000 of them at 100k for a question of common words)
            total, n, _ = rest_bound()
            front_of, dated_of, sum_of, held_of = front.get, dated.get, sums.get, held.get
            heap[:] = [(-(front_of(doc, 0.0) + dated_of(doc, 0.0)
                          + (w * (sum_of(doc, 0.0) + total) * (h + n) / q if h or n else 0.0)
                          + CEILING_MARGIN), doc)
                       for doc in candidates for h in (held_of(doc, 0),)]
        heapq.heapify(heap)

    # Per term, `term_ceiling` as top·tf / (tf + base + slope·words): written out in the loops
    # below, which run once per row they read.
    k1, b = rules.k1, rules.b
    slope = k1 * b / expected if expected else 0.0  # no passage at all: no row to read
    shape = [(idf[i] * (k1 + 1.0), k1 * (1.0 - b), slope) for i in range(q)]
    lists_bound = impacts.usable(rules) and expected > 0

    looked = 0  # rows read by lookups (and what their searches cost) since the last read

    def walk(i: int) -> None:
        """Term i's holders become candidates, each with the most the term adds to one of its
        passages plus the share of its next most (exact per passage: its frequency and length
        are in the row). A holder its lists named keeps what they said, and gets back the rest
        its sum was lowered by."""
        nonlocal reads
        p = body.postings[i]
        assert p is not None
        listed, rest = state[i] == _LISTED, rest_of[i]
        for doc, c in impacts.additions(p.docs, p.tf, p.length, *shape[i],
                                        second_share).items():
            if doc in done:
                continue
            mask = masks.get(doc, 0)
            if listed and mask >> i & 1:
                sums[doc] += rest
                held[doc] += 1
                continue
            sums[doc] = sums.get(doc, 0.0) + c
            held[doc] = held.get(doc, 0) + 1
            masks[doc] = mask | 1 << i
        state[i] = _WALKED
        reads += 1
        tightened.clear()  # what they said of the open terms now includes term i

    def take_lists(i: int) -> None:
        """Term i's lists instead of its rows: each listed holder becomes a candidate with what
        the list says the term adds to it; a part without a list is walked (it is small)."""
        nonlocal reads
        p = body.postings[i]
        assert p is not None
        cap = (1.0 + second_share) * upper[i]  # no holder gets more, whatever a list says
        found: dict[int, float] = {}
        rest = 0.0
        start = 0
        for rows, kept in p.parts:
            if kept is None:
                end = start + rows
                base, (docs, _, tf, length, _) = p.rows_at(start, end)
                found.update(impacts.additions(docs[start - base:end - base],
                                               tf[start - base:end - base],
                                               length[start - base:end - base],
                                               *shape[i], second_share))
            else:
                factor = idf[i] * impacts.raised(kept, expected)
                found.update((d, min(a * factor, cap))
                             for d, a in zip(kept.docs, kept.adds, strict=True))
                rest = max(rest, min(kept.rest * factor, cap))
            start += rows
        for doc, c in found.items():
            if doc in done:
                continue
            mask = masks.get(doc, 0)
            sums[doc] = sums.get(doc, 0.0) + c - rest
            held[doc] = held.get(doc, 0) + (0 if rest else 1)
            masks[doc] = mask | 1 << i
        state[i] = _LISTED if rest else _WALKED  # no rest: every holder was listed
        rest_of[i] = rest
        reads += 1
        tightened.clear()

    listing_costs: dict[int, int] = {}

    def listing_cost(i: int) -> int:
        """The rows and list entries taking term i's lists reads; 0 when it has none to take
        (or they would not save half of its walk)."""
        cost = listing_costs.get(i)
        if cost is None:
            p = body.postings[i]
            assert p is not None
            parts = p.parts if lists_bound else ()
            cost = sum(len(kept.docs) if kept else rows for rows, kept in parts)
            if not any(kept for _, kept in parts) or 2 * cost > p.rows:
                cost = 0
            listing_costs[i] = cost
        return cost

    def next_read() -> tuple[int, bool, int] | None:
        """The open term that adds most to what a document outside can score, whether its
        lists are taken (an unread term that has some) and what that reads; None when every
        term is walked."""
        best, most = -1, -1.0
        for i in order:
            if state[i] == _WALKED:
                continue
            adds = (1.0 + second_share) * upper[i] if state[i] == _UNREAD else rest_of[i]
            if adds > most:
                best, most = i, adds
        if best < 0:
            return None
        p = body.postings[best]
        assert p is not None
        cost = listing_cost(best) if state[best] == _UNREAD else 0
        # Every read is followed by a rebuild of the candidates' ceilings: with as many
        # candidates as the word has rows (a common word in every title), lists that still
        # leave the walk to do would cost a rebuild more than they save.
        if cost and p.rows < 2 * len(heap):
            cost = 0
        return best, cost > 0, cost or p.rows

    def tighten(doc: int) -> bool:
        """A candidate's ceiling with the open terms read off its own rows (a lookup each)
        instead of the most any document holds them: whether that changed it."""
        nonlocal looked
        if doc in tightened:
            return False
        total, n, rest = 0.0, 0, 0
        mask = masks.get(doc, 0)
        opened = False
        for i in order:
            if state[i] == _WALKED:
                continue
            opened = True
            if mask >> i & 1:  # listed: its sum holds what the list said, less the rest
                total += rest_of[i]
                n += 1
                continue
            p = body.postings[i]
            assert p is not None
            lo, hi = p.span(doc)
            looked += hi - lo + lookup_rows
            if lo == hi:
                continue
            top, base, slope = shape[i]
            at, (_, _, tf, length, _) = p.rows_at(lo, hi, weights=True)
            most = next_most = 0.0
            for r in range(lo - at, hi - at):
                t = tf[r]
                c = top * t / (t + base + slope * length[r])
                if c > most:
                    most, next_most = c, most
                elif c > next_most:
                    next_most = c
            total += most + second_share * next_most
            n += 1
            rest |= 1 << i
        if not opened:
            return False
        tightened[doc] = (total, n, rest)
        return True

    def looked_enough() -> bool:
        """Lookups have read more than the next read would: read it instead (a walk reads
        each row once, in one loop; a lookup costs two searches and its own rows)."""
        step = next_read()
        return step is not None and looked > step[2]

    tightened: dict[int, tuple[float, int, int]] = {}
    # The cheap terms are walked first, whatever the bound: their holders' ceilings then hold
    # the term exactly instead of the most any document adds (a few lookups a row, cheaper
    # than scoring the candidates a loose ceiling would leave).
    rows_walked = 0
    for i in order:
        p = body.postings[i]
        assert p is not None
        if rows_walked + p.rows > eager_rows:
            break
        rows_walked += p.rows
        walk(i)
    rebuild()
    batch = FIRST_BATCH
    while True:
        top_ceiling = -heap[0][0] if heap else -math.inf
        bar = max(top_ceiling, outside())
        while waiting and waiting[0][1].score > bar:
            yield waiting.pop(0)[1]
        if not heap and bar == -math.inf:
            break
        step = next_read()
        if step is not None and (looked > step[2] or outside() >= top_ceiling):
            # A document outside may beat every candidate, or the lookups cost more than the
            # read: widen.
            if step[1]:
                take_lists(step[0])
            else:
                walk(step[0])
            looked = 0
            rebuild()
            continue
        ids: list[int] = []
        while heap and len(ids) < batch:
            _, doc = heapq.heappop(heap)
            if tighten(doc):
                again = -ceiling(doc)
                if heap and again > heap[0][0]:  # no longer the best ceiling: back in line
                    heapq.heappush(heap, (again, doc))
                    if looked_enough():
                        break
                    continue
            ids.append(doc)
        if not ids:
            continue
        known = facts(ids)
        for doc in ids:
            done.add(doc)
            info = known.get(doc)
            if info is None:
                continue  # gone since its postings were written
            match = body.best(doc, info) if q else NO_BODY_MATCH
            if not match.matched and doc not in front:
                continue
            score = dated_score(total_score(front.get(doc, 0.0), match, w), dated.get(doc, 0.0))
            hit = Hit(doc, score, front.get(doc, 0.0), match, info, dated.get(doc, 0.0))
            bisect.insort(waiting, (hit.sort_key, hit))
        batch = min(batch * 2, MAX_BATCH)
    for _, hit in waiting:
        yield hit


class Ranking(Sequence[ScoredEntry]):
    """A ranking read on demand: indexing, slicing and iterating pull only as far as asked;
    `len()` pulls it all."""

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
