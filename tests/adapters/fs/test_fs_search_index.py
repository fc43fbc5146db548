"""The SQLite search index on real files: it answers as a plain scan of every chapter does,
and what writes leave it holding equals what a rebuild from the files gives."""

from __future__ import annotations

import os
import random
import sqlite3
import tempfile
from datetime import date
from pathlib import Path

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.curation import FactType, make_fact
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.search import SearchRefusal
from dsh_chapters_core.search.aliases import EMPTY_ALIASES, AliasMap
from dsh_chapters_core.search.dates import TimeWindow
from dsh_chapters_core.search.entries import SearchEntry, entry_from_document
from dsh_chapters_core.search.index import DoorLayout
from dsh_chapters_core.search.service import DoorName, SearchDoor, SearchRequest, SearchService
from dsh_chapters_core.search.topk import Postings
from dsh_chapters_core.testing.fakes_search import (
    MemorySearchIndex,
    chapter_path,
    document_text,
)
from dsh_chapters_fs.chapterfile import parse_document
from dsh_chapters_fs.search_index import SqliteSearchIndex
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


def door(root: Path, cache: SqliteSearchIndex | None) -> SearchDoor:
    tree = SearchTree(root)
    return SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=FrontmatterReader(bodies=True), prefix=".dsh-chapters/",
                      cache=cache,
                      state=tree, state_path="cache/index-store.tokens.json")


def service(root: Path, cache: SqliteSearchIndex | None,
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
    with SqliteSearchIndex(root / "cache/search-store.sqlite") as cache:
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


Index = SqliteSearchIndex | MemorySearchIndex


def terms_of(index: Index) -> set[str]:
    if isinstance(index, SqliteSearchIndex):
        return ({str(r[0]) for r in index.db.execute("SELECT term FROM postings")}
                | {str(r[0]) for r in index.db.execute("SELECT term FROM fields")})
    return ({t for _, _, ps in index.docs.values() for p in ps for t in p.tf}
            | {t for e, _, _ in index.docs.values() for t in (
                e.topic_terms | e.title_terms | e.summary_terms | e.category_terms)})


def assert_lookups_read_the_rows(p: Postings) -> None:
    """Each holder's span and the rows a lookup reads there are its rows of the columns (the
    holders first, as a lookup reads them before the columns)."""
    looked = []
    for doc in [*p.holders, max(p.holders, default=0) + 1]:
        lo, hi = p.span(doc)
        base, columns = p.rows_at(lo, hi)
        looked.append((doc, lo, hi, [[c[r - base] for r in range(lo, hi)] for c in columns]))
    assert p.rows == len(p.docs)
    for doc, lo, hi, rows in looked:
        assert list(p.docs).count(doc) == hi - lo
        assert all(d == doc for d in p.docs[lo:hi])
        assert rows == [list(c[lo:hi]) for c in (p.docs, p.passage, p.tf, p.length, p.mention)]


def held(index: Index, terms: list[str]) -> dict[str, object]:
    """Everything an index holds, by path (ids differ between two indexes of one corpus)."""
    shas = dict(index.shas())
    ids = dict(index.ids(shas))
    path_of = {doc: path for path, doc in ids.items()}
    facts = index.facts(list(ids.values()))
    entries = index.entries(list(ids.values()))
    gone = index.excluded("")
    postings = {}
    for term, p in zip(terms, index.postings(terms), strict=True):
        if p is not None:
            assert_lookups_read_the_rows(p)
            rows = sorted((path_of[d], k, n, length) for d, k, n, length in
                          zip(p.docs, p.passage, p.tf, p.length, strict=True) if d not in gone)
            if rows:
                postings[term] = rows
    return {
        "shas": shas,
        "entries": {path_of[d]: e for d, e in entries.items()},
        "layout": {path_of[d]: (list(f.firsts), list(f.spans), f.date_key)
                   for d, f in facts.items()},
        "postings": postings,
        "fields": {(term, path_of[doc], h) for term in terms
                   for doc, h in index.field_hits([term]).items()},
        "stats": index.stats(terms),
        "count": index.count(),
        "legacy": index.has_legacy(),
        # The corpus's chapters are dated 2026-01-10 .. 2026-09-19 (a rule has no date): a
        # month of any year, a range of days, a window that holds every date and one that holds
        # none.
        "dated": [sorted(path_of[d] for d in index.dated(w) if d not in gone) for w in WINDOWS],
    }


WINDOWS = (TimeWindow(months=frozenset({3, 7})),
           TimeWindow(((date(2026, 2, 1), date(2026, 4, 15)),)),
           TimeWindow(((date(2020, 1, 1), date(2030, 12, 31)),)),
           TimeWindow(((date(2027, 1, 1), date(2027, 1, 1)),)))


def indexed_entries(root: Path, aliases: AliasMap = EMPTY_ALIASES
                    ) -> list[tuple[SearchEntry, str]]:
    import hashlib

    reader = FrontmatterReader(bodies=True)
    out = []
    for file in sorted(root.rglob("*.md")):
        rel = file.relative_to(root).as_posix()
        data = file.read_bytes()
        doc = reader.parse(rel, data)
        if doc is not None:
            out.append((entry_from_document(doc, aliases=aliases),
                        hashlib.sha256(data).hexdigest()))
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False),
       st.lists(st.sampled_from(["add", "rewrite", "retitle", "remove", "batch", "realias"]),
                min_size=1, max_size=14),
       st.sampled_from([1024, 4096, 1 << 20]), st.booleans())
