"""A chapter's body as evidence: BM25 over passages, the best one wins (search.md "The body").

A chapter is long and mixed (a prompt, tool calls, outputs, replies), so whole-document BM25
rewards the chapter that says everything once. A question's answer sits in one place: the
body is cut into passages of `searchPassageLines` lines, overlapping by half, and the chapter
takes the score of its best passage ("MaxP", STYLE.md "Long documents are found by their best
passage"). Per passage and query word: BM25 term saturation (`searchBm25K1`) and length
normalization (`searchBm25B`) against the corpus's average passage length, times the word's
inverse document frequency over the corpus. The sum is scaled by the share of the query's
words the passage holds (a coordination factor: two different words beat one word twice),
and every adjacent pair of query words found adjacent in the passage adds
`searchPhraseBonus`.

The best passage is also where the match is shown: its line that holds the most query words
(the anchor), with a verbatim snippet around the first of them.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dsh_chapters_core.search.terms import WORD_PATTERN as _WORD_RE
from dsh_chapters_core.search.terms import QueryWord, word_terms, words


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a match is: the 1-based line in the chapter file and a verbatim snippet of it."""

    line: int
    text: str

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "text": self.text}


@dataclass(frozen=True, slots=True)
class BodyStats:
    """Collection statistics of the bodies: documents, per query word the documents whose body
    holds it, and the average words per body line (a passage's expected length follows)."""

    documents: int = 0
    df: Mapping[str, int] = field(default_factory=dict)
    line_words: float = 0.0

    def idf(self, word: str) -> float:
        n, df = self.documents, self.df.get(word, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class BodyMatch:
    score: float
    anchor: Anchor | None


NO_BODY_MATCH = BodyMatch(0.0, None)


@dataclass(frozen=True, slots=True)
class PassageRules:
    """The tunables of passage scoring (from `Config`)."""

    k1: float
    b: float
    lines: int
    phrase_bonus: float
    snippet_chars: int


class _Matcher:
    """Which query words a body word holds, memoized per distinct spelling for one query.
    Every one of them: `token_refresh` is evidence of both `token` and `refresh`, and a word's
    document frequency (the cache's, from the terms a body holds) counts it for both."""

    def __init__(self, query: Sequence[QueryWord]) -> None:
        self.query = query
        self.memo: dict[str, tuple[int, ...]] = {}
        # One regex search per line instead of one `in` per probe (longest first, so a probe
        # that is a prefix of another never hides it: any hit is enough).
        probes = sorted(_probes(query), key=lambda p: (-len(p), p))
        self.probe = re.compile("|".join(map(re.escape, probes))) if probes else None

    def __call__(self, word: str) -> tuple[int, ...]:
        found = self.memo.get(word)
        if found is None:
            terms = word_terms(word)
            found = tuple(i for i, q in enumerate(self.query) if not q.terms.isdisjoint(terms))
            self.memo[word] = found
        return found


def _probes(query: Sequence[QueryWord]) -> tuple[str, ...]:
    """Substrings a case-folded line must hold to hold a query word: a term is its word
    case-folded, or a part of it, stemmed; a stem is a prefix of what it came from except
    for `-ies` -> `-y`, so dropping a final `y` makes every term a substring."""
    return tuple(sorted({t[:-1] if t.endswith("y") and len(t) > 1 else t
                         for q in query for t in q.terms}))


def line_hits(text: str, match: _Matcher) -> list[tuple[int, int, int]]:
    """(query word index, start, end) of every hit on one line, in order."""
    probe = match.probe
    if probe is None or not probe.search(text.casefold()):  # no query word on this line
        return []
    return [(index, found.start(), found.end()) for found in _WORD_RE.finditer(text)
            for index in match(found.group())]


def _scan_line(text: str, match: _Matcher, tf: list[int], pairs: set[int]) -> int:
    """Counts one line's hits into `tf` and its phrases into `pairs`; returns how many
    distinct query words it holds. A phrase: query word i-1 right before word i, in the same
    body word (`token_refresh`) or in the body word with a hit just before."""
    probe = match.probe
    if probe is None or not probe.search(text.casefold()):  # no query word on this line
        return 0
    memo = match.memo  # the lookup inlined: this loop is a query's hot path
    before: tuple[int, ...] = ()
    seen: set[int] = set()
    for word in _WORD_RE.findall(text):
        which = memo.get(word)
        if which is None:
            which = match(word)
        if which:
            for i in which:  # ascending: i-1 in `which` came first
                tf[i] += 1
                if i - 1 in before or i - 1 in which:
                    pairs.add(i)
            seen.update(which)
            before = which
    return len(seen)


def _blocks(lines: Sequence[str], size: int, match: _Matcher, n: int, held: list[int]
            ) -> list[tuple[int, list[int], set[int]]]:
    """Per run of `size` lines: (words, hits per query word, words with a pair); how many
    distinct query words each line holds goes to `held`. A passage is a whole number of runs,
    so it is scored by adding runs; a run with no query word in it is counted by one regex
    pass, not line by line (most runs of a long body hold none)."""
    probe = match.probe
    out: list[tuple[int, list[int], set[int]]] = []
    for start in range(0, len(lines), size):
        run = lines[start:start + size]
        text = "\n".join(run)  # a word never spans lines: the count is the lines' sum
        tf = [0] * n
        pairs: set[int] = set()
        if probe is not None and probe.search(text.casefold()):
            held.extend(_scan_line(line, match, tf, pairs) for line in run)
        else:
            held.extend(0 for _ in run)
        # Counted in one pass over the run even when its lines were scanned: one C call is
        # cheaper than a count per line (measured), though the scanned lines are read twice.
        out.append((len(_WORD_RE.findall(text)), tf, pairs))
    return out


@functools.lru_cache(maxsize=16)
def _matcher(query: tuple[QueryWord, ...]) -> _Matcher:
    """One matcher per query, shared by every body it scores: a spelling is looked up once."""
    return _Matcher(query)


def holds(body: str, query: Sequence[QueryWord]) -> frozenset[int]:
    """The indices of the query words the body holds anywhere."""
    match = _matcher(tuple(query))  # one per query, not one per body
    return frozenset(i for _, word in words(body) for i in match(word))


def body_shape(body: str) -> tuple[int, int]:
    """(words, lines) of a body: what the average passage length is computed from."""
    if not body:
        return 0, 0
    return sum(1 for _ in words(body)), body.count("\n") + 1


def body_terms(body: str) -> frozenset[str]:
    """Every term of a body: what a candidate index lists the body under."""
    memo: dict[str, tuple[str, ...]] = {}
    out: set[str] = set()
    for _, word in words(body):
        if word not in memo:
            memo[word] = word_terms(word)
            out.update(memo[word])
    return frozenset(out)


def body_stats(bodies: Iterable[str], query: Sequence[QueryWord]) -> BodyStats:
    """Statistics computed from every body of a corpus (the plain scan's path)."""
    documents = 0
    total_words = total_lines = 0
    df: dict[str, int] = {}
    for body in bodies:
        documents += 1
        n_words, n_lines = body_shape(body)
        total_words += n_words
        total_lines += n_lines
        for i in holds(body, query):
            df[query[i].text] = df.get(query[i].text, 0) + 1
    return BodyStats(documents, df, total_words / total_lines if total_lines else 0.0)


def score_body(
    body: str,
    first_line: int,
    query: Sequence[QueryWord],
    stats: BodyStats,
    rules: PassageRules,
) -> BodyMatch:
    """The body's best passage: its score and its anchor (`first_line` is the file line of the
    body's first line). No query word in the body scores 0 with no anchor."""
    if not body or not query:
        return NO_BODY_MATCH
    match = _matcher(tuple(query))
    lines = body.split("\n")
    size = rules.lines
    step = window_step(size)
    unit = math.gcd(size, step)  # passages start every `step` lines and span `size`
    held_by_line: list[int] = []
    blocks = _blocks(lines, unit, match, len(query), held_by_line)
    if not any(any(tf) for _, tf, _ in blocks):
        return NO_BODY_MATCH
    span = size // unit
    expected = max(stats.line_words * size, 1.0)
    idf = [stats.idf(q.text) for q in query]
    best_score, best_start = -1.0, 0
    for start in window_starts(len(lines), size):
        window = blocks[start // unit:start // unit + span]
        tf = [sum(col) for col in zip(*(t for _, t, _ in window), strict=True)]
        held = sum(1 for t in tf if t)
        if not held:
            continue
        length = sum(w for w, _, _ in window)
        pairs = set().union(*(p for _, _, p in window))
        norm = rules.k1 * (1.0 - rules.b + rules.b * length / expected)
        bm25 = 0.0
        for i, t in enumerate(tf):  # one fixed order: the same float on every machine
            if t:
                bm25 += idf[i] * (t * (rules.k1 + 1.0)) / (t + norm)
        score = bm25 * held / len(query) + rules.phrase_bonus * len(pairs)
        if score > best_score:
            best_score, best_start = score, start
    # The anchor: the line of the best passage holding the most distinct query words.
    best = held_by_line[best_start:best_start + size]
    line = best_start + max(range(len(best)), key=lambda k: (best[k], -k))
    anchor = Anchor(first_line + line,
                    snippet(lines[line], line_hits(lines[line], match), rules.snippet_chars))
    return BodyMatch(round(best_score, 9), anchor)


def window_step(size: int) -> int:
    """Passages of `size` lines start every half passage."""
    return max(1, size // 2)


def window_starts(lines: int, size: int) -> range:
    """Where the passages of a body of `lines` lines start: `size` lines each, by half steps."""
    step = window_step(size)
    return range(0, max(1, lines - step), step)


@dataclass(frozen=True, slots=True)
class BodyProfile:
    """What bounds a body's best passage without reading it again: per term, the most words
    holding it in any one passage, and the fewest words of a passage that holds it. Computed
    once when the body is indexed, for one passage size (`searchPassageLines`)."""

    counts: Mapping[str, int]
    shortest: Mapping[str, int]


def body_profile(body: str, size: int) -> BodyProfile:
    """The profile of `body` for passages of `size` lines, cut exactly as `score_body` cuts."""
    if not body:
        return BodyProfile({}, {})
    line_terms: list[list[str]] = []
    line_words: list[int] = []
    for text in body.split("\n"):
        found: list[str] = []
        count = 0
        for _, word in words(text):
            count += 1
            found.extend(word_terms(word))
        line_terms.append(found)
        line_words.append(count)
    counts: dict[str, int] = {}
    shortest: dict[str, int] = {}
    for start in window_starts(len(line_terms), size):
        window: dict[str, int] = {}
        for found in line_terms[start:start + size]:
            for term in found:
                window[term] = window.get(term, 0) + 1
        length = sum(line_words[start:start + size])
        for term, n in window.items():
            if n > counts.get(term, 0):
                counts[term] = n
            if length < shortest.get(term, length + 1):
                shortest[term] = length
    return BodyProfile(counts, shortest)


@dataclass(frozen=True, slots=True)
class BodyBound:
    """The ceiling of `score_body` for one query over a door: per query word its terms and
    inverse document frequency, and the passage rules.

    A passage of L words holding t_i words that match query word i scores
    sum_i idf_i * t_i (k1 + 1) / (t_i + k1 (1 - b + b L / E)) times the share of the words it
    holds, plus the phrase bonus per adjacent pair. Each term grows with t_i and shrinks with
    L; so word i's term is at most its value at m_i (the sum, over the word's terms, of the
    most words holding one in any passage) and L_i (the fewest words of a passage holding one
    of its terms), the share is at most the share of words the body holds, and the pairs at
    most the adjacent pairs of words it holds."""

    terms: tuple[tuple[str, ...], ...]
    idf: tuple[float, ...]
    k1: float
    b: float
    expected: float  # words of an average passage (E)
    phrase_bonus: float
    lines: int  # the passage size the profiles must have been built for

    @classmethod
    def of(cls, query: Sequence[QueryWord], stats: BodyStats, rules: PassageRules) -> BodyBound:
        return cls(tuple(tuple(sorted(q.terms)) for q in query),
                   tuple(stats.idf(q.text) for q in query), rules.k1, rules.b,
                   max(stats.line_words * rules.lines, 1.0), rules.phrase_bonus, rules.lines)

    def word_counts(self, profile: BodyProfile) -> tuple[tuple[int, int], ...]:
        """Per query word, (m_i, L_i) of this body; (0, 0) when it holds none of its terms."""
        out = []
        for terms in self.terms:
            held = [t for t in terms if t in profile.counts]
            out.append((sum(profile.counts[t] for t in held),
                        min((profile.shortest[t] for t in held), default=0)))
        return tuple(out)

    def ceiling(self, counts: Sequence[tuple[int, int]]) -> float:
        """The bound for a body with these (m_i, L_i) (see the class). The cache computes the
        same expression in its own engine; this one is the reference."""
        n = len(counts)
        if not n or not any(m for m, _ in counts):
            return 0.0
        bm25 = 0.0
        for i, (m, length) in enumerate(counts):
            if m:
                bm25 += self.word_ceiling(i, m, length)
        held = sum(1 for m, _ in counts if m)
        pairs = sum(1 for i in range(1, n) if counts[i][0] and counts[i - 1][0])
        return bm25 * held / n + self.phrase_bonus * pairs

    def word_ceiling(self, i: int, m: int, length: int) -> float:
        """Query word i's BM25 term at m words in a passage of `length` words."""
        norm = self.k1 * (1.0 - self.b + self.b * length / self.expected)
        return self.idf[i] * m * (self.k1 + 1.0) / (m + norm)

    def held_ceiling(self, words: Iterable[tuple[int, float]]) -> float:
        """The ceiling of a body that holds at most these query words, each with at most the
        given BM25 term: the sum, times the share held, plus a phrase bonus per adjacent pair
        among them (the same terms as `ceiling`, at their largest)."""
        held = dict(words)
        if not held or not self.terms:
            return 0.0
        pairs = sum(1 for i in held if i + 1 in held)
        return (sum(held[i] for i in sorted(held)) * len(held) / len(self.terms)
                + self.phrase_bonus * pairs)


def snippet(text: str, hits: Sequence[tuple[int, int, int]], limit: int) -> str:
    """At most `limit` characters of `text`, verbatim, around its first hit (… marks a cut)."""
    text = text.rstrip()
    if len(text) <= limit:
        return text.strip()
    first = hits[0][1] if hits else 0
    last = max((end for _, _, end in hits), default=first)
    room = limit - 2  # the two ellipses
    start = max(0, min(first - room // 4, len(text) - room))
    if last - start > room:
        start = max(0, first - 8)
    end = min(len(text), start + room)
    return ("…" if start else "") + text[start:end].strip() + ("…" if end < len(text) else "")
