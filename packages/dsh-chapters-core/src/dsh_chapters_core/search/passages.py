"""A chapter's body as passages, the best one wins (search.md "Passages").

A chapter is long and mixed: a prompt, tool calls, their output, replies. Whole-document BM25
rewards the chapter that says everything once, while a question's answer sits in one place.
So the body is cut where the chapter itself is cut: the archive writes blocks (a prompt, a
reply, reasoning, a tool call, a tool result, a marker), and consecutive blocks are packed into
one passage while they fit in `searchPassageLines` lines together: a prompt with its tool calls
and its reply is one passage, and so is a run of short chat messages, whose answer often sits
one message after the question's words. A block longer than that is a passage of its own, cut
into runs of that many lines. The chapter takes the score of its
best passage ("MaxP", STYLE.md "Long documents are found by their best passage"): BM25 term
saturation (`searchBm25K1`) and length normalization (`searchBm25B`) against the door's
average passage length, times each word's inverse document frequency over the door's
documents, scaled by the share of the query's words the passage holds (a coordination factor:
two different words beat one word twice).

Passages are what the search index stores (their line ranges, lengths and term frequencies,
computed once when a chapter is written), so a query scores from the index alone. This module
is also the reference the index is tested against: `body_passages` cuts a body, and
`best_passage` scores it, for both.

A line is what `\\n` ends; a `\\r` inside a line is text (search.md "Lines").
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dsh_chapters_core.search.terms import WORD_PATTERN as _WORD_RE
from dsh_chapters_core.search.terms import count_terms, word_terms, words

# Where the archive starts a block of a chapter body (render.py), at the start of a line and
# outside a fence; and fence lines, so text inside a fence never starts one.
_MARK = re.compile(
    "^(?:(?P<fence>`{3,}|~{3,})[^\\n]*"
    "|(?P<turn>## Turn )"
    "|\\*\\*(?:User|Assistant|Reasoning):\\*\\*"
    "|→ tool |← result |⟦omitted"
    "|— compaction |— away summary |— turn summary |— rollback|— turn ended)".encode(),
    re.MULTILINE,
)


# What the archive itself writes around the verbatim text (render.py): turn headings, role
# labels, fence lines, the `→ tool` / `← result` prefixes, omission markers, and the markers
# of a compaction, a recap (away / turn summary) or a rollback (render.py, CompactionMarker).
# A passage's terms are counted without it: every chapter says `tool`, `result`, `text` and
# `user` that way, and a question about a user menu or a text field must not match them all.
_MARKUP = re.compile(
    "^(?:(?:`{3,}|~{3,}|## Turn |⟦omitted"
    "|— compaction |— away summary |— turn summary |— rollback|— turn ended)[^\n]*"
    "|\\*\\*(?:User|Assistant|Reasoning):\\*\\*[ \t]*"
    "|→ tool |← result )".encode(),
    re.MULTILINE,
)


def _content(piece: bytes) -> bytes:
    """A piece of a body without the archive's markup (`_MARKUP`): what its terms count."""
    return _MARKUP.sub(b"", piece)


@dataclass(frozen=True, slots=True)
class Passage:
    """One scored piece of a body: where it is (0-based line of the body, line count), how
    many words it has, and how many of its words hold each term. `tf` is in the order the
    terms are first mentioned: a term's place in it is its *mention*, what proximity reads."""

    first: int
    lines: int
    length: int
    tf: Mapping[str, int] = field(repr=False)

    def mentions(self) -> dict[str, int]:
        """Each term's place among the passage's terms, by first mention."""
        return {term: k for k, term in enumerate(self.tf)}


def _blocks(data: bytes) -> list[int]:
    """Byte offsets where blocks start (the first is 0). A turn's heading stays with the block
    right after it: on its own it holds only the turn's numbers and date."""
    starts = [0]
    fence = b""
    heading = -1  # where the open block started, while it is only a turn's heading
    for found in _MARK.finditer(data):
        mark = found.group("fence")
        at = found.start()
        if fence:
            if mark and mark[:1] == fence[:1] and len(mark) >= len(fence):
                end = data.find(b"\n", at)
                if not data[at:len(data) if end < 0 else end].strip(mark[:1] + b" \t\r"):
                    fence = b""  # a closing fence: the same character, as long, nothing else
            continue
        if mark:
            fence = mark
            continue
        turn = found.group("turn") is not None
        if at and heading >= 0 and not turn:
            eol = data.find(b"\n", heading)
            if 0 <= eol < at and not data[eol:at].strip():
                heading = -1  # only blank lines since the heading: this block joins it
                continue
        heading = at if turn else -1
        if at:
            starts.append(at)
    return starts


