"""The SQLite FTS5 search cache on real files: it may never change a ranking."""

from __future__ import annotations

import itertools
import os
import random
import sqlite3
import tempfile
from pathlib import Path

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.curation import FactType, make_fact
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.ports.search import Holding
from dsh_chapters_core.search import SearchRefusal
from dsh_chapters_core.search.aliases import EMPTY_ALIASES
from dsh_chapters_core.search.entries import entry_from_document
from dsh_chapters_core.search.index import DoorLayout
from dsh_chapters_core.search.passages import BodyBound, PassageRules
from dsh_chapters_core.search.scorer import LexicalWeights
from dsh_chapters_core.search.service import DoorName, SearchDoor, SearchRequest, SearchService
from dsh_chapters_core.search.terms import query_words
from dsh_chapters_core.testing.fakes_search import (
    MemorySearchCache,
    chapter_path,
    document_text,
)
from dsh_chapters_fs.chapterfile import parse_document
from dsh_chapters_fs.search_cache import SqliteSearchCache, _any_of
from dsh_chapters_fs.search_tree import FrontmatterReader, SearchTree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PK = "pk-1"
TOPICS = ["auth", "authentication", "jwt", "sqlite", "cache", "caches", "deploy", "ci",
          "db-migrations", "tests", "Ünïcode", "search_index"]
WORDS = [*TOPICS, "fix", "refresh", "token", "Earlier", "history", "Conversation", "span",
         "middleware", "page", "naïve", "ß"]
BODY_WORDS = ["alembic", "upgrade", "head", "GitService.repoName", "retry", "retries", "the",
              "src/app.py", "401", "token_refresh", "Token", "migration", "pytest", "passed"]


def door(root: Path, cache: SqliteSearchCache | None) -> SearchDoor:
    tree = SearchTree(root)
    return SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=FrontmatterReader(bodies=True), prefix=".dsh-chapters/",
                      cache=cache,
                      state=tree, state_path="cache/index-store.tokens.json")


def service(root: Path, cache: SqliteSearchCache | None,
            core: frozenset[str] = frozenset()) -> SearchService:
    return SearchService(doors=[door(root, cache)], config=DEFAULTS, harness_id="h1",
                         core_rules=lambda: core)


def write(root: Path, path: str, data: bytes) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def random_corpus(root: Path, rnd: random.Random, size: int, *, mixed: bool = True) -> None:
    """`mixed`: two projects and legacy fragments (the cache's general query); else one
    project and none (its join-free query)."""
    numbers: dict[str, int] = {}
    for _ in range(size):
        session = f"s{rnd.randrange(12)}"
        numbers[session] = numbers.get(session, 0) + 1
        legacy = mixed and rnd.random() < 0.2
        title = ("Earlier history " if legacy else "") + " ".join(rnd.sample(WORDS, 3))
        # Most chapters have a body: the bounded path reads bodies by their ceilings.
        # (Drawn from a seed: hypothesis would count every word as a draw of its own.)
        lines = random.Random(rnd.getrandbits(32))
        body = "".join(" ".join(lines.choices(WORDS + BODY_WORDS, k=lines.randrange(1, 9)))
                       + "\n" for _ in range(lines.randrange(60))) if lines.random() < 0.8 else ""
        write(root, chapter_path(session, numbers[session], "c"), document_text(
            title=title, summary=" ".join(rnd.choices(WORDS, k=8)),
            topics=rnd.sample(TOPICS, rnd.randrange(4)),
            date=f"2026-0{rnd.randrange(1, 10)}-1{rnd.randrange(10)}T00:00:00Z",
            project_key=rnd.choice([PK, PK, "pk-2"] if mixed else [PK, ""]), body=body))
    for n in range(1, 4):
        write(root, f"rules/h{n}/00{n}-testing-r.md", document_text(
            title="testing rule", kind="rule", category=rnd.choice(["testing", "auth"]),
            body=" ".join(rnd.choices(WORDS, k=6)) + "\n", project_key=PK))


def outcome(svc: SearchService, request: SearchRequest) -> object:
    try:
        return svc.search(request).to_json()
    except SearchRefusal as refusal:
        return ("refused", refusal.needed, refusal.requested, refusal.total)


