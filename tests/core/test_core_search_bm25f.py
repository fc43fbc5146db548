"""The body in the one scorer (search.md "The body"): best-passage BM25 next to the frontmatter.

Saturation, a body-only word is found, a topic hit still outranks a body hit of the same
frequency, coordination, phrases, and `searchBodyWeight: 0` is the frontmatter ranking exactly.
"""

from __future__ import annotations

import dataclasses
import itertools

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.search import make_entry, rank_entries
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import BodyStats, PassageRules, score_body
from dsh_chapters_core.search.terms import query_words, word_terms, words
from hypothesis import given, settings
from hypothesis import strategies as st

RULES = PassageRules(k1=DEFAULTS.search_bm25_k1, b=DEFAULTS.search_bm25_b,
                     lines=DEFAULTS.search_passage_lines,
                     phrase_bonus=DEFAULTS.search_phrase_bonus,
                     snippet_chars=DEFAULTS.search_snippet_chars)
FILLER = "the build ran on the runner and printed its usual lines"


def chapter(path: str, *, body: str = "", title: str = "session work", topics: tuple[str, ...] = (),
            summary: str = "", date: str = "2026-09-01T00:00:00Z") -> SearchEntry:
    return make_entry(path=path, kind=DocumentKind.CHAPTER, title=title, summary=summary,
                      topics=topics, date=date, body=body, body_line=10)