def test_the_index_after_any_writes_equals_a_rebuild(rnd: random.Random, steps: list[str],
                                                    segment: int, lazy: bool) -> None:
    """Writes one at a time, rewrites, frontmatter-only rewrites (same body, as enrichment
    does), removals, batches and new topic aliases (every row re-derived from the same bytes),
    with segments small enough to be merged: what the index holds equals a fresh index of the
    same files, and the in-memory reference. Between writes the live index is read (its blobs
    as asked when `lazy`), so each write follows a question's reads."""
    aliases = EMPTY_ALIASES
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        random_corpus(root, rnd, 6, mixed=True)
        live = SqliteSearchIndex(Path(tmp) / "live.sqlite", segment_bytes=segment,
                                 lazy_bytes=0 if lazy else 1 << 20)
        live.apply(upserts=indexed_entries(root), removed=(), state={"manifest": "0"})
        for n, step in enumerate(steps):
            for p in live.postings(["alembic", "the", "retry"]):
                if p is not None:
                    assert_lookups_read_the_rows(p)
            chapters = sorted(root.glob("s*/chapters/*.md"))
            if step == "add" or not chapters:
                random_corpus(root, rnd, 1, mixed=True)
            elif step == "batch":
                random_corpus(root, rnd, 5, mixed=True)
            elif step == "realias":
                aliases = AliasMap.from_pairs([(rnd.choice(TOPICS), rnd.choice(TOPICS))])
                live.apply(upserts=indexed_entries(root, aliases), removed=(),
                           state={"manifest": str(n)})
                continue
            elif step == "remove":
                victim = rnd.choice(chapters)
                victim.unlink()
                live.apply(upserts=(), removed=[victim.relative_to(root).as_posix()],
                           state={"manifest": str(n)})
                continue
            else:
                victim = rnd.choice(chapters)
                text = victim.read_text(encoding="utf-8")
                head, _, body = text.partition("\n---\n")
                if step == "retitle":  # the body's bytes stay, the frontmatter changes
                    head = head.replace("\ntitle: ", '\ntitle: "renamed"\nx: ', 1)
                else:
                    body += "retry the alembic head\n"
                victim.write_text(head + "\n---\n" + body, encoding="utf-8")
            have = dict(live.shas())
            changed = [(e, sha) for e, sha in indexed_entries(root, aliases)
                       if have.get(e.path) != sha]
            live.apply(upserts=changed, removed=(), state={"manifest": str(n)})
        fresh = SqliteSearchIndex(Path(tmp) / "fresh.sqlite", segment_bytes=segment)
        fresh.apply(upserts=indexed_entries(root, aliases), removed=(), state={"manifest": "x"})
        memory = MemorySearchIndex()
        memory.apply(upserts=indexed_entries(root, aliases), removed=(), state={"manifest": "x"})
        terms = sorted(terms_of(live) | terms_of(fresh) | terms_of(memory))
        assert held(live, terms) == held(fresh, terms) == held(memory, terms)
        everything = held(fresh, terms)
        assert everything["dated"][2] == sorted(
            path for path, (_, _, key) in everything["layout"].items() if key)
        assert everything["dated"][2] and not everything["dated"][3]
        segments = live.db.execute("SELECT count(*) FROM segments").fetchone()[0]
        assert segments < 16  # merged as it grew
        live.close()
        fresh.close()


