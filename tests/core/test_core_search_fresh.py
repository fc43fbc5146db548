"""The cache stays equal to a full rebuild with bodies in it (search.md "The search cache"):
after any sequence of writes, each followed by the O(delta) refresh a write path runs, every
answer (order, scores, anchors) equals the plain full scan of the same files."""

from __future__ import annotations

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.search.index import DoorLayout
from dsh_chapters_core.search.service import DoorName, SearchDoor, SearchRequest, SearchService
from dsh_chapters_core.testing.fakes_search import (
    CoreFrontmatterReader,
    MemoryDerivedTree,
    MemorySearchCache,
    chapter_path,
    document_text,
)
from hypothesis import given, settings
from hypothesis import strategies as st

PK = "pk-1"
WORDS = ["alembic", "migration", "401", "token", "cors", "src/app.py", "GitService.repoName",
         "uploads", "retrying", "the", "vault"]
QUERIES = ["alembic 401", "migrations", "git service", "upload retry", "cors token", "vault"]


def svc(tree: MemoryDerivedTree, cache: MemorySearchCache | None) -> SearchService:
    door = SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=CoreFrontmatterReader(), prefix=".dsh-chapters/", cache=cache,
                      state=tree, state_path="cache/index-store.tokens.json")
    return SearchService(doors=[door], config=DEFAULTS, harness_id="h1",
                         clock_now=lambda: "2026-11-30T08:50:00Z")


def answers(service: SearchService) -> list[dict]:
    return [service.search(SearchRequest(query=q, project_key=PK, max_tokens=4000)).to_json()
            for q in QUERIES]


_line = st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join)
_op = st.tuples(st.sampled_from(["write", "remove"]), st.integers(1, 5),
                st.lists(_line, min_size=1, max_size=12), st.sampled_from(WORDS))


@settings(max_examples=60, deadline=None)
@given(st.lists(_op, min_size=1, max_size=10))
def test_the_cache_after_any_writes_equals_a_full_scan(ops: list[tuple]) -> None:
    tree = MemoryDerivedTree()
    cached = svc(tree, MemorySearchCache())
    for verb, n, lines, topic in ops:
        path = chapter_path(f"s{n % 3}", n, "x")
        if verb == "remove":
            if tree.exists(path):
                tree.remove(path)
        else:
            tree.write(path, document_text(title=f"chapter {n}", topics=[topic],
                                           date=f"2026-09-{n:02d}", project_key=PK,
                                           body="\n".join(lines) + "\n"))
        cached.refresh(cached.store, changed=[path])  # what a write path runs
        assert answers(cached) == answers(svc(tree, None))
