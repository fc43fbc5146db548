"""The search use case: two doors, one scorer; no-match vs empty; filters; cache == full scan."""

from __future__ import annotations

import json

import pytest
from dsh_chapters_core.config import DEFAULTS, Config
from dsh_chapters_core.curation import FactType, make_fact, parse_facts
from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.pool_layout import to_pool
from dsh_chapters_core.search import AnswerStatus, SearchRefusal
from dsh_chapters_core.search.index import DoorLayout
from dsh_chapters_core.search.service import (
    DoorName,
    SearchDoor,
    SearchRequest,
    SearchService,
    status_line,
)
from dsh_chapters_core.testing.fakes_search import (
    CoreFrontmatterReader,
    MemoryDerivedTree,
    MemorySearchIndex,
    chapter_path,
    document_text,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

READER = CoreFrontmatterReader()
PK = "pk-1"


def store_door(tree: MemoryDerivedTree, cache: MemorySearchIndex | None = None) -> SearchDoor:
    return SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree, reader=READER,
                      prefix=".dsh-chapters/", cache=cache, state=tree,
                      state_path="cache/index-store.tokens.json")


def mirror_door(tree: MemoryDerivedTree, state: MemoryDerivedTree,
                cache: MemorySearchIndex | None = None) -> SearchDoor:
    return SearchDoor(name=DoorName.MIRROR, layout=DoorLayout.MIRROR, tree=tree, reader=READER,
                      prefix=".dsh-knowledge/", cache=cache, state=state,
                      state_path="cache/index-mirror.tokens.json")


def service(*doors: SearchDoor, config: Config = DEFAULTS) -> SearchService:
    return SearchService(doors=doors, config=config, harness_id="h1",
                         clock_now=lambda: "2026-11-30T08:50:00Z")


def store_tree() -> MemoryDerivedTree:
    return MemoryDerivedTree(files={
        chapter_path("s1", 1, "jwt"): document_text(
            title="JWT refresh", topics=["auth"], date="2026-09-17", project_key=PK),
        chapter_path("s2", 1, "other"): document_text(
            title="auth in another project", topics=["auth"], date="2026-09-18",
            project_key="pk-2"),
        "rules/h1/001-testing-suite.md": document_text(
            title="testing rule", kind="rule", category="testing", project_key=PK,
            body="run the suite before push\n"),
    })


def ask(svc: SearchService, query: str, **kw: object) -> dict:
    request = SearchRequest(query=query, project_key=PK, **kw)  # type: ignore[arg-type]
    return svc.search(request).to_json()


@pytest.mark.parametrize("cached", [False, True])
def test_the_store_answers_and_names_its_door(cached: bool) -> None:
    svc = service(store_door(store_tree(), MemorySearchIndex() if cached else None))
    answer = ask(svc, "auth")
    assert answer["door"] == "store" and answer["status"] == "ok"
    assert [m["path"] for m in answer["matches"]] == [".dsh-chapters/s1/chapters/001-jwt.md"]
    cross = ask(svc, "auth", cross_project=True)
    assert cross["total"] == 2


def test_the_mirror_answers_first_then_the_store_when_the_pool_had_no_match() -> None:
    store = store_tree()
    mirror = MemoryDerivedTree(files={
        f"chapters/{PK}/s9/001-pool.md": document_text(title="pool cache work", topics=["cache"],
                                                       date="2026-10-01")})
    svc = service(mirror_door(mirror, store), store_door(store))
    assert ask(svc, "cache")["door"] == "mirror"
    assert ask(svc, "cache")["matches"][0]["path"] == f".dsh-knowledge/chapters/{PK}/s9/001-pool.md"
    fallback = ask(svc, "jwt")
    assert fallback["door"] == "store" and fallback["total"] == 1


def test_nothing_matched_and_nothing_here_are_different_answers() -> None:
    svc = service(store_door(store_tree()))
    missed = svc.search(SearchRequest(query="kubernetes", project_key=PK))
    assert missed.status is AnswerStatus.NO_MATCH and missed.searched == 3
    empty = service(store_door(MemoryDerivedTree())).search(SearchRequest(query="kubernetes"))
    assert empty.status is AnswerStatus.EMPTY
    assert (missed.to_json()["status"], empty.to_json()["status"]) == ("no-match", "empty")