def same_answers(root: Path, queries: list[str], core: frozenset[str] = frozenset()) -> None:
    """Every budget: a big one (the cache hands over everything) and small ones (it hands
    over only its best candidates, and must still give the same lines and totals)."""
    with SqliteSearchCache(root / "cache/search-store.sqlite") as cache:
        cached, plain = service(root, cache, core), service(root, None, core)
        for query in queries:
            for cross in (False, True):
                for budget in (1_000_000, 400, 90, 30):
                    request = SearchRequest(query=query, project_key=PK, cross_project=cross,
                                            max_tokens=budget)
                    assert outcome(cached, request) == outcome(plain, request), (query, budget)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(5, 60),
       st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1,
                max_size=5),
       st.lists(st.tuples(st.sampled_from(TOPICS), st.sampled_from(TOPICS)), max_size=2))
def test_cached_search_equals_a_plain_full_scan(
    rnd: random.Random, size: int, queries: list[list[str]], aliases: list[tuple[str, str]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        random_corpus(root, rnd, size, mixed=rnd.random() < 0.6)
        if aliases:
            facts = [make_fact(FactType.TOPIC_ALIAS, at=str(i), **{"from": a, "to": b})
                     for i, (a, b) in enumerate(aliases)]
            write(root, "edits/h2/curation.jsonl",
                  "".join(f.to_line() + "\n" for f in facts).encode())
        texts = [" ".join(q) for q in queries]
        same_answers(root, texts, core=frozenset({"h2/002", "rules/h3/003-testing-r.md"}))
        # Then the corpus moves on: new chapters, an enrichment rewrite; the cache follows.
        random_corpus(root, rnd, 5, mixed=False)
        victim = sorted(root.glob("s*/chapters/*.md"))[0]
        victim.write_bytes(document_text(title="rewritten sqlite", topics=["jwt"],
                                         project_key=PK))
        service(root, None).refresh(door(root, None))  # e.g. `chapters index`
        same_answers(root, [*texts, "sqlite", "jwt"])


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(3, 20))
def test_a_terms_stored_document_frequency_follows_every_write(rnd: random.Random,
                                                              size: int) -> None:
    # termmax.n is kept by the writes themselves (a rebuild counts it once): after chapters
    # are added, rewritten and removed, it equals the bodies FTS5 lists under the term.
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db_path = root / "cache/search-store.sqlite"
        random_corpus(root, rnd, size)
        with SqliteSearchCache(db_path) as cache:
            service(root, cache).refresh(door(root, cache))
            random_corpus(root, rnd, 4, mixed=False)
            chapters = sorted(root.glob("s*/chapters/*.md"))
            chapters[0].write_bytes(document_text(title="rewritten", body="retry the migration\n",
                                                  project_key=PK))
            chapters[1].unlink()
            service(root, cache).refresh(door(root, cache))
            stored = dict(cache.db.execute("SELECT term, n FROM termmax WHERE n > 0"))
            counted = {term: cache.db.execute(
                "SELECT count(*) FROM terms WHERE terms MATCH ?", (_any_of((), [term]),)
            ).fetchone()[0] for term in stored}
            assert stored == counted
            rows = dict(cache.db.execute("SELECT term, count(*) FROM bodytf GROUP BY term"))
            assert stored == rows


def test_a_rounds_total_is_counted_beside_it_and_its_failure_is_not_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The count of every match runs on a second connection while the round lists; its total
    # is the one counted on the first, and an error there reaches the caller.
    random_corpus(tmp_path, random.Random(11), 30, mixed=False)  # no fragment: bounded
    with SqliteSearchCache(tmp_path / "cache/search-store.sqlite") as cache:
        service(tmp_path, cache).refresh(door(tmp_path, cache))
        words = query_words("retry migration")
        rules = PassageRules(DEFAULTS.search_bm25_k1, DEFAULTS.search_bm25_b,
                             DEFAULTS.search_passage_lines, DEFAULTS.search_phrase_bonus,
                             DEFAULTS.search_snippet_chars)
        bound = BodyBound.of(words, cache.body_stats(words), rules)
        within = Holding(all_of=(Holding(words=frozenset({0})), Holding(words=frozenset({1}))))
        kw = dict(weights=LexicalWeights.of(DEFAULTS), body_weight=3.0, slack=0.0)
        found = cache.bounded(["retry"], bound, within=within, **kw)
        assert found is not None and found.total > 0
        assert found.total == cache._match_total(["retry"], bound, "")
        assert cache._counter is not None

        def broken(*args: object) -> int:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(cache, "_match_total", broken)
        with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
            cache.bounded(["retry"], bound, within=within, **kw)
    assert cache._counter is None  # closed with the cache


def answer(root: Path, cache: SqliteSearchCache) -> dict:
    return service(root, cache).search(SearchRequest(query="auth sqlite")).to_json()


def test_the_cache_rebuilds_itself_when_missing_corrupt_or_older(tmp_path: Path) -> None:
    random_corpus(tmp_path, random.Random(7), 30)
    expected = service(tmp_path, None).search(SearchRequest(query="auth sqlite")).to_json()
    db = tmp_path / "cache/search-store.sqlite"
    with SqliteSearchCache(db) as cache:
        assert answer(tmp_path, cache) == expected
        assert cache.count() > 0
    db.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    with SqliteSearchCache(db) as cache:
        assert answer(tmp_path, cache) == expected
    db.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    with SqliteSearchCache(db) as cache:
        assert answer(tmp_path, cache) == expected
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA user_version = 999")
    raw.close()
    with SqliteSearchCache(db) as cache:
        assert answer(tmp_path, cache) == expected
        assert cache.count() > 0


def test_a_query_on_a_fresh_cache_reads_no_chapter(tmp_path: Path) -> None:
    random_corpus(tmp_path, random.Random(3), 40)
    with SqliteSearchCache(tmp_path / "cache/search-store.sqlite") as cache:
        svc = service(tmp_path, cache)
        svc.search(SearchRequest(query="auth"))  # builds the index and the cache
        reads: list[str] = []
        tree = svc.doors[0].tree
        original = tree.read

        def counting(path: str) -> bytes:
            reads.append(path)
            return original(path)

        tree.read = counting  # type: ignore[method-assign]
        svc.search(SearchRequest(query="sqlite deploy"))
        assert [p for p in reads if "/chapters/" in p] == []


def test_search_tree_containment_and_fingerprints(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    root = tmp_path / "store"
    (root / "artifacts").mkdir(parents=True)
    (root / "artifacts/ok.txt").write_text("fine")
    os.symlink(outside, root / "artifacts/leak.txt")
    os.symlink(root / "artifacts/ok.txt", root / "artifacts/inner.txt")
    tree = SearchTree(root)
    assert tree.contains("artifacts/ok.txt") and tree.contains("artifacts/inner.txt")
    assert not tree.contains("artifacts/leak.txt")
    before = tree.fingerprint("artifacts/ok.txt")
    (root / "artifacts/ok.txt").write_text("changed!")
    assert before and tree.fingerprint("artifacts/ok.txt") != before
    assert tree.fingerprint("artifacts/none.txt") == ""
    tree.remove("artifacts/ok.txt")
    tree.remove("artifacts/ok.txt")
    assert not tree.exists("artifacts/ok.txt")


@pytest.mark.parametrize("query", ["Ünïcode", "search_index", "naïve", "SS"])
def test_unicode_and_underscores_tokenize_the_same_in_fts_and_in_the_scorer(
    tmp_path: Path, query: str
) -> None:
    random_corpus(tmp_path, random.Random(11), 40)
    same_answers(tmp_path, [query])


_FRONTMATTER_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(
    st.sampled_from(["title", "summary", "topics", "date", "projectKey", "kind", "category",
                     "status", "seqRange", "messages", "sha256", "generated", "x-y", "yes",
                     "tokens", "odd key"]),
    _FRONTMATTER_VALUES, max_size=8),
    st.sampled_from(["s1/chapters/001-a.md", "rules/h1/001-testing-x.md"]),
    st.text(max_size=40))
def test_the_fast_frontmatter_path_reads_like_the_yaml_parser(
    fields: dict, path: str, body: str
) -> None:
    text = dump_frontmatter(fields) + body
    assert FrontmatterReader().parse(path, text.encode("utf-8", "surrogatepass")) == \
        parse_document(path, text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))


