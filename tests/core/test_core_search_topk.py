"""Top matches from postings (search.md "Top matches"): a term's ceiling is never below what it
adds, and the matches handed out by the pruned top-k are exactly, in order and score, what
scoring every document and sorting gives (`rank_entries`, the reference)."""

from __future__ import annotations

import dataclasses
import hashlib
import random
from datetime import date

from dsh_chapters_core.config import DEFAULTS, Config
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.search import make_entry, rank_entries
from dsh_chapters_core.search.dates import TimeWindow
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import (
    PassageRules,
    best_passage,
    body_passages,
    body_stats,
    passage_score,
    term_ceiling,
)
from dsh_chapters_core.search.scorer import (
    LexicalWeights,
    body_terms,
    frontmatter_score,
    passage_rules,
)
from dsh_chapters_core.search.topk import (
    EAGER_ROWS,
    LOOKUP_ROWS,
    BodyQuery,
    matching,
    top_matches,
)
from dsh_chapters_core.testing.fakes_search import MemorySearchIndex
from hypothesis import given, settings
from hypothesis import strategies as st

VOCAB = ["alembic", "upgrade", "head", "GitService.repoName", "retry", "retries", "retrying",
         "src/app.py", "401", "token_refresh", "Token", "migration", "migrations", "the", "ran",
         "HTTPServer", "kebab-case", "9.0.1", "pytest", "passed", "error", "→ tool Bash(",
         "**User:**", "```", "## Turn · seq 1–2"]
LINES = st.lists(st.lists(st.sampled_from(VOCAB), max_size=9).map(" ".join), min_size=1,
                 max_size=30)
QUERY = st.lists(st.sampled_from(VOCAB[:21]), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(1, 200), st.floats(0.1, 2000.0), st.floats(0.0, 3.0),
       st.floats(0.0, 1.0), st.floats(0.1, 20.0))
def test_a_terms_ceiling_is_never_below_what_it_adds(most: int, shortest: int, expected: float,
                                                     k1: float, b: float, idf: float) -> None:
    ceiling = term_ceiling(idf, most, shortest, k1, b, expected)
    for tf in range(1, most + 1):
        for length in (shortest, shortest + 1, shortest * 3):
            score = passage_score([tf], length, [idf], k1, b, expected)
            assert ceiling + 1e-9 >= score


def entry(rnd: random.Random, n: int, vocab: list[str]) -> SearchEntry:
    lines = [" ".join(rnd.choice(vocab) for _ in range(rnd.randint(0, 9)))
             for _ in range(rnd.randint(1, 40))]
    blocks = []
    for k in range(0, len(lines), 5):  # blocks the archive's way: a label, a fenced text
        label = rnd.choice(["**User:**", "**Assistant:**", "→ tool Bash({})", "← result Bash:"])
        blocks.append(f"{label}\n\n```text\n" + "\n".join(lines[k:k + 5]) + "\n```")
    if rnd.random() < 0.2:
        blocks.insert(0, "## Turn · seq 1–9 · 2026-09-01")
    kind = DocumentKind.RULE if rnd.random() < 0.08 else DocumentKind.CHAPTER
    words = ["auth", "token", "retry", "migration", "alembic", "401", "deploy"]
    return make_entry(
        path=(f"rules/h1/{n:03d}-security-x.md" if kind is DocumentKind.RULE
              else f"s{n % 5}/chapters/{n:03d}-x.md"),
        kind=kind,
        title=" ".join(rnd.sample(words, rnd.randint(0, 3))),
        summary=" ".join(rnd.sample(words, rnd.randint(0, 2))),
        topics=rnd.sample(words, rnd.randint(0, 2)),
        category="security" if kind is DocumentKind.RULE else "",
        # Equal dates happen: ties are broken by date, then path.
        date=f"2026-09-{rnd.randint(1, 4):02d}T00:00:00Z",
        project_key=rnd.choice(["pk1", "pk1", "pk2", ""]),
        body="\n\n".join(blocks) + "\n" if kind is DocumentKind.CHAPTER else "",
        body_line=9,
    )


def indexed(entries: list[SearchEntry], config: Config,
            lists: tuple[int, int, int, float] | None = None) -> MemorySearchIndex:
    index = MemorySearchIndex(passage_lines=config.search_passage_lines, lists=lists)
    index.apply(upserts=[(e, hashlib.sha256(e.body.encode()).hexdigest()) for e in entries],
                removed=(), state={"manifest": "m"})
    return index