def body_passages(body: str, max_lines: int) -> list[Passage]:
    """The passages of a body, in order; a piece with no word is not a passage."""
    if not body:
        return []
    data = body.encode("utf-8")
    bounds: list[tuple[int, int]] = []  # (byte offset, body line) of each block start
    line = previous = 0
    for start in _blocks(data):
        line += data.count(b"\n", previous, start)
        previous = start
        bounds.append((start, line))
    bounds.append((len(data), data.count(b"\n") + 1))
    bounds = _packed(bounds, max_lines)
    out: list[Passage] = []
    for (start, first), (end, following) in itertools.pairwise(bounds):
        count = following - first
        if count <= max_lines:
            pieces = [(first, count, data[start:end])]
        else:
            rows = data[start:end].split(b"\n")
            pieces = [(first + k, min(max_lines, count - k), b"\n".join(rows[k:k + max_lines]))
                      for k in range(0, count, max_lines)]
        for at, lines, piece in pieces:
            n, tf = count_terms(_content(piece))
            if n:
                out.append(Passage(at, lines, n, tf))
    return out


def _packed(bounds: list[tuple[int, int]], max_lines: int) -> list[tuple[int, int]]:
    """Consecutive blocks joined while they fit in `max_lines` lines together: a prompt with
    its tool calls and reply, a run of short chat messages, is one passage; a block longer
    than that stays alone (and is cut into runs). `bounds` are the blocks' (offset, line)
    starts and the end."""
    kept = [bounds[0]]
    for i in range(1, len(bounds) - 1):
        if bounds[i + 1][1] - kept[-1][1] > max_lines:
            kept.append(bounds[i])  # block i does not fit beside what came since: it starts one
    kept.append(bounds[-1])
    return kept


# ---------------------------------------------------------------------------------------------
# Scoring


@dataclass(frozen=True, slots=True)
class PassageRules:
    """The tunables of passage scoring (from `Config`)."""

    k1: float
    b: float
    lines: int
    snippet_chars: int
    phrase_bonus: float = 0.0
    phrase_terms: int = 3
    chapter_share: float = 0.0
    second_share: float = 0.0