@pytest.mark.parametrize("segment", [512, 4096])
def test_an_import_merged_batch_after_batch_equals_a_rebuild(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, segment: int) -> None:
    """An import only adds: its merges meet no dead document, so a term one segment of a run
    holds keeps its blob and only the terms several hold are joined. After enough batches for
    merges of merged segments, the index equals a fresh one and the in-memory reference."""
    merges: list[int] = []  # the dead documents each merge met
    real = SqliteSearchIndex._merge_run

    def spy(self: SqliteSearchIndex, db: sqlite3.Connection, run: list[int]) -> None:
        marks = ",".join("?" * len(run))
        merges.append(db.execute(f"SELECT count(*) FROM dead WHERE seg IN ({marks})",
                                 run).fetchone()[0])
        real(self, db, run)

    monkeypatch.setattr(SqliteSearchIndex, "_merge_run", spy)
    rnd = random.Random(20261207)
    root = tmp_path / "store"
    live = SqliteSearchIndex(tmp_path / "live.sqlite", segment_bytes=segment)
    for n in range(40):
        batch = tmp_path / f"batch{n}"
        random_corpus(batch, rnd, 3, mixed=True)
        for file in sorted(batch.glob("s*/chapters/*.md")):  # new sessions, never rewritten
            rel = file.relative_to(batch)
            # and words of their own, as a real store's are: most terms are rare
            rare = " ".join("".join(rnd.choices("qxzjvkw", k=7)) for _ in range(4))
            write(root, f"b{n}{rel}", file.read_bytes() + f"{rare}\n".encode())
        if n == 0:
            for file in sorted(batch.glob("rules/*/*.md")):
                write(root, file.relative_to(batch).as_posix(), file.read_bytes())
        have = dict(live.shas())
        live.apply(upserts=[(e, sha) for e, sha in indexed_entries(root)
                            if e.path not in have], removed=(), state={"manifest": str(n)})
    assert len(merges) >= 4 and not any(merges)  # merged ones merged again, none with dead
    fresh = SqliteSearchIndex(tmp_path / "fresh.sqlite", segment_bytes=segment)
    fresh.apply(upserts=indexed_entries(root), removed=(), state={"manifest": "x"})
    memory = MemorySearchIndex()
    memory.apply(upserts=indexed_entries(root), removed=(), state={"manifest": "x"})
    terms = sorted(terms_of(live) | terms_of(fresh) | terms_of(memory))
    assert held(live, terms) == held(fresh, terms) == held(memory, terms)
    live.close()
    fresh.close()