def test_hand_edited_yaml_goes_to_the_yaml_parser() -> None:
    text = "---\ntitle: plain words here\ntopics:\n  - auth\n  - jwt\n---\nbody\n"
    doc = FrontmatterReader().parse("s1/chapters/001-a.md", text.encode())
    assert doc == parse_document("s1/chapters/001-a.md", text)
    assert doc is not None and doc.topics == ("auth", "jwt") and doc.title == "plain words here"


def test_a_span_is_scoped_by_its_first_member_in_both_paths(tmp_path: Path) -> None:
    write(tmp_path, chapter_path("s1", 1, "a"), document_text(
        title="Earlier history", summary="nothing", project_key=PK))
    write(tmp_path, chapter_path("s1", 2, "b"), document_text(
        title="Earlier history", summary="zeppelin", project_key="pk-2"))
    same_answers(tmp_path, ["zeppelin"])
    plain = service(tmp_path, None).search(SearchRequest(query="zeppelin", project_key=PK))
    assert plain.total == 1 and plain.matches[0].entry.members == (
        "s1/chapters/001-a.md", "s1/chapters/002-b.md")




@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(2, 40))
def test_sql_ceilings_are_the_core_reference(seed: int, lines: int) -> None:
    """`bounded` evaluates `BodyBound.ceiling` in SQL: the same rows, order and values as the
    core's reference expression (the memory cache), for every scope."""
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        entries = []
        for n in range(rnd.randrange(1, 40)):
            body = "\n".join(" ".join(rnd.choices(BODY_WORDS, k=rnd.randrange(1, 8)))
                             for _ in range(rnd.randrange(1, 90))) + "\n"
            path = chapter_path(f"s{n % 5}", n, "c")
            data = document_text(title=" ".join(rnd.sample(BODY_WORDS, 2)),
                                 topics=rnd.sample(TOPICS, rnd.randrange(3)),
                                 date=f"2026-0{rnd.randrange(1, 10)}-01T00:00:00Z",
                                 project_key=rnd.choice([PK, "pk-2", ""]), body=body)
            doc = parse_document(path, data.decode())
            entries.append((entry_from_document(doc), f"sha{n}"))
        memory = MemorySearchCache()
        memory.apply(upserts=entries, removed=(), state={})
        rules = PassageRules(DEFAULTS.search_bm25_k1, DEFAULTS.search_bm25_b, lines,
                             DEFAULTS.search_phrase_bonus, DEFAULTS.search_snippet_chars)
        with SqliteSearchCache(root / "c.sqlite", passage_lines=lines) as cache:
            cache.apply(upserts=entries, removed=(), state={})
            for _ in range(4):
                query = " ".join(rnd.sample(BODY_WORDS + TOPICS, rnd.randrange(1, 4)))
                words = query_words(query)
                bound = BodyBound.of(words, cache.body_stats(words), rules)
                terms = EMPTY_ALIASES.query_terms(query)  # the frontmatter's canonical terms
                for scope in (PK, ""):
                    kw = dict(weights=LexicalWeights.of(DEFAULTS), body_weight=3.0, slack=0.15,
                              project_key=scope)
                    # Every match, then only the holders of a random part of the query.
                    some = rnd.sample(terms, rnd.randrange(len(terms) + 1))
                    part = Holding(terms=frozenset(some), words=frozenset(
                        i for i in range(len(words)) if rnd.random() < 0.5))
                    # And the holders of every one of some elements (a first round).
                    every = Holding(all_of=tuple(
                        [Holding(terms=frozenset({t})) for t in some]
                        + [Holding(words=frozenset({i})) for i in sorted(part.words)]))
                    for within, few in ((None, 16), (part, 16), (every, 1), (every, 10**9)):
                        if within is not None and not (within.terms or within.words
                                                       or within.all_of):
                            continue
                        cache.few_holders = few  # read by key, or by scanning each term's rows
                        got = cache.bounded(terms, bound, within=within, **kw)
                        want = memory.bounded(terms, bound, within=within, **kw)
                        assert got is not None and want is not None
                        got_rows, want_rows = list(got.rows), list(want.rows)
                        assert got.total == want.total
                        if within is None:
                            assert got.total == len(want_rows)
                        assert dict(got_rows) == pytest.approx(dict(want_rows), abs=1e-9)
                        # Descending ceilings (equal ones may differ in order by float noise).
                        assert all(a[1] >= b[1] - 1e-9 for a, b in itertools.pairwise(got_rows))
                # A fresh cache's maxima are exactly the door's.
                assert cache.maxima(terms, bound) == memory.maxima(terms, bound)
            # Another passage size: the profiles do not fit, so the cache says it cannot bound.
            other = BodyBound.of(query_words("retry"), cache.body_stats(query_words("retry")),
                                 PassageRules(1.2, 0.75, lines + 1, 0.5, 160))
            assert cache.bounded(["retry"], other, weights=LexicalWeights.of(DEFAULTS),
                                 body_weight=3.0, slack=0.0) is None
        # Reopened for another passage size, the file is dropped and refilled by its user.
        with SqliteSearchCache(root / "c.sqlite", passage_lines=lines + 1) as cache:
            assert cache.count() == 0
