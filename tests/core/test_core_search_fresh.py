"""The cache stays equal to a full rebuild with bodies in it (search.md "The search cache"):
after any sequence of writes, each followed by the O(delta) refresh a write path runs, every
answer (order, scores, anchors) equals the plain full scan of the same files."""

from __future__ import annotations

import json

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.search.index import DoorLayout
from dsh_chapters_core.search.service import (
    NOTES_MAX_BYTES,
    DoorName,
    SearchDoor,
    SearchRequest,
    SearchService,
)
from dsh_chapters_core.testing.fakes_search import (
    CoreFrontmatterReader,
    MemoryDerivedTree,
    MemorySearchIndex,
    chapter_path,
    document_text,
)
from hypothesis import given, settings
from hypothesis import strategies as st

PK = "pk-1"
WORDS = ["alembic", "migration", "401", "token", "cors", "src/app.py", "GitService.repoName",
         "uploads", "retrying", "the", "vault"]
QUERIES = ["alembic 401", "migrations", "git service", "upload retry", "cors token", "vault"]


def svc(tree: MemoryDerivedTree, cache: MemorySearchIndex | None) -> SearchService:
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
    cached = svc(tree, MemorySearchIndex())
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


class CountingTree(MemoryDerivedTree):
    """Counts walks of the whole tree (a query that trusts the notes makes none)."""

    walks = 0

    def fingerprints(self, prefix: str = "", *, skip: object = ()) -> dict[str, str]:
        type(self).walks += 1
        return super().fingerprints(prefix, skip=skip)  # type: ignore[arg-type]


def test_noted_writes_are_read_without_a_walk_and_a_gap_walks() -> None:
    """The freshness rule: generations that all noted their paths are read exactly; a
    generation that noted nothing (another kind of writer) makes the next query walk."""
    generation = ["1"]
    tree = CountingTree(files={chapter_path("s1", 1, "a"): document_text(
        title="alembic upgrade", date="2026-09-01T00:00:00Z", body="ran alembic\n")})
    door = SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=CoreFrontmatterReader(), cache=MemorySearchIndex(), state=tree,
                      state_path="cache/index-store.tokens.json",
                      generation_path="cache/index-store.generation",
                      notes_path="cache/index-store.written.jsonl")
    svc = SearchService(doors=[door], config=DEFAULTS, generation=lambda: generation[0])
    svc.refresh(door)
    assert svc.bring_current(door) is None
    walks = CountingTree.walks
    for n in (2, 3):  # two archives, each noting the chapter it wrote
        generation[0] = str(n)
        path = chapter_path("s2", n, "b")
        tree.write(path, document_text(title=f"retry backoff {n}", date="2026-09-02",
                                       body="the retry loop\n"))
        svc.note_written(door, [path])
    report = svc.bring_current(door)
    assert report is not None and sorted(report.update.added) == [
        chapter_path("s2", 2, "b"), chapter_path("s2", 3, "b")]
    assert CountingTree.walks == walks  # read what was noted, walked nothing
    assert svc.search(SearchRequest(query="retry")).total == 2
    generation[0] = "4"  # a writer that noted nothing (a rule, a sync)
    tree.write(chapter_path("s3", 1, "c"), document_text(title="retry once more",
                                                         date="2026-09-03", body="retry\n"))
    svc.bring_current(door)
    assert CountingTree.walks > walks
    assert svc.search(SearchRequest(query="retry")).total == 3


def test_notes_past_their_cap_are_dropped_and_the_next_query_walks() -> None:
    """Writers with no query between them (a live archive left running) never rewrite an
    ever-growing notes file: past NOTES_MAX_BYTES the notes go, and the query walks once."""
    generation = ["1"]
    tree = CountingTree()
    door = SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=CoreFrontmatterReader(), cache=MemorySearchIndex(), state=tree,
                      state_path="cache/index-store.tokens.json",
                      generation_path="cache/index-store.generation",
                      notes_path="cache/index-store.written.jsonl")
    svc = SearchService(doors=[door], config=DEFAULTS, generation=lambda: generation[0])
    svc.refresh(door)
    svc.note_written(door, ["s0/chapters/001-x.md"])  # current at this number: not noted
    assert not tree.exists(door.notes_path)
    long_name = "x" * 2000
    n, size = 1, 0
    while True:
        n += 1
        generation[0] = str(n)
        path = chapter_path("s1", n, long_name)
        tree.write(path, document_text(title=f"retry {n}", date="2026-09-02", body="retry\n"))
        svc.note_written(door, [path])
        if not tree.exists(door.notes_path):
            break
        size = len(tree.read(door.notes_path))
        assert size <= NOTES_MAX_BYTES
    assert size + len(long_name) > NOTES_MAX_BYTES  # dropped only once the next would not fit
    walks = CountingTree.walks
    svc.bring_current(door)
    assert CountingTree.walks > walks
    assert svc.search(SearchRequest(query="retry", max_tokens=4000)).total == n - 1


