"""The scorer's rules (§8, search.md "What ranks"): one deterministic, inspectable ranking."""

from __future__ import annotations

import random

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.curation import FactType, make_fact
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.search import AliasMap, make_entry, rank_entries
from dsh_chapters_core.search.entries import SearchEntry
from hypothesis import given
from hypothesis import strategies as st

CHAPTER = DocumentKind.CHAPTER
RULE = DocumentKind.RULE


def chapter(path: str, title: str = "", summary: str = "", topics: tuple[str, ...] = (),
            date: str = "2026-09-01T00:00:00Z", aliases: AliasMap | None = None) -> SearchEntry:
    return make_entry(path=path, kind=CHAPTER, title=title, summary=summary, topics=topics,
                      date=date, aliases=aliases or AliasMap())


def rule(path: str, body: str, category: str, date: str = "2026-09-01T00:00:00Z") -> SearchEntry:
    return make_entry(path=path, kind=RULE, title=f"{category} rule", summary=body,
                      category=category, date=date)


def paths(ranked: tuple) -> list[str]:
    return [s.entry.path for s in ranked]


def test_a_topic_hit_outranks_a_title_hit() -> None:
    by_title = chapter("s1/chapters/001-a.md", title="fix auth redirect")
    by_topic = chapter("s2/chapters/001-b.md", title="session work", topics=("auth",))
    ranked = rank_entries([by_title, by_topic], "auth", config=DEFAULTS)
    assert paths(ranked) == ["s2/chapters/001-b.md", "s1/chapters/001-a.md"]
    assert [s.score for s in ranked] == [2.0, 1.0]
    assert (ranked[0].topic_hits, ranked[1].title_hits) == (1, 1)


def test_title_and_summary_count_once_each_per_term() -> None:
    entry = chapter("s/chapters/001-a.md", title="auth token", summary="auth token refresh",
                    topics=("auth",))
    (scored,) = rank_entries([entry], "auth token", config=DEFAULTS)
    # auth: topic 2 + title 1 + summary 1; token: title 1 + summary 1
    assert scored.score == 6.0
    assert (scored.topic_hits, scored.title_hits, scored.summary_hits) == (1, 2, 2)


def test_recency_only_breaks_ties() -> None:
    old_strong = chapter("a/chapters/001-x.md", topics=("auth",), date="2020-01-01T00:00:00Z")
    new_weak = chapter("b/chapters/001-x.md", title="auth", date="2026-11-30T00:00:00Z")
    new_tied = chapter("c/chapters/001-x.md", topics=("auth",), date="2026-11-29T00:00:00Z")
    ranked = rank_entries([old_strong, new_weak, new_tied], "auth", config=DEFAULTS)
    # Same score: the newer first; a higher score beats any date.
    assert paths(ranked) == ["c/chapters/001-x.md", "a/chapters/001-x.md", "b/chapters/001-x.md"]


def test_a_fresh_file_that_matched_no_term_never_ranks() -> None:
    fresh = chapter("z/chapters/001-x.md", title="brand new", date="2026-12-01T00:00:00Z")
    hit = chapter("a/chapters/001-x.md", title="auth", date="2001-01-01T00:00:00Z")
    assert paths(rank_entries([fresh, hit], "auth", config=DEFAULTS)) == ["a/chapters/001-x.md"]


def test_final_ties_break_by_path_so_the_order_is_total() -> None:
    entries = [chapter(f"s{i}/chapters/001-x.md", title="auth", date="2026-01-01")
               for i in (3, 1, 2)]
    ranked = rank_entries(entries, "auth", config=DEFAULTS)
    assert paths(ranked) == [f"s{i}/chapters/001-x.md" for i in (1, 2, 3)]


def test_a_category_match_adds_one_and_a_half_once() -> None:
    testing = rule("rules/h1/001-testing-run.md", "always run the suite", "testing")
    (scored,) = rank_entries([testing], "testing suite", config=DEFAULTS)
    # "testing": category 1.5 + title ("testing rule") 1; "suite": body-as-summary 1
    assert scored.category_hit and scored.score == 3.5


def test_a_rules_body_scores_as_its_summary() -> None:
    doc = Document(path="rules/h1/002-style-quotes.md", kind=RULE, title="style",
                   summary="unrelated", body="prefer double quotes", category="style")
    (scored,) = rank_entries([doc], "quotes", config=DEFAULTS)
    assert scored.summary_hits == 1 and scored.score == 1.0