@pytest.mark.parametrize(("waiting", "segment"), [(3, 1024), (65_536, 1 << 20)])
def test_a_batch_that_writes_a_path_twice_holds_its_last_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, waiting: int, segment: int) -> None:
    """Frontmatter rows wait to be written in key order. A batch that holds one path twice (a
    chapter retitled while the batch was gathered) must first write the waiting rows of the
    old version, so that removing it removes them: the index equals a fresh one of the last
    versions, whether the rows were written as they came (`waiting` 3, a segment a chapter) or
    all at the end."""
    import dsh_chapters_fs.search_index as search_index

    monkeypatch.setattr(search_index._FieldRows, "MAX_ROWS", waiting)
    root = tmp_path / "store"
    random_corpus(root, random.Random(11), 12, mixed=True)
    first = indexed_entries(root)
    victims = [f for f in sorted(root.glob("s*/chapters/*.md"))][:3]
    for n, victim in enumerate(victims):
        head, _, body = victim.read_text(encoding="utf-8").partition("\n---\n")
        head = head.replace("\ntitle: ", f'\ntitle: "renamed sqlite{n}"\nx: ', 1)
        body = body + "retry the alembic head\n" if n else body  # one keeps its body's bytes
        victim.write_text(head + "\n---\n" + body, encoding="utf-8")
    last = indexed_entries(root)
    again = {e.path for e, _ in last} & {v.relative_to(root).as_posix() for v in victims}
    assert len(again) == 3
    twice = SqliteSearchIndex(tmp_path / "twice.sqlite", segment_bytes=segment)
    twice.apply(upserts=[*first, *[(e, sha) for e, sha in last if e.path in again]],
                removed=(), state={"manifest": "m"})
    fresh = SqliteSearchIndex(tmp_path / "fresh.sqlite", segment_bytes=segment)
    fresh.apply(upserts=last, removed=(), state={"manifest": "m"})
    stale = "SELECT count(*) FROM fields WHERE id NOT IN (SELECT id FROM docs)"
    assert twice.db.execute(stale).fetchone()[0] == 0
    terms = sorted(terms_of(twice) | terms_of(fresh))
    assert held(twice, terms) == held(fresh, terms)
    assert any(term.startswith("sqlite") and term[-1:].isdigit() for term in terms)
    twice.close()
    fresh.close()


def answer(root: Path, cache: SqliteSearchIndex) -> dict:
    return service(root, cache).search(SearchRequest(query="auth sqlite")).to_json()


def test_the_cache_rebuilds_itself_when_missing_corrupt_or_older(tmp_path: Path) -> None:
    random_corpus(tmp_path, random.Random(7), 30)
    expected = service(tmp_path, None).search(SearchRequest(query="auth sqlite")).to_json()
    db = tmp_path / "cache/search-store.sqlite"
    with SqliteSearchIndex(db) as cache:
        assert answer(tmp_path, cache) == expected
        assert cache.count() > 0
    db.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    with SqliteSearchIndex(db) as cache:
        assert answer(tmp_path, cache) == expected
    db.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    with SqliteSearchIndex(db) as cache:
        assert answer(tmp_path, cache) == expected
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA user_version = 999")
    raw.close()
    with SqliteSearchIndex(db) as cache:
        assert answer(tmp_path, cache) == expected
        assert cache.count() > 0


