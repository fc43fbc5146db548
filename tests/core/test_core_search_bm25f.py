"""The body in the one scorer (search.md "Passages"): best-passage BM25 next to the frontmatter.

Saturation, a body-only word is found, a topic hit still outranks a body hit of the same
frequency, coordination, passages cut where the chapter is cut, counting terms fast the way
the definition counts them, and `searchBodyWeight: 0` is the frontmatter ranking exactly.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.search import make_entry, rank_entries
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import (
    BodyMatch,
    BodyStats,
    PassageRules,
    best_passage,
    body_passages,
    cut_anchor,
    line_hits,
)
from dsh_chapters_core.search.terms import STOPWORDS, count_terms, query_words, word_terms, words
from hypothesis import given, settings
from hypothesis import strategies as st

RULES = PassageRules(k1=DEFAULTS.search_bm25_k1, b=DEFAULTS.search_bm25_b,
                     lines=DEFAULTS.search_passage_lines,
                     snippet_chars=DEFAULTS.search_snippet_chars)
FILLER = "the build ran on the runner and printed its usual lines"


def chapter(path: str, *, body: str = "", title: str = "session work", topics: tuple[str, ...] = (),
            summary: str = "", date: str = "2026-09-01T00:00:00Z") -> SearchEntry:
    return make_entry(path=path, kind=DocumentKind.CHAPTER, title=title, summary=summary,
                      topics=topics, date=date, body=body, body_line=10)


def body_of(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def stats_for(documents: int, **df: int) -> BodyStats:
    return BodyStats(documents=documents, df=df, passages=10, words=100)


def score_body(body: str, terms: list[str], stats: BodyStats,
               rules: PassageRules = RULES) -> BodyMatch:
    return best_passage(body_passages(body, rules.lines), terms, stats, rules)


def terms_of(query: str) -> list[str]:
    return [next(iter(w.terms)) for w in query_words(query)]


def test_term_frequency_saturates() -> None:
    words = terms_of("alembic")
    stats = stats_for(100, alembic=5)
    scores = []
    for tf in (1, 2, 4, 8, 16):
        line = " ".join(["alembic"] * tf + ["word"] * (16 - tf))
        scores.append(score_body(body_of(line), words, stats).score)
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


def test_a_joined_word_is_evidence_of_every_query_word_it_holds() -> None:
    # `token_refresh` holds both `token` and `refresh`: it counts for each, as the index's
    # document frequencies (per term a body holds) count it.
    words = terms_of("token refresh")
    stats = stats_for(10, token=2, refresh=2)
    joined = score_body(body_of("called token_refresh again now"), words, stats)
    spaced = score_body(body_of("called token refresh again"), words, stats)
    token_only = score_body(body_of("called token again now"), words, stats)
    assert joined.score == spaced.score > token_only.score
    from dsh_chapters_core.search.passages import holds
    assert holds("called token_refresh again\n", words) == frozenset({0, 1})


def two_chapters(later: str) -> tuple[SearchEntry, SearchEntry]:
    """Two chapters whose first passage (a prompt about an alembic upgrade) is the same; the
    first's reply ends, a passage further down, with `later`, the second's with other words.
    The second is the newer."""
    def body(last: str) -> str:
        return ("**User:**\n\n```text\nthe alembic upgrade stopped at revision 42\n```\n\n"
                + "**Assistant:**\n\n```text\n" + "\n".join([FILLER] * 50 + [last])
                + "\n```\n")
    return (chapter("s1/chapters/001-a.md", body=body(later), date="2026-09-01T00:00:00Z"),
            chapter("s2/chapters/001-b.md", body=body("nothing else to say"),
                    date="2026-09-02T00:00:00Z"))


def test_a_question_word_elsewhere_in_the_chapter_counts_a_share_of_one() -> None:
    # Two chapters whose best passage is the same; the first also holds the question's other
    # word, in a passage of its own. With `searchChapterShare` that word counts a share of a
    # held one toward the best passage's coverage; with 0 only the passage's own words count.
    spread, alone = two_chapters("the migration is next")
    assert len(body_passages(spread.body, RULES.lines)) >= 2
    words = terms_of("alembic migration")
    stats = stats_for(10, alembic=2, migration=5)
    shared = dataclasses.replace(RULES, chapter_share=0.15)
    assert score_body(spread.body, words, stats).score == score_body(alone.body, words,
                                                                       stats).score
    assert score_body(spread.body, words, stats, shared).score == pytest.approx(
        score_body(alone.body, words, stats, shared).score * 1.15)
    # The second passage holds `migration` too: its share is off, so only the word counts.
    config = DEFAULTS.replace(search_second_passage_share=0.0)
    ranked = rank_entries([alone, spread], "alembic migration", config=config, stats=stats)
    assert [r.entry.path for r in ranked] == ["s1/chapters/001-a.md", "s2/chapters/001-b.md"]
    plain = rank_entries([alone, spread], "alembic migration", stats=stats,
                         config=config.replace(search_chapter_share=0.0))
    # A tie on the same best passage: the newer first.
    assert [r.entry.path for r in plain] == ["s2/chapters/001-b.md", "s1/chapters/001-a.md"]
    # `--explain` says what the share counted.
    from dsh_chapters_core.search.packing import explain_line, explained

    assert ranked[0].body.elsewhere == 1 and plain[1].body.elsewhere == 0
    assert explained(ranked[0], config)["passage"]["wordsElsewhere"] == 1
    assert "; 1 more word in the chapter)" in explain_line(ranked[0], config)
    assert "more word" not in explain_line(ranked[1], config)


def test_a_second_passage_that_answers_too_adds_a_share_of_its_score() -> None:
    # Two chapters whose best passage is the same; in the first, another passage further down
    # holds the question's words too. With `searchSecondPassageShare` the body scores its best
    # passage plus that share of the second-best one's; with 0 the best passage alone.
    again, once = two_chapters("alembic upgrade again")
    words = terms_of("alembic upgrade")
    stats = stats_for(10, alembic=2, upgrade=5)
    alone = score_body(once.body, words, stats)
    plain = score_body(again.body, words, stats)  # RULES: the best passage alone
    assert plain.score == alone.score and plain.second == alone.second == 0.0
    lifted = dataclasses.replace(RULES, second_share=0.3)
    found = score_body(again.body, words, stats, lifted)
    assert 0.0 < found.second <= plain.score
    assert found.passage == plain.passage
    assert found.score == round(plain.score + 0.3 * found.second, 9)
    assert score_body(once.body, words, stats, lifted).score == alone.score
    ranked = rank_entries([once, again], "alembic upgrade", config=DEFAULTS, stats=stats)
    assert [r.entry.path for r in ranked] == ["s1/chapters/001-a.md", "s2/chapters/001-b.md"]
    flat = rank_entries([once, again], "alembic upgrade", stats=stats,
                        config=DEFAULTS.replace(search_second_passage_share=0.0))
    # A tie on the same best passage: the newer first.
    assert [r.entry.path for r in flat] == ["s2/chapters/001-b.md", "s1/chapters/001-a.md"]
    # `--explain` says what the second passage added.
    from dsh_chapters_core.search.packing import explain_line, explained

    second = explained(ranked[0], DEFAULTS)["passage"]["secondPassage"]
    assert second == round(ranked[0].body.second, 4) > 0
    assert f"; 0.3 × {second:.2f} from a second passage)" in explain_line(ranked[0], DEFAULTS)
    assert "second passage" not in explain_line(ranked[1], DEFAULTS)


def test_passages_are_the_blocks_the_archive_wrote() -> None:
    body = ("## Turn · seq 1–4 · 2026-09-01\n\n**User:**\n\n````text\nwhy does **User:** fail\n"
            "```\nstill the prompt\n````\n\n→ tool Bash({\"command\": \"gh pr list\"})\n\n"
            "← result Bash:\n\n```text\n" + "\n".join(f"row {n}" for n in range(7))
            + "\n```\n\n**Assistant:**\n\n```text\nDone.\n```\n")
    lines = body.split("\n")
    found = [(p.first, p.lines, lines[p.first]) for p in body_passages(body, 5)]
    # The heading joins the prompt; a marker inside a fence starts nothing; the two-line tool
    # call packs with the prompt block only while both fit (here they do not: 12 lines > 5); a
    # long block is cut into runs of at most 5 lines; lines are what `\n` ends.
    # (Lines 0-4, the heading, the label and the fence, are the archive's markup, and lines
    # 22-23, the closing fence and a blank line, hold no word: no passage.)
    assert found == [(5, 5, "why does **User:** fail"),
                     (10, 2, '→ tool Bash({"command": "gh pr list"})'),
                     (12, 5, "← result Bash:"), (17, 5, "row 2"), (24, 5, "**Assistant:**")]
    # Consecutive blocks pack while they fit together: in 14 lines the prompt takes its tool
    # call (lines 0-11), the 12-line result stands alone, then the reply; in 48, one passage.
    assert [p.first for p in body_passages(body, 14)] == [0, 12, 24]
    assert [(p.first, p.lines) for p in body_passages(body, 48)] == [(0, len(lines))]
    # A passage counts the words of the verbatim text, not the archive's own markup.
    from dsh_chapters_core.search.passages import _content
    assert sum(p.length for p in body_passages(body, 5)) == sum(
        1 for _ in words(_content(body.encode()).decode()))
    (call,) = [p for p in body_passages(body, 2) if p.first == 10]
    assert "tool" not in call.tf and "bash" in call.tf and "text" not in call.tf


def test_a_carriage_return_inside_a_line_is_text() -> None:
    body = "**User:**\n\n```text\nfirst\rstill the first line alembic\nsecond\n```\n"
    (passage,) = body_passages(body, 48)
    match = best_passage([passage], ["alembic"], stats_for(2, alembic=1), RULES)
    anchor = cut_anchor(body.split("\n"), match, ["alembic"], body_line=10, snippet_chars=160)
    assert anchor is not None and anchor.line == 13
    assert anchor.text == "first\rstill the first line alembic"


_TEXT = st.text(alphabet=st.sampled_from(list("aZ9_.-/: \t\n\r`*#→·ßé!?()[]{}\"'")),
                max_size=200)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_counting_terms_fast_equals_the_definition(text: str) -> None:
    expected: dict[str, int] = {}
    n = 0
    for _, word in words(text):
        n += 1
        for term in word_terms(word):
            expected[term] = expected.get(term, 0) + 1
    got_n, got = count_terms(text.encode("utf-8"))
    assert (got_n, dict(got)) == (n, expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=12))
def test_the_token_memo_stays_bounded_and_exact_when_dropped(texts: list[str]) -> None:
    # A long import meets more distinct tokens than the memo keeps: dropped whole past its
    # bound, it gives the same counts as a memo that never forgot, and holds at most the bound
    # and one text's tokens.
    import dsh_chapters_core.search.terms as terms

    exact = [count_terms(t.encode("utf-8")) for t in texts]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(terms, "_TOKEN_MEMO_MAX", 4)
        for text, want in zip(texts, exact, strict=True):
            assert count_terms(text.encode("utf-8")) == want
            distinct = len(set(text.encode("utf-8").translate(terms._TOKEN_TABLE).split()))
            assert len(terms._token_memo) <= 4 + 1 + distinct
            assert set(terms._token_memo.words) == set(terms._token_memo)


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
    assert ranked[0].body_score > 1.5 * ranked[1].body_score
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
    # ... and, with the body read, entries that have no body at all rank by the same rule over
    # the query's words less its stopwords (all of them when every word is one).
    bare = [dataclasses.replace(e, body="", body_line=0) for e in entries]
    kept = [w for w in query.split() if w not in STOPWORDS] or query.split()
    assert [(s.score, s.entry.path) for s in rank_entries(bare, query, config=DEFAULTS)] == \
        _reference(bare, " ".join(kept))


_CODE_WORDS = ["Migrations", "queries", "GitService.repoName", "running", "stopped", "PRs",
               "src/app.py", "HTTPServer", "9.0.1", "503", "boxes", "classes", "the", "x"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_CODE_WORDS), max_size=6).map(" ".join), min_size=1,
                max_size=6),
       st.lists(st.sampled_from(_CODE_WORDS), min_size=1, max_size=3))
def test_skipping_lines_without_a_probe_loses_no_hit(lines: list, query: list) -> None:
    terms = terms_of(" ".join(query))
    for line in lines:
        hits = [(which, i, i + len(w)) for i, w in words(line)
                for which, t in enumerate(terms) if t in word_terms(w)]
        assert line_hits(line, terms) == hits


# Lines as tool output writes them: separators of every kind, doubled and hanging joints,
# capitals, runs with no query term beside runs with one, and non-ASCII text.
_LINE_PIECES = [*_CODE_WORDS, "--migrations", "a..b", "x/", ":queries:", "(HTTPServer)",
                '"GitService.repoName",', "RUNNING", "Ünïcode", "straße", "queriesqueries", "ß",
                "=", ",", "\t", "{", "src//app.py", "9.0.1.", "PRs:503"]


def _line_hits_reference(line: str, terms: list) -> list:
    return [(which, i, i + len(w)) for i, w in words(line)
            for which, t in enumerate(terms) if t in word_terms(w)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_LINE_PIECES), max_size=12).map(
           lambda ws: "".join(w + (" " if k % 3 else "") for k, w in enumerate(ws))),
           min_size=1, max_size=8),
       st.lists(st.sampled_from(_CODE_WORDS), min_size=1, max_size=4))
def test_a_line_s_hits_and_its_anchor_are_every_word_s(lines: list, query: list) -> None:
    terms = terms_of(" ".join(query))
    for line in lines:
        assert line_hits(line, terms) == _line_hits_reference(line, terms)
    # The anchor is the first line holding the most distinct query terms, whichever lines the
    # search skips because they cannot beat the best so far.
    held = [len({which for which, _, _ in _line_hits_reference(line, terms)}) for line in lines]
    match = BodyMatch(score=1.0, passage=0, first=0, lines=len(lines))
    anchor = cut_anchor(lines, match, terms, body_line=7, snippet_chars=40)
    assert anchor is not None and anchor.line == 7 + held.index(max(held))


def test_a_stopword_in_a_title_is_no_match_when_the_question_has_other_words() -> None:
    notes = chapter("s1/chapters/001-x.md", title="The deploy notes", summary="", topics=(),
                    body=body_of("nothing to see"), date="2026-09-01T00:00:00Z")
    auth = chapter("s2/chapters/001-x.md", title="Fix auth", summary="", topics=(),
                   body=body_of("auth token expired"), date="2026-09-02T00:00:00Z")
    found = rank_entries([notes, auth], "the auth", config=DEFAULTS)
    assert [s.entry.path for s in found] == [auth.path]  # `the` alone matched nothing
    assert found[0].title_hits == 1  # `auth`, not `the`
    # A question of stopwords only is asked as typed: the title's `the` matches.
    assert [s.entry.path for s in rank_entries([notes, auth], "the", config=DEFAULTS)] == [
        notes.path]
    # With the body weighted out, every word counts, as the record ranks (§8).
    zero = dataclasses.replace(DEFAULTS, search_body_weight=0.0)
    assert {s.entry.path for s in rank_entries([notes, auth], "the auth", config=zero)} == {
        notes.path, auth.path}