@dataclass(frozen=True, slots=True)
class BodyStats:
    """Collection statistics of a door: its documents, per query term the documents whose
    body holds it, and its passages with their words (the average passage length follows)."""

    documents: int = 0
    df: Mapping[str, int] = field(default_factory=dict)
    passages: int = 0
    words: int = 0

    @property
    def expected(self) -> float:
        """Words of an average passage (BM25's avgdl), at least 1."""
        return max(self.words / self.passages, 1.0) if self.passages else 1.0

    def idf(self, term: str) -> float:
        n, df = self.documents, self.df.get(term, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class BodyMatch:
    """A body's best passage: its score (rounded as the scorer rounds), its index among the
    body's passages, and its body lines (0-based first line, line count). `passage` is -1
    when the body holds no query term. `elsewhere` counts the query words the passage lacks
    and another passage of the body holds, when they counted (`chapter_share`). `second` is
    the second-best passage's score, when a share of it counted (`second_share`): `score`
    is the best passage's plus that share of it."""

    score: float
    passage: int = -1
    first: int = 0
    lines: int = 0
    elsewhere: int = 0
    second: float = 0.0

    @property
    def matched(self) -> bool:
        return self.passage >= 0


NO_BODY_MATCH = BodyMatch(0.0)


def passage_score(tfs: Sequence[int], length: int, idf: Sequence[float], k1: float, b: float,
                  expected: float, mentions: Sequence[int] = (), bonus: float = 0.0,
                  near: int = 0, anywhere: int = 0, share: float = 0.0) -> float:
    """BM25 of one passage times the share of the query's terms it holds (each term its
    chapter holds `anywhere` but not in this passage counting `share` of one), plus
    `bonus` per pair of query terms typed next to each other whose first mentions in the
    passage are at most `near` terms apart (proximity: the words of a question found
    together). One fixed expression in one fixed order, so the index and a plain scan get the
    same float (with `share` 0 it is BM25 times held / terms exactly)."""
    norm = k1 * (1.0 - b + b * length / expected)
    bm25 = 0.0
    held = 0
    for i, t in enumerate(tfs):
        if t:
            bm25 += idf[i] * (t * (k1 + 1.0)) / (t + norm)
            held += 1
    score = bm25 * (held + share * (anywhere - held)) / len(tfs)
    if bonus and mentions:
        pairs = sum(1 for i in range(1, len(tfs)) if tfs[i] and tfs[i - 1]
                    and abs(mentions[i] - mentions[i - 1]) <= near)
        score += bonus * pairs
    return score


def adjacent_pairs(held: Sequence[bool]) -> int:
    """How many pairs of query terms typed next to each other are both held: the most
    proximity pairs a passage holding these terms can have."""
    return sum(1 for i in range(1, len(held)) if held[i] and held[i - 1])


def term_ceiling(idf: float, most: int, shortest: int, k1: float, b: float,
                 expected: float) -> float:
    """The most one term adds to a passage that holds it at most `most` times and has at least
    `shortest` words: BM25 grows with the first and shrinks with the second."""
    if most <= 0:
        return 0.0
    norm = k1 * (1.0 - b + b * shortest / expected)
    return idf * most * (k1 + 1.0) / (most + norm)


def best_passage(passages: Sequence[Passage], terms: Sequence[str], stats: BodyStats,
                 rules: PassageRules) -> BodyMatch:
    """The reference: the best passage of a body for these query terms (the first of equal
    scores), its score raised by `second_share` of the second-best passage's. The index
    computes the same from its postings (search/topk.py)."""
    if not passages or not terms:
        return NO_BODY_MATCH
    idf = [stats.idf(t) for t in terms]
    expected = stats.expected
    share = rules.chapter_share
    # The query terms the chapter holds anywhere: a passage's missing word that another
    # passage holds counts `share` of a held one (a question's words spread over a chapter).
    anywhere = sum(1 for t in terms if any(t in p.tf for p in passages)) if share else 0
    best, at, second = -1.0, -1, 0.0
    for index, passage in enumerate(passages):
        tf = passage.tf
        tfs = [tf.get(t, 0) for t in terms]
        if not any(tfs):
            continue
        order = passage.mentions() if rules.phrase_bonus else {}
        score = passage_score(tfs, passage.length, idf, rules.k1, rules.b, expected,
                              [order.get(t, -1) for t in terms], rules.phrase_bonus,
                              rules.phrase_terms, anywhere, share)
        if score > best:
            best, at, second = score, index, max(best, second)
        elif score > second:
            second = score
    if at < 0:
        return NO_BODY_MATCH
    found = passages[at]
    apart = anywhere - sum(1 for t in terms if t in found.tf) if share else 0
    return body_match(best, second, rules.second_share, at, found.first, found.lines, apart)


def body_match(best: float, second: float, share: float, passage: int, first: int, lines: int,
               elsewhere: int) -> BodyMatch:
    """A body's match: its best passage's score plus `share` of its second-best passage's, so
    a chapter whose next passage answers too (a question's words spread over a few turns)
    ranks above one that says them once. One expression, so the index and a plain scan
    agree."""
    if not share:
        return BodyMatch(round(best, 9), passage, first, lines, elsewhere)
    return BodyMatch(round(best + share * second, 9), passage, first, lines, elsewhere,
                     round(second, 9))


def body_stats(bodies: Iterable[Sequence[Passage]], terms: Sequence[str],
               documents: int | None = None) -> BodyStats:
    """Statistics of a door computed from every body's passages (the plain scan's path).
    `documents` counts the door's documents when some have no body (rules, plans)."""
    seen = 0
    passages = total = 0
    df: dict[str, int] = dict.fromkeys(terms, 0)
    for body in bodies:
        seen += 1
        passages += len(body)
        held: set[str] = set()
        for passage in body:
            total += passage.length
            held.update(t for t in terms if t in passage.tf)
        for term in held:
            df[term] += 1
    return BodyStats(seen if documents is None else documents, df, passages, total)


# ---------------------------------------------------------------------------------------------
# Anchors: where a shown match is (cut from the file only for what an answer shows)


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a match is: the 1-based line in the chapter file and a verbatim snippet of it."""

    line: int
    text: str

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "text": self.text}


# The characters an ASCII word is made of: letters, digits and its joints (`terms._WORD`).
_RUN = r"A-Za-z0-9._\-/:"


class _Matcher:
    """Which query terms a body word holds, memoized per distinct spelling for one query."""

    def __init__(self, terms: Sequence[str]) -> None:
        self.terms = tuple(terms)
        self.memo: dict[str, tuple[int, ...]] = {}
        # One regex search per line instead of one `in` per probe (longest first, so a probe
        # that is a prefix of another never hides it: any hit is enough).
        probes = sorted(_probes(self.terms), key=lambda p: (-len(p), p))
        self.probe = re.compile("|".join(map(re.escape, probes))) if probes else None
        self.term_probes = tuple(map(_probe, self.terms))
        # An ASCII line's runs of word characters that hold a probe, each whole, found in C
        # from the run's first character: only their words can hold a term (a term is in
        # its word, case-folded), so a long line of tool output is not cut into every word.
        self.runs = (re.compile(rf"(?<![{_RUN}])[{_RUN}]*?(?:{'|'.join(map(re.escape, probes))})"
                                rf"[{_RUN}]*", re.ASCII | re.IGNORECASE) if probes else None)

    def ceiling(self, folded: str) -> int:
        """The most distinct query terms a case-folded line can hold: those whose probe it
        holds. Substring tests in C, where counting the line's words runs the matcher on each."""
        return sum(probe in folded for probe in self.term_probes)

    def __call__(self, word: str) -> tuple[int, ...]:
        found = self.memo.get(word)
        if found is None:
            held = set(word_terms(word))
            found = tuple(i for i, t in enumerate(self.terms) if t in held)
            self.memo[word] = found
        return found


def _probes(terms: Sequence[str]) -> tuple[str, ...]:
    """Substrings a case-folded line must hold to hold a term: a term is its word case-folded,
    or a part of it, stemmed; a stem is a prefix of what it came from except for `-ies` ->
    `-y`, so dropping a final `y` makes every term a substring."""
    return tuple(sorted(set(map(_probe, terms))))


def _probe(term: str) -> str:
    return term[:-1] if term.endswith("y") and len(term) > 1 else term


@functools.lru_cache(maxsize=16)
def _matcher(terms: tuple[str, ...]) -> _Matcher:
    return _Matcher(terms)


def line_hits(text: str, terms: Sequence[str]) -> list[tuple[int, int, int]]:
    """(query term index, start, end) of every hit on one line, in order."""
    match = _matcher(tuple(terms))
    probe, runs = match.probe, match.runs
    if probe is None or runs is None:
        return []
    if text.isascii():  # case-folding keeps every offset: only the runs holding a probe
        return [(index, found.start(), found.end()) for run in runs.finditer(text)
                for found in _WORD_RE.finditer(text, run.start(), run.end())
                for index in match(found.group())]
    if not probe.search(text.casefold()):  # no query term on this line
        return []
    return [(index, found.start(), found.end()) for found in _WORD_RE.finditer(text)
            for index in match(found.group())]


def cut_anchor(lines: Sequence[str], match: BodyMatch, terms: Sequence[str], *,
               body_line: int, snippet_chars: int) -> Anchor | None:
    """The anchor of a matched body: the line of its best passage that holds the most distinct
    query terms (the first of those), with a snippet around its first hit. `lines` are the
    body's lines (what `\\n` ends); `body_line` is the file line of the body's first line."""
    if not match.matched:
        return None
    span = lines[match.first:match.first + match.lines]
    if not span:
        return None
    matcher = _matcher(tuple(terms))
    best, at, best_hits = -1, 0, []
    for k, text in enumerate(span):
        if matcher.ceiling(text.casefold()) <= best:
            continue  # cannot hold more than the best line so far, which wins a tie
        hits = line_hits(text, terms)
        held = len({i for i, _, _ in hits})
        if held > best:
            best, at, best_hits = held, k, hits
            if best == len(matcher.terms):
                break  # no later line can hold more
    return Anchor(body_line + match.first + at, snippet(span[at], best_hits, snippet_chars))


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


def holds(body: str, terms: Sequence[str]) -> frozenset[int]:
    """The indices of the query terms a body holds anywhere (a plain scan's df)."""
    match = _matcher(tuple(terms))
    return frozenset(i for _, word in words(body) for i in match(word))