@pytest.mark.parametrize("lazy_bytes", [0, 1 << 20])
def test_a_long_lived_index_answers_from_what_another_process_wrote(
        tmp_path: Path, lazy_bytes: int) -> None:
    """The viewer keeps one index open for many questions while another process archives and
    indexes chapters: each question reads the index as it is then, not the segments, dead
    documents or blobs the last question read, so it never writes again what the other
    process wrote; and between questions it holds no read transaction (a writer's log could
    not be checkpointed past it)."""
    from unittest import mock

    random_corpus(tmp_path, random.Random(5), 30, mixed=False)
    path = tmp_path / "cache/search-store.sqlite"

    def paths(svc: SearchService, query: str) -> list[str]:
        answer = svc.search(SearchRequest(query=query, project_key=PK, max_tokens=100_000))
        return [m["path"] for m in answer.to_json()["matches"]]

    with SqliteSearchIndex(path, lazy_bytes=lazy_bytes) as kept, \
            SqliteSearchIndex(path, segment_bytes=1024) as writer:
        viewer, archiver = service(tmp_path, kept), service(tmp_path, writer)
        before = paths(viewer, "retry alembic")
        rewrites = mock.patch.object(kept, "apply", wraps=kept.apply)
        for n in range(1, 4):  # archived elsewhere, indexed by the archiving process
            write(tmp_path, chapter_path("s99", n, "c"), document_text(
                title=f"zebra number {n}", body="retry alembic zebra\n" * n, project_key=PK))
            archiver.refresh(archiver.doors[0])
            assert f".dsh-chapters/s99/chapters/00{n}-c.md" in paths(archiver, "zebra")
            with rewrites as applied:
                found = paths(viewer, "retry alembic zebra")
            assert not applied.called and not kept.db.in_transaction
            assert {f".dsh-chapters/s99/chapters/00{k}-c.md" for k in range(1, n + 1)} <= set(
                found)
        assert len(paths(viewer, "retry alembic")) == len(before) + 3


def test_a_query_reads_no_chapter_but_the_ones_it_shows(tmp_path: Path) -> None:
    random_corpus(tmp_path, random.Random(3), 40)
    with SqliteSearchIndex(tmp_path / "cache/search-store.sqlite") as cache:
        svc = service(tmp_path, cache)
        svc.search(SearchRequest(query="auth"))  # builds the index and the cache
        reads: list[str] = []
        tree = svc.doors[0].tree
        original = tree.read

        def counting(path: str) -> bytes:
            reads.append(path)
            return original(path)

        tree.read = counting  # type: ignore[method-assign]
        svc.search(SearchRequest(query="sqlite deploy retry", snippets=False))
        assert [p for p in reads if "/chapters/" in p] == []
        # With snippets, a shown match's file is read to cut its anchor, and no other: the
        # answer packs lines one by one, and the one that no longer fits is cut too.
        answer = svc.search(SearchRequest(query="sqlite deploy retry"))
        read = [p for p in reads if "/chapters/" in p]
        shown = [m.entry.path for m in answer.matches if m.anchor is not None]
        assert shown and read[:len(shown)] == shown and len(read) <= len(shown) + 1


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




def test_another_passage_size_drops_the_file(tmp_path: Path) -> None:
    random_corpus(tmp_path / "store", random.Random(5), 10)
    entries = indexed_entries(tmp_path / "store")
    with SqliteSearchIndex(tmp_path / "c.sqlite", passage_lines=48) as index:
        index.apply(upserts=entries, removed=(), state={"manifest": "m"})
        assert index.count() == len(entries)
    with SqliteSearchIndex(tmp_path / "c.sqlite", passage_lines=12) as index:
        assert index.count() == 0 and index.state() == {}


# A column value now and then past 16 bits: such a column is stored 32 bits wide.
_VALUE = st.one_of(st.integers(1, 400), st.integers(65_530, 70_000))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 9), _VALUE,
                                   st.integers(0, 30)), min_size=1, max_size=24),
                min_size=1, max_size=5),
       st.sets(st.integers(0, 60), max_size=6))