@pytest.mark.parametrize("cached", [False, True])
def test_topic_reads_a_whole_shard(cached: bool) -> None:
    tree = store_tree()
    tree.write(chapter_path("s1", 2, "b"), document_text(title="nothing in common",
                                                         topics=["auth"], project_key=PK))
    svc = service(store_door(tree, MemorySearchIndex() if cached else None))
    svc.refresh(svc.store)
    answer = ask(svc, "", topic="Auth")
    assert [m["path"] for m in answer["matches"]] == [
        ".dsh-chapters/s1/chapters/001-jwt.md", ".dsh-chapters/s1/chapters/002-b.md"]
    assert ask(svc, "jwt", topic="auth")["total"] == 1
    assert ask(svc, "", topic="nope")["status"] == "no-match"


def test_an_empty_query_without_topic_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        service(store_door(store_tree())).search(SearchRequest(query="  "))


def test_core_rules_of_this_machine_rank_higher() -> None:
    tree = store_tree()
    tree.write("rules/h2/001-testing-other.md", document_text(
        title="testing rule", kind="rule", category="testing", project_key=PK,
        body="run the suite before push\n"))
    svc = service(store_door(tree))
    before = [m["path"] for m in ask(svc, "suite")["matches"]]
    assert before == [".dsh-chapters/rules/h1/001-testing-suite.md",
                      ".dsh-chapters/rules/h2/001-testing-other.md"]
    approve = make_fact(FactType.RULE_STATUS, rule="h2/001", status="core")
    tree.write("edits/h1/curation.jsonl", (approve.to_line() + "\n").encode())
    after = [m["path"] for m in ask(svc, "suite")["matches"]]
    assert after == before[::-1]
    other_machine = SearchService(doors=[store_door(tree)], config=DEFAULTS, harness_id="h9")
    assert [m["path"] for m in other_machine.search(
        SearchRequest(query="suite", project_key=PK)).to_json()["matches"]] == before


def test_topic_merge_is_a_user_fact_and_search_follows_it() -> None:
    tree = store_tree()
    tree.write(chapter_path("s1", 2, "login"), document_text(
        title="login", topics=["authentication"], project_key=PK))
    cache = MemorySearchIndex()
    svc = service(store_door(tree, cache))
    assert ask(svc, "authentication")["total"] == 1
    fact = svc.merge_topics("auth", "Authentication")
    (parsed,) = parse_facts("h1", tree.files["edits/h1/curation.jsonl"].decode()).facts
    assert (parsed.get("from"), parsed.get("to"), parsed.author) == (
        "auth", "authentication", "user")
    assert fact.to_line() == parsed.to_line()
    assert ask(svc, "authentication")["total"] == 2  # the cache re-derived under the new alias
    assert "index/authentication.md" in tree.files and "index/auth.md" not in tree.files


def test_vocabulary_is_shadow_by_default_and_facts_when_applied() -> None:
    tree = MemoryDerivedTree()
    for n in range(1, 4):
        tree.write(chapter_path("s", n, "x"), document_text(
            title=f"t{n}", topics=["test", "tests"], project_key=PK))
    shadow = service(store_door(tree)).refresh(store_door(tree), vocabulary=True)
    assert [(c.source, c.target) for c in shadow.candidates] == [("test", "tests")]
    assert "edits/h1/curation.jsonl" not in tree.files
    assert "1 topic merges (suggested only)" in status_line(tree, build_index="index")
    applied_cfg = DEFAULTS.replace(vocab_apply=True)
    applied = service(store_door(tree), config=applied_cfg).refresh(store_door(tree),
                                                                      vocabulary=True)
    assert len(applied.applied) == 1 and applied.applied[0].author == "plugin"
    assert json.loads(tree.files["topics/vocabulary.json"])["aliases"] == {"test": "tests"}
    assert "index/test.md" not in tree.files


