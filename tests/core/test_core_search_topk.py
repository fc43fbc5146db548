"""Reading few bodies (search.md): a body's ceiling is never below its score, and the best
`limit` found by ceilings are exactly the head of the full ranking."""

from __future__ import annotations

import random

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.ports.search import Holding
from dsh_chapters_core.search.index import DoorLayout
from dsh_chapters_core.search.passages import (
    BodyBound,
    BodyStats,
    PassageRules,
    body_profile,
    score_body,
)
from dsh_chapters_core.search.service import DoorName, SearchDoor, SearchRequest, SearchService
from dsh_chapters_core.search.terms import query_words
from dsh_chapters_core.testing.fakes_search import (
    CoreFrontmatterReader,
    MemoryDerivedTree,
    MemorySearchCache,
    chapter_path,
    document_text,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

VOCAB = ["alembic", "upgrade", "head", "GitService.repoName", "retry", "retries", "retrying",
         "src/app.py", "401", "token_refresh", "Token", "migration", "migrations", "the", "ran",
         "HTTPServer", "kebab-case", "9.0.1", "pytest", "passed", "error"]
LINES = st.lists(st.lists(st.sampled_from(VOCAB), max_size=9).map(" ".join), min_size=1,
                 max_size=30)
QUERY = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(LINES, QUERY, st.integers(2, 12), st.integers(1, 50), st.integers(0, 50),
       st.floats(0.5, 20.0), st.floats(0.0, 3.0), st.floats(0.0, 1.0))
def test_the_ceiling_is_never_below_the_score(lines: list[str], query: str, size: int,
                                              documents: int, df: int, line_words: float,
                                              k1: float, b: float) -> None:
    body = "\n".join(lines) + "\n"
    words = query_words(query)
    rules = PassageRules(k1=k1, b=b, lines=size, phrase_bonus=DEFAULTS.search_phrase_bonus,
                         snippet_chars=DEFAULTS.search_snippet_chars)
    stats = BodyStats(documents=documents + df, df={w.text: df for w in words},
                      line_words=line_words)
    bound = BodyBound.of(words, stats, rules)
    profile = body_profile(body, size)
    ceiling = bound.ceiling(bound.word_counts(profile))
    match = score_body(body, 1, words, stats, rules)
    assert ceiling + 1e-9 >= match.score
    assert (match.anchor is None) == (ceiling == 0.0)  # a held word is a ceiling above 0


def corpus(rnd: random.Random, size: int) -> MemoryDerivedTree:
    files = {}
    for n in range(size):
        body = "\n".join(" ".join(rnd.choices(VOCAB, k=rnd.randrange(1, 10)))
                         for _ in range(rnd.randrange(1, 120))) + "\n"
        files[chapter_path(f"s{n % 7}", n, "c")] = document_text(
            title=" ".join(rnd.sample(VOCAB, 2)), summary=" ".join(rnd.choices(VOCAB, k=4)),
            topics=rnd.sample(["auth", "retry", "migration", "ci"], rnd.randrange(3)),
            date=f"2026-0{rnd.randrange(1, 10)}-1{rnd.randrange(10)}T00:00:00Z",
            project_key=rnd.choice(["pk-1", "pk-1", "pk-2", ""]), body=body)
    return MemoryDerivedTree(files=files)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.lists(QUERY, min_size=1, max_size=4), st.integers(1, 12),
       st.sampled_from(["pk-1", ""]))
def test_the_bounded_head_is_the_full_ranking_head(seed: int, queries: list[str], limit: int,
                                                   scope: str) -> None:
    rnd = random.Random(seed)
    tree = corpus(rnd, rnd.randrange(1, 60))
    cache = MemorySearchCache()
    door = SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=CoreFrontmatterReader(), cache=cache, state=tree,
                      state_path="cache/index-store.tokens.json")
    svc = SearchService(doors=[door], config=DEFAULTS, clock_now=lambda: "2026-10-01T00:00:00Z")
    svc.refresh(door)
    for query in queries:
        request = SearchRequest(query=query, project_key=scope)
        bounded = svc.rank_door(door, request, limit=limit)
        full = svc.rank_door(door, request)
        assert bounded.total == full.total
        assert [(s.entry.path, s.score, s.anchor) for s in bounded.ranked] == [
            (s.entry.path, s.score, s.anchor) for s in full.ranked[:limit]]