def test_a_merge_joins_a_terms_blobs_as_unpacking_them_would(
        parts: list[list[tuple[int, int, int, int]]], dead: set[int]) -> None:
    """Adjacent segments hold ascending, distinct documents; a merge without dead holders joins
    the blobs from their heads, one with them drops their rows: both as `pack_rows(unpack_rows())`.
    Postings read from the blobs, merged or not, are the rows' columns, however the blob was
    packed (one row, a few, many; 16 or 32 bits)."""
    from array import array

    from dsh_chapters_fs.search_postings import (
        STARTS,
        U32,
        blob_parts,
        merge_blobs,
        pack_rows,
        read_postings,
        unpack_rows,
    )

    blobs, doc = [], 0
    for rows in parts:
        flat = array(U32)
        doc += 1  # a document is in one segment only
        for k, (passage, tf, length, mention) in enumerate(rows):
            doc += k > 0 and passage % 3 > 0  # now and then two passages of one document
            flat.extend((doc, passage, tf, length, mention))
        blobs.append(pack_rows(flat))
    _, kept = unpack_rows(blobs, frozenset(dead))
    merged = merge_blobs(blobs, frozenset(dead))
    assert merged == (pack_rows(kept) if kept else b"")
    _, everything = unpack_rows(blobs)
    for read, rows in ((read_postings(blobs), everything),
                       (read_postings([merged] if merged else []), kept)):
        if not rows:
            assert read is None
            continue
        assert read is not None
        got = (read.docs, read.passage, read.tf, read.length, read.mention)
        assert [list(c) for c in got] == [list(rows[k::5]) for k in range(5)]
        assert (read.most, read.shortest) == (max(rows[2::5]), min(rows[3::5]))
        assert list(read.holders) == list(dict.fromkeys(rows[0::5]))
    for blob in [*blobs, merged] if merged else blobs:  # where each holder's rows start
        _, parts, _ = blob_parts(blob)
        holders, starts = array(U32), array(U32)
        holders.frombytes(parts[0])
        starts.frombytes(parts[STARTS])
        docs = array(U32)
        docs.frombytes(parts[STARTS + 1])
        assert list(starts) == [list(docs).index(h) for h in holders]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 9), _VALUE,
                                   st.integers(0, 30)), min_size=1, max_size=24),
                min_size=1, max_size=5),
       st.integers(1, 300), st.randoms(use_true_random=False))
def test_a_terms_blobs_read_as_asked_read_as_the_whole(
        parts: list[list[tuple[int, int, int, int]]], per_read: int, rnd: random.Random) -> None:
    """A term read from its blobs as asked (holders and lists first, a lookup's rows from the
    blob, every row only when a walk needs them, or when lookups have read enough) reads what
    reading the blobs whole does, whatever their widths, in any order of lookups."""
    from array import array
    from unittest import mock

    import dsh_chapters_fs.search_postings as blobs_of

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE postings (seg INTEGER, term TEXT, data BLOB)")
    blobs, doc = [], 0
    for seg, rows in enumerate(parts):
        flat = array(blobs_of.U32)
        doc += 1
        for k, (passage, tf, length, mention) in enumerate(rows):
            doc += k > 0 and passage % 3 > 0
            flat.extend((doc, passage, tf, length, mention))
        blobs.append(blobs_of.pack_rows(flat))
        db.execute("INSERT INTO postings VALUES (?, 'w', ?)", (seg, blobs[-1]))
    whole = blobs_of.read_postings(blobs)
    assert whole is not None
    with mock.patch.object(blobs_of, "LOOKUPS_PER_READ", per_read):
        rowids = [r for (r,) in db.execute("SELECT rowid FROM postings")]
        asked = blobs_of.BlobPostings(db, rowids)
        assert (list(asked.holders), asked.rows, asked.most, asked.shortest) == (
            list(whole.holders), whole.rows, whole.most, whole.shortest)
        assert list(asked.parts) == list(whole.parts)
        holders = [*whole.holders, 0, doc + 1]
        rnd.shuffle(holders)
        for d in holders:
            span, lo, hi = asked.span(d), *whole.span(d)
            assert span == (lo, hi) or (span[0] == span[1] and lo == hi)  # or both empty
            base, columns = asked.rows_at(*span)
            got = [[c[r - base] for r in range(*span)] for c in columns]
            assert got == [list(c[span[0]:span[1]]) for c in
                           (whole.docs, whole.passage, whole.tf, whole.length, whole.mention)]
            base, (_, _, tf, length, _) = asked.rows_at(*span, weights=True)
            assert [[c[r - base] for r in range(*span)] for c in (tf, length)] == got[2:4]
        assert [list(c) for c in (asked.docs, asked.passage, asked.tf, asked.length,
                                  asked.mention)] == [
            list(c) for c in (whole.docs, whole.passage, whole.tf, whole.length, whole.mention)]
        asked.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 400)),
                                   min_size=1, max_size=4),
                          st.integers(1, 12), st.floats(5.0, 80.0)),
                min_size=1, max_size=5),
       st.sets(st.integers(0, 70), max_size=8), st.floats(5.0, 80.0), st.floats(5.0, 120.0),
       st.integers(1, 4), st.integers(1, 3))