def test_a_stale_cache_follows_a_manifest_another_process_wrote() -> None:
    tree = store_tree()
    cache = MemorySearchIndex()
    svc = service(store_door(tree, cache))
    assert ask(svc, "auth")["total"] == 1
    tree.write(chapter_path("s1", 5, "new"), document_text(title="auth again", project_key=PK))
    other = service(store_door(tree))  # e.g. `chapters index` without this cache
    other.refresh(other.store)
    assert ask(svc, "auth")["total"] == 2


# -- the property: the cached path equals the plain full scan --------------------------------------

WORDS = ["auth", "jwt", "cache", "sqlite", "deploy", "tests", "index", "refresh", "Earlier",
         "history", "span"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(st.sampled_from(WORDS), max_size=4),
                          st.lists(st.sampled_from(WORDS), max_size=3), st.integers(1, 9),
                          st.booleans(), st.sampled_from([PK, "pk-2"])), max_size=25),
       st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=4),
       st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)), max_size=2))
def test_cached_search_equals_a_full_scan(rows: list, queries: list, aliases: list) -> None:
    tree = MemoryDerivedTree()
    numbers = [0] * 4
    for session, title, topics, day, legacy, pk in rows:
        numbers[session] += 1
        tree.write(chapter_path(f"s{session}", numbers[session], "c"), document_text(
            title=("Earlier history " if legacy else "") + " ".join(title), topics=topics,
            summary=" ".join(reversed(title)), date=f"2026-01-0{day}", project_key=pk))
    lines = [make_fact(FactType.TOPIC_ALIAS, at=str(i), **{"from": a, "to": b}).to_line()
             for i, (a, b) in enumerate(aliases)]
    if lines:
        tree.write("edits/h2/curation.jsonl", ("\n".join(lines) + "\n").encode())
    cached = service(store_door(tree, MemorySearchIndex()))
    plain = service(store_door(tree))
    for words in queries:
        for cross in (False, True):
            for budget in (100_000, 120):
                request = SearchRequest(query=" ".join(words), project_key=PK,
                                        cross_project=cross, max_tokens=budget)
                assert outcome(cached, request) == outcome(plain, request)


def outcome(svc: SearchService, request: SearchRequest) -> object:
    try:
        return svc.search(request).to_json()
    except SearchRefusal as refusal:
        return ("refused", refusal.needed, refusal.total)


def test_anchors_stay_on_their_lines_when_new_aliases_rederive_the_rows() -> None:
    """A topic merge re-derives every row of the index from the row itself (no body read):
    where each body starts in its file must survive it, or every anchor is off by the lines
    of its frontmatter."""
    tree = MemoryDerivedTree()
    body = "## Turn 1\n\n**User:**\n\nwhy does the deploy fail\n\n**Assistant:**\n\n" \
           "the token expired\n"
    for n in range(1, 4):
        tree.write(chapter_path("s", n, "x"), document_text(
            title=f"step {n}", topics=["auth"], project_key=PK, body=body))
    cached = service(store_door(tree, MemorySearchIndex()))
    plain = service(store_door(tree))
    request = SearchRequest(query="token expired", project_key=PK)
    first = cached.search(request).to_json()
    assert first == plain.search(request).to_json()
    line = first["matches"][0]["anchor"]["line"]
    assert line > 9  # a file line, past the frontmatter
    alias = make_fact(FactType.TOPIC_ALIAS, **{"from": "auth", "to": "authentication"})
    tree.write("edits/h2/curation.jsonl", (alias.to_line() + "\n").encode())
    after = cached.search(request).to_json()
    assert after == plain.search(request).to_json()
    assert after["matches"][0]["anchor"]["line"] == line


def test_bring_current_reads_nothing_when_nothing_changed() -> None:
    tree = store_tree()
    svc = service(store_door(tree))
    assert svc.bring_current(svc.store) is not None  # first time: builds
    tree.reads.clear()
    assert svc.bring_current(svc.store) is None
    assert [p for p in tree.reads if not p.startswith("cache/")] == []
    tree.write(chapter_path("s1", 9, "new"), document_text(title="new", project_key=PK))
    report = svc.bring_current(svc.store)
    assert report is not None and report.update.added == ("s1/chapters/009-new.md",)
    tree.write("edits/h1/curation.jsonl", make_fact(FactType.NOTE, text="x").to_line().encode())
    assert svc.bring_current(svc.store) is not None
    tree.remove(chapter_path("s1", 9, "new"))
    assert svc.bring_current(svc.store).update.removed == ("s1/chapters/009-new.md",)
    assert svc.bring_current(svc.store) is None