def _indexed(files: dict[str, bytes], cache: MemorySearchCache) -> tuple[SearchService,
                                                                        SearchDoor]:
    """A store door over `files` with `cache`, its index built."""
    tree = MemoryDerivedTree(files=files)
    door = SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=CoreFrontmatterReader(), cache=cache, state=tree,
                      state_path="cache/index-store.tokens.json")
    svc = SearchService(doors=[door], config=DEFAULTS, clock_now=lambda: "2026-10-01T00:00:00Z")
    svc.refresh(door)
    return svc, door


def test_a_match_holding_only_a_weaker_word_still_takes_its_place() -> None:
    """Rounds list the holders of the strongest words first; an entry that holds only a
    weaker one (here `migration`, held by more, but twenty times in one passage) must still
    rank above a weak holder of the strong word (one `alembic`)."""
    bodies = {"c": "alembic " * 5, "a": "alembic", "b": "migration " * 20,
              **{f"d{n}": "migration" for n in range(2)},
              **{f"f{n}": "pytest passed the ran" for n in range(20)}}
    files = {chapter_path("s1", n, name): document_text(
        title=f"note {name}", date=f"2026-05-{10 + n:02d}T00:00:00Z", project_key="pk-1",
        body=body + "\n") for n, (name, body) in enumerate(sorted(bodies.items()))}
    svc, door = _indexed(files, MemorySearchCache())
    request = SearchRequest(query="alembic migration")
    full = [s.entry.path for s in svc.rank_door(door, request).ranked]
    assert [p.rsplit("-", 1)[-1] for p in full[:3]] == ["c.md", "b.md", "a.md"]
    for limit in range(1, len(full) + 1):
        bounded = svc.rank_door(door, request, limit=limit)
        assert [s.entry.path for s in bounded.ranked] == full[:limit]


def test_a_term_of_a_word_every_body_holds_is_listed_on_its_own() -> None:
    """`session` is in every body (so it weighs almost nothing there) and in three topics:
    the first round lists the three topic holders, not every body, and the answer is still
    the full ranking's head at every limit."""
    rounds: list[Holding | None] = []

    class Spy(MemorySearchCache):
        def bounded(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            rounds.append(kwargs.get("within"))  # type: ignore[arg-type]
            return super().bounded(*args, **kwargs)  # type: ignore[arg-type]

    files = {chapter_path("s1", n, f"c{n}"): document_text(
        title=f"note {n}", date=f"2026-05-{10 + n:02d}T00:00:00Z", project_key="pk-1",
        topics=["session"] if n % 10 == 0 else [],
        body=f"the session {'session ' * (n % 4)}ran\n") for n in range(30)}
    svc, door = _indexed(files, Spy())
    request = SearchRequest(query="session")
    full = [s.entry.path for s in svc.rank_door(door, request).ranked]
    assert len(full) == 30
    for limit in (1, 3, 4, 30):
        rounds.clear()
        bounded = svc.rank_door(door, request, limit=limit)
        assert [s.entry.path for s in bounded.ranked] == full[:limit]
        if limit <= 3:  # the three topic holders: certain without listing every body
            assert rounds and None not in rounds
            assert all(_lists_topic_holders_only(w) for w in rounds)


def _lists_topic_holders_only(within: Holding | None) -> bool:
    """A round that lists only entries holding `session` in their frontmatter."""
    parts = (within.all_of or (within,)) if within is not None else ()
    return any(p.terms == frozenset({"session"}) and not p.words for p in parts)