def body_of(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def stats_for(documents: int, **df: int) -> BodyStats:
    return BodyStats(documents=documents, df=df, line_words=10.0)


def test_term_frequency_saturates() -> None:
    words = query_words("alembic")
    stats = stats_for(100, alembic=5)
    scores = []
    for tf in (1, 2, 4, 8, 16):
        line = " ".join(["alembic"] * tf + ["word"] * (16 - tf))
        scores.append(score_body(body_of(line), 1, words, stats, RULES).score)
    gains = [b - a for a, b in itertools.pairwise(scores)]
    assert all(g > 0 for g in gains)  # more is better ...
    assert all(later < earlier for earlier, later in itertools.pairwise(gains))
    assert scores[-1] < stats.idf("alembic") * (RULES.k1 + 1)  # ... and bounded


def test_a_word_only_in_the_body_is_found() -> None:
    found = chapter("s1/chapters/001-a.md", body=body_of(FILLER, "ran `alembic upgrade head`"))
    other = chapter("s2/chapters/001-b.md", body=body_of(FILLER))
    ranked = rank_entries([found, other], "alembic upgrade", config=DEFAULTS)
    assert [s.entry.path for s in ranked] == ["s1/chapters/001-a.md"]
    assert ranked[0].topic_hits == ranked[0].title_hits == 0 and ranked[0].body_score > 0


def test_a_topic_hit_outranks_a_body_hit_of_equal_frequency() -> None:
    body = body_of(FILLER, "the migration failed twice", FILLER)
    with_topic = chapter("s1/chapters/001-a.md", body=body, topics=("migration",))
    body_only = chapter("s2/chapters/001-b.md", body=body)
    ranked = rank_entries([body_only, with_topic], "migration", config=DEFAULTS)
    assert [s.entry.path for s in ranked] == ["s1/chapters/001-a.md", "s2/chapters/001-b.md"]
    assert ranked[0].body_score == ranked[1].body_score  # the topic made the difference


def test_more_distinct_words_beat_one_word_repeated() -> None:
    both = chapter("s1/chapters/001-a.md",
                   body=body_of("the 401 came from the expired token", FILLER))
    repeated = chapter("s2/chapters/001-b.md",
                       body=body_of("token token token token token token", FILLER))
    filler = [chapter(f"f{i}/chapters/001-f.md", body=body_of(FILLER, "token")) for i in range(4)]
    ranked = rank_entries([repeated, both, *filler], "401 token", config=DEFAULTS)
    assert ranked[0].entry.path == "s1/chapters/001-a.md"


def test_adjacent_query_words_earn_the_phrase_bonus() -> None:
    words = query_words("failing migration")
    stats = stats_for(10, failing=2, migration=2)
    adjacent = score_body(body_of("the failing migration was rerun"), 1, words, stats, RULES)
    apart = score_body(body_of("the migration was rerun, failing"), 1, words, stats, RULES)
    assert round(adjacent.score - apart.score, 6) == RULES.phrase_bonus


def test_a_joined_word_is_evidence_of_every_query_word_it_holds() -> None:
    # `token_refresh` holds both `token` and `refresh`: it counts for each, as the cache's
    # document frequencies (per term a body holds) count it, and the two are a phrase.
    words = query_words("token refresh")
    stats = stats_for(10, token=2, refresh=2)
    joined = score_body(body_of("called token_refresh again now"), 1, words, stats, RULES)
    spaced = score_body(body_of("called token refresh again"), 1, words, stats, RULES)
    token_only = score_body(body_of("called token again now"), 1, words,
                            stats, RULES)
    assert joined.score == spaced.score > token_only.score
    assert joined.anchor is not None and "token_refresh" in joined.anchor.text
    from dsh_chapters_core.search.passages import holds
    assert holds("called token_refresh again\n", words) == frozenset({0, 1})


def test_the_identifier_itself_outranks_a_body_holding_only_its_parts() -> None:
    # `flushCursorClient` asks for the identifier and for each part: the body that says it
    # holds all four words (and their phrase); one that says `flush the cursor client` holds
    # the parts only, and one that only says `client` holds one word of four.
    exact = chapter("s1/chapters/001-a.md", body=body_of(FILLER, "then flushCursorClient()"))
    spelled = chapter("s2/chapters/001-b.md",
                      body=body_of(FILLER, "flush the cursor client then"))
    part = chapter("s3/chapters/001-c.md", body=body_of(FILLER, "the client again"))
    filler = [chapter(f"f{i}/chapters/001-f.md", body=body_of(FILLER, "client flush"))
              for i in range(6)]
    ranked = rank_entries([part, spelled, exact, *filler], "flushCursorClient", config=DEFAULTS)
    assert [s.entry.path for s in ranked[:2]] == ["s1/chapters/001-a.md", "s2/chapters/001-b.md"]
    assert ranked[0].body_score > 2 * ranked[1].body_score
    assert ranked.index(next(s for s in ranked if s.entry.path == "s3/chapters/001-c.md")) > 1


def test_question_words_are_dropped_from_a_typed_question() -> None:
    assert [w.text for w in query_words("how did we fix the migration error")] == [
        "fix", "migration", "error"]
    assert [w.text for w in query_words("how did we")] == ["how", "did", "we"]  # all stopwords


def test_the_anchor_names_the_file_line_of_the_best_passage() -> None:
    body = body_of(*([FILLER] * 60), "then `alembic upgrade head` made the 401 go away",
                   *([FILLER] * 60))
    entry = chapter("s1/chapters/001-a.md", body=body)
    (scored,) = rank_entries([entry], "alembic 401", config=DEFAULTS)
    assert scored.anchor is not None
    assert scored.anchor.line == 10 + 60  # body_line 10, the 61st body line
    assert scored.anchor.text == "then `alembic upgrade head` made the 401 go away"


def test_a_long_line_is_cut_around_the_hit_verbatim() -> None:
    line = ("x" * 300) + " the answer is alembic downgrade base " + ("y" * 300)
    entry = chapter("s1/chapters/001-a.md", body=body_of(line))
    (scored,) = rank_entries([entry], "alembic downgrade", config=DEFAULTS)
    assert scored.anchor is not None
    text = scored.anchor.text
    assert len(text) <= DEFAULTS.search_snippet_chars and "alembic downgrade" in text
    assert text.strip("…") in line


def test_ranking_is_deterministic_with_ties_by_recency_then_path() -> None:
    body = body_of("the cors preflight failed")
    a = chapter("b/chapters/001-x.md", body=body, date="2026-09-02T00:00:00Z")
    b = chapter("a/chapters/001-x.md", body=body, date="2026-09-02T00:00:00Z")
    c = chapter("c/chapters/001-x.md", body=body, date="2026-09-03T00:00:00Z")
    first = rank_entries([a, b, c], "cors preflight", config=DEFAULTS)
    again = rank_entries([c, b, a], "cors preflight", config=DEFAULTS)
    assert [s.entry.path for s in first] == [s.entry.path for s in again] == [
        "c/chapters/001-x.md", "a/chapters/001-x.md", "b/chapters/001-x.md"]


# -- searchBodyWeight: 0 is the frontmatter ranking, exactly -------------------------------------

_WORDS = ["auth", "token", "migration", "cors", "retry", "upload", "vault", "jwt", "redis", "the"]
_word = st.sampled_from(_WORDS)
_text = st.lists(_word, max_size=6).map(" ".join)


@st.composite
def _entry(draw: st.DrawFn, index: int) -> SearchEntry:
    return chapter(
        f"s{index}/chapters/{draw(st.integers(1, 3)):03d}-x.md",
        title=draw(_text), summary=draw(_text),
        topics=tuple(draw(st.lists(_word, max_size=3))),
        body=body_of(*draw(st.lists(_text, max_size=8))),
        date=f"2026-09-{draw(st.integers(1, 28)):02d}T00:00:00Z",
    )


def _reference(entries: list[SearchEntry], query: str) -> list[tuple[float, str]]:
    """The record's frontmatter rule (§8), written out: topic x2, title x1, summary x1."""
    terms = list(dict.fromkeys(query.split()))
    out = []
    for e in entries:
        score = sum(2.0 * (t in e.topic_terms) + 1.0 * (t in e.title_terms)
                    + 1.0 * (t in e.summary_terms) for t in terms)
        if any(t in e.topic_terms | e.title_terms | e.summary_terms for t in terms):
            out.append((-round(score, 9), -e.date_key, e.path, score))
    out.sort()
    return [(round(s, 9), p) for _, _, p, s in out]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=0, max_size=12, unique=True).flatmap(
    lambda ids: st.tuples(*[_entry(i) for i in ids])), st.lists(_word, min_size=1, max_size=4))