def test_a_whole_door_reports_its_progress_to_the_end() -> None:
    """While a door is read whole, the caller hears (phase, done, total), rising to the end:
    what `chapters search` and `chapters index` draw a bar with on a terminal."""
    files = {chapter_path(f"s{n % 9}", n, "c"): document_text(
        title=f"chapter {n}", date="2026-09-01T00:00:00Z", body=f"retry {n}\n")
        for n in range(1, 601)}
    tree = MemoryDerivedTree(files=files)
    service = svc(tree, MemorySearchIndex())
    heard: list[tuple[str, int, int]] = []
    service.progress = lambda phase, done, total: heard.append((phase, done, total))
    service.refresh(service.doors[0])
    # No index existed: a first build, heard as such ("building the search index").
    reads = [(d, t) for p, d, t in heard if p == "build"]
    assert reads[0] == (0, 600) and reads[-1] == (600, 600)
    assert [d for d, _ in reads] == sorted(d for d, _ in reads)
    heard.clear()
    service.refresh(service.doors[0], rebuild=True)  # a rebuild of an index that exists
    assert [(d, t) for p, d, t in heard if p == "read"][-1] == (600, 600)


TOKENS = "cache/index-store.tokens.json"
JOURNAL = "cache/index-store.tokens.journal.jsonl"


def _tokens_on_disk(tree: MemoryDerivedTree) -> dict[str, str]:
    """The tokens file with its journal applied, read as a reader outside the service would."""
    tokens = json.loads(tree.files[TOKENS])
    for line in tree.files.get(JOURNAL, b"").splitlines():
        for path, token in json.loads(line).items():
            if token is None:
                tokens.pop(path, None)
            else:
                tokens[path] = token
    return tokens


def test_a_small_update_journals_its_tokens_and_a_big_one_writes_them_whole() -> None:
    """The change tokens of an update that touched a few files are appended to a journal,
    never the whole tokens file; past the journal's cap (and on a rebuild) the file is
    written whole and the journal dropped. A torn journal line costs a re-read, never an
    answer."""
    tree = MemoryDerivedTree()
    service = svc(tree, MemorySearchIndex())

    def write(n: int, word: str) -> str:
        path = chapter_path(f"s{n % 3}", n, "x")
        tree.write(path, document_text(title=f"chapter {n}", topics=["retry"], project_key=PK,
                                       date="2026-09-01", body=f"{word} loop\n"))
        return path

    for n in range(1, 30):
        write(n, "alembic")
    service.refresh(service.store)
    base = tree.files[TOKENS]
    assert JOURNAL not in tree.files
    report = service.refresh(service.store, changed=[write(30, "vault"), write(2, "vault")])
    assert tree.files[TOKENS] == base and len(tree.files[JOURNAL].splitlines()) == 1
    assert _tokens_on_disk(tree) == report.update.fingerprints
    tree.remove(chapter_path("s1", 1, "x"))
    report = service.refresh(service.store, changed=[chapter_path("s1", 1, "x")])
    assert chapter_path("s1", 1, "x") not in _tokens_on_disk(tree)
    assert _tokens_on_disk(tree) == report.update.fingerprints
    assert service.search(SearchRequest(query="vault", project_key=PK)).total == 2

    # A crash mid-append leaves a torn last line: it is skipped, and the files whose tokens it
    # held are read again and found unchanged by their hash.
    tree.write(JOURNAL, tree.files[JOURNAL] + b'{"s0/chap')
    write(4, "vault")
    report = service.refresh(service.store, changed=[chapter_path("s1", 4, "x")])
    assert report.update.changed == (chapter_path("s1", 4, "x"),)
    assert b'{"s0/chap' not in tree.files[JOURNAL]  # the torn line is not carried on
    assert _tokens_on_disk(tree) == report.update.fingerprints
    assert service.search(SearchRequest(query="vault", project_key=PK)).total == 3
    assert answers(service) == answers(svc(tree, None))

    rounds = 0
    while JOURNAL in tree.files:  # each update's line is small: the cap takes many of them
        rounds += 1
        write(100 + rounds, "cors")
        service.refresh(service.store, changed=[chapter_path(f"s{(100 + rounds) % 3}",
                                                             100 + rounds, "x")])
    assert rounds > 10 and len(tree.files[TOKENS]) > len(base)
    assert json.loads(tree.files[TOKENS]) == _tokens_on_disk(tree)
    service.refresh(service.store, rebuild=True)
    assert JOURNAL not in tree.files