def top(index: MemorySearchIndex, query: str, config: Config, *, scope: str = "",
        core: frozenset[str] = frozenset(), window: TimeWindow | None = None,
        costs: tuple[int, int] = (EAGER_ROWS, LOOKUP_ROWS),
        ) -> list[tuple[str, float, tuple[int, int, float]]]:
    words = body_terms(query, config)
    terms = tuple(dict.fromkeys(t for t in query.casefold().split() if t.isalnum()))
    from dsh_chapters_core.search.aliases import EMPTY_ALIASES

    terms = EMPTY_ALIASES.query_terms(query)
    stats = index.stats(words)
    rules = passage_rules(config)
    body = BodyQuery(index.postings(words), tuple(stats.idf(t) for t in words), stats.expected,
                     rules, config.search_body_weight)
    weights = LexicalWeights.of(config)
    front = {doc: frontmatter_score(h.topic, h.title, h.summary, h.category,
                                    config.rules_core_bonus if not core.isdisjoint(h.rule)
                                    else 0.0, weights)
             for doc, h in index.field_hits(terms).items()}
    excluded = index.excluded(scope)
    dated = dict.fromkeys(index.dated(window), config.search_date_bonus) if window else {}
    found = [(h.facts.path, h.score, (h.body.passage, h.body.elsewhere, h.body.second))
             for h in top_matches(body, front, excluded=excluded, facts=index.facts,
                                  dated=dated, eager_rows=costs[0], lookup_rows=costs[1])]
    assert matching(body, front, excluded) == len(found)
    return found


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), QUERY, st.sampled_from([0.0, 1.0, 3.0]),
       st.sampled_from([2, 5, 48]), st.floats(0.0, 2.0), st.floats(0.0, 1.0),
       st.sampled_from(["", "pk1"]), st.booleans(), st.sampled_from([0.0, 0.5, 4.0]),
       st.integers(1, 6), st.sampled_from([None, 1, 2, 3]), st.sampled_from([0.5, 2.0, 9.0]),
       st.sampled_from([(EAGER_ROWS, LOOKUP_ROWS), (0, LOOKUP_ROWS), (0, 0), (6, 1_000)]),
       st.sampled_from([0.0, 0.15, 1.0]), st.sampled_from([0.0, 0.3, 1.0]))
def test_pruned_top_matches_equal_scoring_every_document(
        seed: int, size: int, query: str, weight: float, lines: int, k1: float, b: float,
        scope: str, core: bool, phrase: float, near: int, day: int | None,
        date_bonus: float, costs: tuple[int, int], share: float, second: float) -> None:
    # `costs` (rows walked before scoring, what a lookup costs) change only how much is read:
    # with no eager walk the bound does all the work, and lookups that cost nothing or a lot
    # keep or give up tightening ceilings one document at a time.
    rnd = random.Random(seed)
    vocab = rnd.sample(VOCAB, rnd.randint(3, len(VOCAB)))
    entries = [entry(rnd, n, vocab) for n in range(size)]
    config = DEFAULTS.replace(search_body_weight=weight, search_passage_lines=lines,
                              search_bm25_k1=k1, search_bm25_b=b, search_phrase_bonus=phrase,
                              search_phrase_terms=near, search_date_bonus=date_bonus,
                              search_chapter_share=share, search_second_passage_share=second)
    same_as_scoring_everything(indexed(entries, config), entries, query, config, scope=scope,
                               core=core, day=day, costs=costs)


def same_as_scoring_everything(index: MemorySearchIndex, entries: list[SearchEntry],
                               query: str, config: Config, *, scope: str, core: bool,
                               day: int | None, costs: tuple[int, int]) -> None:
    """The pruned top matches equal `rank_entries` (scores, order, the best passage)."""
    # A question that names a day: the entries dated that day rank higher, if they match.
    window = (TimeWindow(((date(2026, 9, day), date(2026, 9, day + 1)),)) if day else None)
    core_ids = frozenset(e.rule_id for e in entries if e.rule_id) if core else frozenset()
    found = top(index, query, config, scope=scope, core=core_ids, window=window, costs=costs)
    reference = rank_entries(entries, query, config=config, core_rule_ids=core_ids,
                             window=window)
    if scope:
        reference = tuple(s for s in reference if s.entry.project_key in (scope, ""))
    assert [(p, s) for p, s, _ in found] == [(s.entry.path, s.score) for s in reference]
    assert [k for _, _, k in found] == [(s.body.passage, s.body.elsewhere, s.body.second)
                                        for s in reference]