def test_body_weight_zero_is_the_frontmatter_ranking(entries: tuple, query_words_: list) -> None:
    query = " ".join(query_words_)
    zero = dataclasses.replace(DEFAULTS, search_body_weight=0.0)
    ranked = rank_entries(list(entries), query, config=zero)
    assert [(s.score, s.entry.path) for s in ranked] == _reference(list(entries), query)
    assert all(s.anchor is None and s.body_score == 0.0 for s in ranked)
    # ... and the same as entries that have no body at all (the ranking before bodies).
    bare = [dataclasses.replace(e, body="", body_line=0) for e in entries]
    assert [(s.score, s.entry.path) for s in rank_entries(bare, query, config=DEFAULTS)] == \
        [(s.score, s.entry.path) for s in ranked]


_CODE_WORDS = ["Migrations", "queries", "GitService.repoName", "running", "stopped", "PRs",
               "src/app.py", "HTTPServer", "9.0.1", "503", "boxes", "classes", "the", "x"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_CODE_WORDS), max_size=6).map(" ".join), min_size=1,
                max_size=6),
       st.lists(st.sampled_from(_CODE_WORDS), min_size=1, max_size=3))
def test_skipping_lines_without_a_probe_loses_no_hit(lines: list, query: list) -> None:
    from dsh_chapters_core.search.passages import _Matcher, line_hits

    qwords = query_words(" ".join(query))
    match = _Matcher(qwords)
    for line in lines:
        hits = [(which, i, i + len(w)) for i, w in words(line) for which in match(w)]
        assert line_hits(line, match) == hits


def _reference_score(body: str, query: list, stats: BodyStats, rules: PassageRules) -> float:
    """The passage rule read literally: every window of `rules.lines` lines, every half
    window, word by word (what `score_body` computes by runs of lines)."""
    from dsh_chapters_core.search.passages import _Matcher, window_starts

    match = _Matcher(query)
    lines = [[(i, w) for i, w in words(text)] for text in body.split("\n")]
    best = 0.0
    for start in window_starts(len(lines), rules.lines):
        window = lines[start:start + rules.lines]
        tf = [0] * len(query)
        pairs = set()
        for line in window:
            hits = [(q, i) for i, w in line for q in match(w)]
            for n, (q, i) in enumerate(hits):
                tf[q] += 1
                # The word before: this body word, or the hits of the body word just before.
                prev = {p for p, j in hits[:n] if j == i or j == max(
                    (k for _, k in hits[:n] if k < i), default=-1)}
                if q - 1 in prev:
                    pairs.add(q)
        held = sum(1 for t in tf if t)
        if not held:
            continue
        length = sum(len(line) for line in window)
        norm = rules.k1 * (1.0 - rules.b + rules.b * length / max(stats.line_words * rules.lines,
                                                                 1.0))
        bm25 = 0.0
        for q, t in enumerate(tf):
            if t:
                bm25 += stats.idf(query[q].text) * (t * (rules.k1 + 1.0)) / (t + norm)
        best = max(best, bm25 * held / len(query) + rules.phrase_bonus * len(pairs))
    return round(best, 9)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from([*_CODE_WORDS, "token_refresh", "token", "refresh"]),
                         max_size=5).map(" ".join), min_size=1, max_size=40),
       st.lists(st.sampled_from([*_CODE_WORDS, "token", "refresh"]), min_size=1, max_size=3),
       st.integers(2, 9))  # searchPassageLines is at least 2
def test_a_passage_scored_by_runs_of_lines_equals_the_rule_read_line_by_line(
        lines: list, query: list, size: int) -> None:
    qwords = query_words(" ".join(query))
    stats = BodyStats(documents=50, df={w.text: 3 for w in qwords}, line_words=3.0)
    rules = dataclasses.replace(RULES, lines=size)
    body = "\n".join(lines)
    got = score_body(body, 1, qwords, stats, rules)
    assert got.score == _reference_score(body, list(qwords), stats, rules)
    if got.anchor is not None:  # the anchor's text holds a query word
        held = {t for _, word in words(got.anchor.text) for t in word_terms(word)}
        assert any(w.terms & held for w in qwords)