def test_the_core_bonus_changes_only_this_machines_order() -> None:
    a = rule("rules/h1/001-testing-a.md", "run tests before push", "testing")
    b = rule("rules/h2/001-testing-b.md", "run tests in ci", "testing")
    mine = rank_entries([a, b], "tests", config=DEFAULTS, core_rule_ids=frozenset({"h2/001"}))
    theirs = rank_entries([a, b], "tests", config=DEFAULTS)
    assert paths(theirs) == ["rules/h1/001-testing-a.md", "rules/h2/001-testing-b.md"]
    assert paths(mine) == ["rules/h2/001-testing-b.md", "rules/h1/001-testing-a.md"]
    assert mine[0].core_bonus == DEFAULTS.rules_core_bonus
    assert mine[0].score == theirs[1].score + DEFAULTS.rules_core_bonus
    # The bonus never makes an unmatched rule rank.
    assert rank_entries([a], "deploy", config=DEFAULTS, core_rule_ids=frozenset({"h1/001"})) == ()


def test_aliases_canonicalize_both_the_query_and_the_topics() -> None:
    aliases = AliasMap.from_facts([make_fact(FactType.TOPIC_ALIAS, **{"from": "auth",
                                                                       "to": "authentication"})])
    entry = chapter("s/chapters/001-a.md", title="login", topics=("auth",), aliases=aliases)
    assert entry.topics == ("authentication",)
    for query in ("auth", "authentication", "AUTH"):
        (scored,) = rank_entries([entry], query, config=DEFAULTS, aliases=aliases)
        assert scored.topic_hits == 1, query
    titled = chapter("s/chapters/002-b.md", title="authentication flow", aliases=aliases)
    assert rank_entries([titled], "auth", config=DEFAULTS, aliases=aliases)[0].title_hits == 1


def test_alias_chains_and_cycles_resolve_deterministically() -> None:
    chain = AliasMap.from_pairs([("authn", "auth"), ("auth", "authentication")])
    assert chain.canonical("authn") == "authentication"
    cycle = AliasMap.from_pairs([("b", "a"), ("a", "b")])
    assert cycle.canonical("a") == cycle.canonical("b") == "a"
    later_wins = AliasMap.from_pairs([("x", "y"), ("x", "z")])
    assert later_wins.canonical("x") == "z"


def test_documents_and_entries_rank_the_same() -> None:
    doc = Document(path="s/chapters/001-a.md", kind=CHAPTER, title="auth", topics=("jwt",),
                   date="2026-01-01")
    from_doc = rank_entries([doc], "auth jwt", config=DEFAULTS)
    from_entry = rank_entries([chapter(doc.path, title="auth", topics=("jwt",),
                                       date="2026-01-01")], "auth jwt", config=DEFAULTS)
    assert [(s.score, s.entry.path) for s in from_doc] == [
        (s.score, s.entry.path) for s in from_entry]


def test_recency_is_reported_against_now_hint_but_never_ranked_on() -> None:
    entry = chapter("s/chapters/001-a.md", title="auth", date="2026-10-31T00:00:00Z")
    (scored,) = rank_entries([entry], "auth", config=DEFAULTS, now_hint="2026-11-30T00:00:00Z")
    assert abs(scored.recency - 0.5) < 1e-9  # one 30-day half-life
    assert scored.score == 1.0


WORDS = ["auth", "token", "refresh", "cache", "sqlite", "deploy", "tests", "index"]


@given(st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS),
                          st.lists(st.sampled_from(WORDS), max_size=3),
                          st.integers(0, 5)), min_size=1, max_size=30),
       st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), st.randoms())
def test_the_order_is_independent_of_input_order(
    rows: list, query: list[str], rnd: random.Random
) -> None:
    entries = [chapter(f"s{i}/chapters/{i:03d}-x.md", title=t, summary=s, topics=tuple(tp),
                       date=f"2026-01-0{d + 1}") for i, (t, s, tp, d) in enumerate(rows)]
    first = rank_entries(entries, " ".join(query), config=DEFAULTS)
    shuffled = list(entries)
    rnd.shuffle(shuffled)
    again = rank_entries(shuffled, " ".join(query), config=DEFAULTS)
    assert [(s.score, s.entry.path) for s in first] == [(s.score, s.entry.path) for s in again]
    assert all(s.score > 0 for s in first)