def test_a_parts_list_bounds_what_the_word_adds_to_every_holder(
        segments: list[tuple[list[tuple[int, int]], int, float]], dead: set[int],
        merged_at: float, asked_at: float, holders: int, keep: int) -> None:
    """A part with enough holders keeps a list (impacts.py): written with a segment, merged
    with its neighbours (dead documents or not), at one average passage length and read at
    another, every holder of the part gets from the word at most what the list says of it, or
    its rest when it is not listed."""
    from array import array
    from unittest import mock

    from dsh_chapters_core.search import impacts
    from dsh_chapters_fs.search_postings import U32, merge_blobs, pack_rows, read_postings

    blobs, doc = [], 0
    with mock.patch.object(impacts, "HOLDERS", holders), mock.patch.object(impacts, "KEEP", keep):
        for passages, docs, at in segments:  # each document holds the word in these passages
            flat = array(U32)
            for _ in range(docs):
                doc += 1
                for k, (tf, length) in enumerate(passages):
                    flat.extend((doc, k, tf, length, 0))
            blobs.append(pack_rows(flat, at))
        merged = merge_blobs(blobs, frozenset(dead), merged_at)
        for read in (read_postings(blobs), read_postings([merged]) if merged else None):
            if read is None:
                continue
            exact = impacts.adds(read.docs, read.tf, read.length, asked_at)
            start = 0
            for rows, found in read.parts:
                part = set(read.docs[start:start + rows])
                start += rows
                if found is None:
                    assert len(part) < holders
                    continue
                factor = impacts.raised(found, asked_at)
                listed = dict(zip(found.docs, found.adds, strict=True))
                assert set(listed) <= part and len(listed) == min(keep, len(part))
                for d in part:
                    assert exact[d] <= listed.get(d, found.rest) * factor * (1 + 1e-12)