def test_the_cache_is_written_in_batches_and_follows_new_aliases() -> None:
    tree = MemoryDerivedTree()
    for n in range(1, 8):
        tree.write(chapter_path("s", n, "x"), document_text(
            title=f"auth step {n}", topics=["auth"] if n % 2 else ["login"], project_key=PK))
    small = DEFAULTS.replace(search_cache_batch_rows=2)
    cache = MemorySearchIndex()
    cached = service(store_door(tree, cache), config=small)
    plain = service(store_door(tree), config=small)
    request = SearchRequest(query="authentication", project_key=PK)
    assert cached.search(request).to_json() == plain.search(request).to_json()
    before = cache.applies
    alias = make_fact(FactType.TOPIC_ALIAS, **{"from": "auth", "to": "authentication"})
    tree.write("edits/h2/curation.jsonl", (alias.to_line() + "\n").encode())
    answer = cached.search(request)
    assert answer.to_json() == plain.search(request).to_json() and answer.total == 7
    assert cache.applies - before >= 4  # 7 rows re-derived, two a transaction
    cached.refresh(cached.store, rebuild=True)
    assert cached.search(request).to_json() == plain.search(request).to_json()


# -- the mirror's first index, seeded from the store's (§12) ---------------------------------


class _Seeding(MemorySearchIndex):
    """The reference index, counting the rows a seed took."""

    seeded = 0

    def seed_from(self, other: object, paths: dict[str, str]) -> int:  # type: ignore[override]
        self.seeded = super().seed_from(other, paths)
        return self.seeded


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
                          st.lists(st.sampled_from(WORDS), max_size=6),
                          st.sampled_from(["same", "changed", "pool only"])),
                min_size=1, max_size=12),
       st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=4))
def test_a_mirror_index_seeded_from_the_store_answers_as_one_built_from_its_files(
    rows: list, queries: list,
) -> None:
    """A first sync publishes this machine's chapters, and a new machine's copies the pool's in:
    either way the pool and the store hold the same bytes, and the mirror door's first index
    takes the store's rows for them instead of cutting every body again. What it answers must
    equal a mirror index built from the pool's files: a chapter whose bytes differ in the pool
    and the pool's other chapters are read as always."""
    store, pool = MemoryDerivedTree(), MemoryDerivedTree()
    for n, (title, words, fate) in enumerate(rows, 1):
        data = document_text(title=" ".join(title), topics=title[:1], project_key=PK,
                             body="## Turn 1\n\n**User:**\n\n" + " ".join(words) + "\n")
        ours, theirs = chapter_path("s1", n, "c"), f"chapters/{PK}/s1/{n:03d}-c.md"
        if fate != "pool only":  # every chapter of ours is in the pool: nothing unpublished
            store.write(ours, data)
        if fate in ("same", "pool only"):
            pool.write(theirs, data)
        elif fate == "changed":
            pool.write(theirs, data.replace(b"User", b"Someone"))

    def twin(path: str) -> str | None:
        entry = to_pool(path, PK)
        return entry.pool_path if entry is not None else None

    seeded = _Seeding()
    linked = SearchService(
        doors=(mirror_door(pool, MemoryDerivedTree(), seeded),
               store_door(store, MemorySearchIndex())),
        config=DEFAULTS, harness_id="h1", clock_now=lambda: "2026-11-30T08:50:00Z",
        published_as=twin)
    fresh = service(mirror_door(pool, MemoryDerivedTree(), MemorySearchIndex()))
    for words in queries:
        request = SearchRequest(query=" ".join(words), project_key=PK, max_tokens=100_000)
        assert outcome(linked, request) == outcome(fresh, request)
    assert seeded.seeded == sum(1 for *_, fate in rows if fate == "same")