def test_the_index_scores_a_body_as_the_reference_does() -> None:
    rnd = random.Random(7)
    entries = [entry(rnd, n, VOCAB) for n in range(30)]
    index = indexed(entries, DEFAULTS)
    words = body_terms("alembic retry 401", DEFAULTS)
    stats = index.stats(words)
    assert stats == body_stats((body_passages(e.body, DEFAULTS.search_passage_lines)
                                for e in entries), words, documents=len(entries))
    rules = PassageRules(DEFAULTS.search_bm25_k1, DEFAULTS.search_bm25_b,
                         DEFAULTS.search_passage_lines, DEFAULTS.search_snippet_chars)
    body = BodyQuery(index.postings(words), tuple(stats.idf(t) for t in words), stats.expected,
                     rules, DEFAULTS.search_body_weight)
    ids = index.ids(e.path for e in entries)
    facts = index.facts(list(ids.values()))
    for e in entries:
        expected = best_passage(body_passages(e.body, rules.lines), words, stats, rules)
        assert body.best(ids[e.path], facts[ids[e.path]]) == expected


def test_a_common_word_does_not_score_every_match() -> None:
    # 300 chapters say `error`; 3 also say `alembic`. Asked `alembic error`, the matches
    # holding `alembic` are certain before the rest are looked at: few are scored.
    common = [make_entry(path=f"s{n}/chapters/001-x.md", kind=DocumentKind.CHAPTER,
                         title="work", body=f"**User:**\n\n```text\nerror {n} in the build\n```\n",
                         date="2026-09-01T00:00:00Z", body_line=9) for n in range(300)]
    rare = [dataclasses.replace(e, body=e.body.replace("error", "alembic error"))
            for e in common[:3]]
    index = indexed([*rare, *common[3:]], DEFAULTS)
    asked: list[int] = []
    facts = index.facts

    def counting(ids):  # type: ignore[no-untyped-def]
        asked.extend(ids)
        return facts(ids)

    index.facts = counting  # type: ignore[method-assign]
    words = body_terms("alembic error", DEFAULTS)
    stats = index.stats(words)
    rules = PassageRules(DEFAULTS.search_bm25_k1, DEFAULTS.search_bm25_b,
                         DEFAULTS.search_passage_lines, DEFAULTS.search_snippet_chars)
    body = BodyQuery(index.postings(words), tuple(stats.idf(t) for t in words), stats.expected,
                     rules, DEFAULTS.search_body_weight)
    ranking = top_matches(body, {}, excluded=frozenset(), facts=index.facts)
    head = [next(ranking).facts.path for _ in range(3)]
    assert sorted(head) == sorted(e.path for e in rare)
    assert len(asked) <= 16  # the first batch, not 300


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), QUERY, st.sampled_from([1.0, 3.0]),
       st.sampled_from([2, 5, 48]), st.sampled_from(["", "pk1"]), st.booleans(),
       st.sampled_from([0.0, 0.5]), st.sampled_from([None, 1, 2]),
       st.sampled_from([(EAGER_ROWS, LOOKUP_ROWS), (0, LOOKUP_ROWS), (0, 0), (6, 1_000)]),
       st.integers(1, 12), st.integers(1, 6), st.integers(0, 5),
       st.sampled_from([0.5, 0.9, 1.0, 1.4]))
def test_top_matches_from_lists_of_the_strongest_holders_equal_scoring_every_document(
        seed: int, size: int, query: str, weight: float, lines: int, scope: str, core: bool,
        phrase: float, day: int | None, costs: tuple[int, int], part: int, holders: int,
        keep: int, share: float) -> None:
    # The lists bound a search under the default rules (k1, b, the second passage's share):
    # parts of every size, lists of a few holders or none, written at a shorter, the same or a
    # longer average passage than today's (impacts.py).
    rnd = random.Random(seed)
    vocab = rnd.sample(VOCAB, rnd.randint(3, len(VOCAB)))
    entries = [entry(rnd, n, vocab) for n in range(size)]
    config = DEFAULTS.replace(search_body_weight=weight, search_passage_lines=lines,
                              search_phrase_bonus=phrase)
    same_as_scoring_everything(indexed(entries, config, (part, holders, keep, share)), entries,
                               query, config, scope=scope, core=core, day=day, costs=costs)