@pytest.mark.parametrize("lazy_bytes", [0, 1 << 20])
def test_a_search_over_lists_answers_as_one_without_an_index(tmp_path: Path,
                                                             lazy_bytes: int) -> None:
    """Small segments merged into bigger ones, each part of a word's postings with three
    holders or more keeping a list of two, and no term walked before the first candidates
    are scored (so the lists are taken): every answer, at every budget, is the one without an
    index, with every term's blobs read as asked (0) or whole."""
    from unittest import mock

    import dsh_chapters_fs.search_index as index
    from dsh_chapters_core.search import impacts, topk
    from dsh_chapters_fs.search_postings import blob_parts

    random_corpus(tmp_path, random.Random(11), 60, mixed=False)  # no legacy fragment: top-k
    taken = mock.patch.object(impacts, "raised", wraps=impacts.raised)
    asked = mock.patch.object(index, "BlobPostings", side_effect=index.BlobPostings)
    with mock.patch.object(impacts, "HOLDERS", 3), mock.patch.object(impacts, "KEEP", 2), \
            mock.patch.dict(topk.top_matches.__kwdefaults__, {"eager_rows": 0}), \
            taken as read_lists, asked as read_as_asked, \
            SqliteSearchIndex(tmp_path / "cache/search-store.sqlite", segment_bytes=2048,
                              lazy_bytes=lazy_bytes) as cache:
        cached, plain = service(tmp_path, cache), service(tmp_path, None)
        for query in ("auth sqlite", "retry alembic head", "migration token deploy", "sqlite"):
            for budget in (1_000_000, 400, 90):
                request = SearchRequest(query=query, project_key=PK, max_tokens=budget)
                assert outcome(cached, request) == outcome(plain, request), (query, budget)
        lists = [blob for (blob,) in cache.db.execute("SELECT data FROM postings")
                 if blob_parts(blob)[2]]
        segments = cache.db.execute("SELECT count(*) FROM segments").fetchone()[0]
        assert read_lists.called  # the answers above took lists
        assert read_as_asked.called == (lazy_bytes == 0)
    assert lists and segments > 1  # lists were written, and merged


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from([1024, 1 << 20]))
def test_an_index_seeded_from_another_equals_one_built_from_its_files(
        rnd: random.Random, segment: int) -> None:
    """The mirror door's first index takes the store's rows for the chapters the pool holds
    byte for byte (search.md "Two doors"): copied whole, renamed, the rest dropped. Then the
    pool's other files are read as always; what it holds equals an index built from the pool's
    files alone, postings, passages, fields and tallies."""
    with tempfile.TemporaryDirectory() as tmp:
        store, pool = Path(tmp) / "store", Path(tmp) / "pool"
        random_corpus(store, rnd, 14, mixed=True)
        source = SqliteSearchIndex(Path(tmp) / "store.sqlite", segment_bytes=segment)
        source.apply(upserts=indexed_entries(store), removed=(), state={"manifest": "1"})
        chapters = sorted(p.relative_to(store).as_posix() for p in store.glob("*/chapters/*"))
        # The last document written, removed: its id is retired (a dead row), and the ids the
        # seeded index gives new documents must still not reuse it.
        gone = chapters[-1]
        source.apply(upserts=(), removed=[gone], state={"manifest": "2"})
        (store / gone).unlink()
        chapters.remove(gone)
        taken: dict[str, str] = {}
        for path in chapters:
            session, _, name = path.split("/")
            twin = f"chapters/{PK}/{session}/{name}"
            data = (store / path).read_bytes()
            fate = rnd.choice(["same", "same", "changed", "absent"])
            if fate == "same":
                taken[path] = twin
            elif fate == "changed":
                data += b"\nretry the alembic head\n"
            if fate != "absent":
                write(pool, twin, data)
        write(pool, f"chapters/{PK}/s99/001-c.md", document_text(
            title="the pool's own", topics=["cache"], project_key=PK, body="pytest passed\n"))
        seeded = SqliteSearchIndex(Path(tmp) / "seeded.sqlite", segment_bytes=segment)
        assert seeded.seed_from(source, taken) == len(taken)
        assert not seeded.state() and set(seeded.shas()) == set(taken.values())
        have = dict(seeded.shas())
        seeded.apply(upserts=[(e, sha) for e, sha in indexed_entries(pool)
                              if have.get(e.path) != sha], removed=(), state={"manifest": "x"})
        fresh = SqliteSearchIndex(Path(tmp) / "fresh.sqlite", segment_bytes=segment)
        fresh.apply(upserts=indexed_entries(pool), removed=(), state={"manifest": "x"})
        terms = sorted(terms_of(seeded) | terms_of(fresh))
        assert held(seeded, terms) == held(fresh, terms)
        sessions = {path.rsplit("/", 1)[0] for path in fresh.shas()}
        assert sorted(e.path for e in seeded.fragments(sessions)) == sorted(
            e.path for e in fresh.fragments(sessions))  # legacy fragments by their session
        assert seeded.seed_from(source, taken) == 0  # only an empty index takes a seed
        other = SqliteSearchIndex(Path(tmp) / "other.sqlite", passage_lines=12)
        assert other.seed_from(source, taken) == 0  # passages cut at another size
        assert other.seed_from(MemorySearchIndex(), taken) == 0
        assert dict(source.shas()) == {p: sha for e, sha in indexed_entries(store)
                                       for p in [e.path]}  # the source is as it was
        for index in (source, seeded, fresh, other):
            index.close()
