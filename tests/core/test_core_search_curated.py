"""Curation facts that change ranking (§10.1): `topic-weight` scales a topic's hits, `group`
brings a matched chapter's siblings along."""

from __future__ import annotations

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.curation import FactType, make_fact
from dsh_chapters_core.search.index import DoorLayout
from dsh_chapters_core.search.service import DoorName, SearchDoor, SearchRequest, SearchService
from dsh_chapters_core.testing.fakes_search import (
    CoreFrontmatterReader,
    MemoryDerivedTree,
    MemorySearchIndex,
    chapter_path,
    document_text,
)

PK = "pk-1"


def door(tree: MemoryDerivedTree, cached: bool) -> SearchDoor:
    return SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=CoreFrontmatterReader(), prefix=".dsh-chapters/",
                      cache=MemorySearchIndex() if cached else None, state=tree,
                      state_path="cache/index-store.tokens.json")


def paths(tree: MemoryDerivedTree, query: str, cached: bool) -> list[tuple[str, float]]:
    svc = SearchService(doors=[door(tree, cached)], config=DEFAULTS, harness_id="h1",
                        clock_now=lambda: "2026-11-30T08:50:00Z")
    answer = svc.search(SearchRequest(query=query, project_key=PK, max_tokens=4000))
    return [(m["path"].removeprefix(".dsh-chapters/"), m["score"])
            for m in answer.to_json()["matches"]]


def facts(*made: object) -> bytes:
    return ("".join(f.to_line() + "\n" for f in made)).encode()  # type: ignore[attr-defined]


def corpus() -> MemoryDerivedTree:
    return MemoryDerivedTree(files={
        chapter_path("s1", 1, "a"): document_text(title="first", topics=["auth"],
                                                  date="2026-09-01", project_key=PK),
        chapter_path("s2", 1, "b"): document_text(title="second", topics=["cache"],
                                                  summary="auth notes", date="2026-09-02",
                                                  project_key=PK),
        chapter_path("s3", 1, "c"): document_text(title="third", topics=["deploy"],
                                                  date="2026-09-03", project_key=PK),
    })


@pytest.mark.parametrize("cached", [False, True])
def test_a_topic_weight_scales_that_topics_hits(cached: bool) -> None:
    tree = corpus()
    before = paths(tree, "auth", cached)
    assert before == [("s1/chapters/001-a.md", 2.0), ("s2/chapters/001-b.md", 1.0)]
    tree.write("edits/h1/curation.jsonl", facts(
        make_fact(FactType.TOPIC_WEIGHT, at="2026-10-01T00:00:00Z", topic="auth", weight=0.25)))
    after = paths(tree, "auth", cached)
    assert after == [("s2/chapters/001-b.md", 1.0), ("s1/chapters/001-a.md", 0.5)]


@pytest.mark.parametrize("cached", [False, True])
def test_a_group_brings_a_matched_chapters_siblings(cached: bool) -> None:
    tree = corpus()
    assert [p for p, _ in paths(tree, "auth", cached)] == [
        "s1/chapters/001-a.md", "s2/chapters/001-b.md"]
    tree.write("edits/h1/curation.jsonl", facts(make_fact(
        FactType.GROUP, at="2026-10-01T00:00:00Z", label="auth-work",
        chapters=["s1/chapters/001-a.md", "s3/chapters/001-c.md"])))
    ranked = paths(tree, "auth", cached)
    # s3 never says auth; its group sibling s1 does (2.0): it ranks at half of that, tied
    # with s2 (1.0), and a tie breaks by recency (s3 is newer).
    assert ranked == [("s1/chapters/001-a.md", 2.0), ("s3/chapters/001-c.md", 1.0),
                      ("s2/chapters/001-b.md", 1.0)]
