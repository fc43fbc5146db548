"""Layer 2 (§10.2): shards and manifest, O(delta) updates, byte-identical rebuilds, repair."""

from __future__ import annotations

import hashlib
import json

import pytest
from dsh_chapters_core.curation import FactType, make_fact
from dsh_chapters_core.search.index import (
    MANIFEST_PATH,
    MANIFEST_VERSION,
    DoorLayout,
    IndexManifest,
    IndexRecord,
    fingerprint_chunks,
    load_manifest,
    manifest_key,
    patch_shard,
    render_shard,
    shard_member_paths,
    update_index,
)
from dsh_chapters_core.testing.fakes_search import (
    CoreFrontmatterReader,
    MemoryDerivedTree,
    chapter_path,
    document_text,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

READER = CoreFrontmatterReader()
STORE = DoorLayout.STORE


def derived(tree: MemoryDerivedTree) -> dict[str, bytes]:
    return {p: b for p, b in tree.files.items() if p.startswith(("index/", "topics/"))}


def rebuilt_copy(tree: MemoryDerivedTree) -> dict[str, bytes]:
    """A full rebuild from the primaries alone (no derived file, no fingerprints)."""
    fresh = MemoryDerivedTree(files={p: b for p, b in tree.files.items()
                                     if not p.startswith(("index/", "topics/"))})
    update_index(fresh, layout=STORE, reader=READER, rebuild=True)
    return derived(fresh)


def sample_tree() -> MemoryDerivedTree:
    return MemoryDerivedTree(files={
        chapter_path("s1", 1, "jwt"): document_text(
            title="JWT refresh | middleware", topics=["Auth", "jwt"], date="2026-09-17T10:00:00Z"),
        chapter_path("s1", 2, "login"): document_text(
            title="Login page", topics=["auth"], date="2026-08-01T09:00:00Z"),
        "rules/h1/001-security-tokens.md": document_text(
            title="Never log tokens", kind="rule", category="security", topics=["auth"],
            date="2026-09-01T00:00:00Z"),
        "s1/collections.jsonl": b"{}\n",
        "artifacts/ab/" + "ab" * 32 + ".txt": b"blob",
    })


def test_golden_shard_and_manifest() -> None:
    tree = sample_tree()
    update = update_index(tree, layout=STORE, reader=READER)
    assert update.rebuilt and update.shard_count == 2
    assert tree.files["index/auth.md"].decode() == (
        "# topic: auth · count: 3 · last-updated: 2026-09-17\n"
        "2026-09-01 | Never log tokens | rules/h1/001-security-tokens.md | (rule) | 2w\n"
        "2026-09-17 | JWT refresh | middleware | s1/chapters/001-jwt.md | (chapter) | 0d\n"
        "2026-08-01 | Login page | s1/chapters/002-login.md | (chapter) | 6w\n"
    )
    assert shard_member_paths(tree.files["index/auth.md"]) == [
        "rules/h1/001-security-tokens.md", "s1/chapters/001-jwt.md", "s1/chapters/002-login.md"]
    manifest = json.loads(tree.files[MANIFEST_PATH])
    assert sorted(manifest["inputs"]) == ["rules/h1/001-security-tokens.md",
                                          "s1/chapters/001-jwt.md", "s1/chapters/002-login.md"]
    assert manifest["inputs"]["s1/chapters/001-jwt.md"]["topics"] == ["auth", "jwt"]
    assert sorted(manifest["shards"]) == ["index/auth.md", "index/jwt.md"]
    assert manifest_key(tree) == manifest["key"] == update.manifest.key
    assert tree.files[MANIFEST_PATH].splitlines()[1].startswith(b'"key": "')
    assert json.loads(tree.files["topics/vocabulary.json"]) == {
        "aliases": {}, "canonical": {}, "version": 1}


def test_an_update_reads_only_the_delta() -> None:
    tree = sample_tree()
    first = update_index(tree, layout=STORE, reader=READER)
    tree.write(chapter_path("s2", 1, "cache"),
               document_text(title="Cache", topics=["cache"], date="2026-09-20"))
    tree.reads.clear()
    second = update_index(tree, layout=STORE, reader=READER, fingerprints=first.fingerprints)
    documents_read = [p for p in tree.reads if not p.startswith(("index/", "edits/"))]
    assert documents_read == ["s2/chapters/001-cache.md"]
    assert second.added == ("s2/chapters/001-cache.md",)
    assert second.shards_written == ("index/cache.md",)
    assert derived(tree) == rebuilt_copy(tree)


def test_a_known_delta_skips_the_listing() -> None:
    tree = sample_tree()
    first = update_index(tree, layout=STORE, reader=READER)
    path = chapter_path("s1", 3, "more")
    tree.write(path, document_text(title="More", topics=["jwt"], date="2026-09-21"))
    tree.remove(chapter_path("s1", 2, "login"))
    update = update_index(tree, layout=STORE, reader=READER, fingerprints=first.fingerprints,
                          changed=[path, chapter_path("s1", 2, "login")])
    assert (update.added, update.removed) == ((path,), ("s1/chapters/002-login.md",))
    assert derived(tree) == rebuilt_copy(tree)


def test_a_divergent_shard_is_rebuilt_never_merged() -> None:
    tree = sample_tree()
    first = update_index(tree, layout=STORE, reader=READER)
    good = tree.files["index/jwt.md"]
    tree.write("index/jwt.md", good + b"2026-01-01 | hand edit | x.md | (chapter) | 0d\n")
    tree.write("index/stray.md", b"# topic: stray\n")
    update = update_index(tree, layout=STORE, reader=READER, fingerprints=first.fingerprints)
    assert update.divergent == ("index/jwt.md", "index/stray.md")
    assert tree.files["index/jwt.md"] == good and "index/stray.md" not in tree.files


def test_a_lost_manifest_means_a_rebuild_with_the_same_bytes() -> None:
    tree = sample_tree()
    update_index(tree, layout=STORE, reader=READER)
    before = derived(tree)
    tree.remove(MANIFEST_PATH)
    update = update_index(tree, layout=STORE, reader=READER)
    assert update.rebuilt and derived(tree) == before
    tree.write(MANIFEST_PATH, b"{ not json")
    assert load_manifest(tree) is None
    update_index(tree, layout=STORE, reader=READER)
    assert derived(tree) == before


def test_unreadable_documents_and_malformed_facts_are_counted_not_fatal() -> None:
    tree = sample_tree()
    tree.write(chapter_path("s3", 1, "bad"), b"---\nkind: \"nonsense\"\n---\nbody")
    tree.write("edits/h1/curation.jsonl", b'{"type":"topic-alias","from":"jwt","to":"tokens"}\n'
                                          b"not json\n")
    update = update_index(tree, layout=STORE, reader=READER)
    assert update.skipped == ("s3/chapters/001-bad.md",)
    assert update.curation.log.malformed == 1
    assert "index/tokens.md" in tree.files and "index/jwt.md" not in tree.files
    tree.reads.clear()
    update_index(tree, layout=STORE, reader=READER, fingerprints=update.fingerprints)
    assert "s3/chapters/001-bad.md" not in tree.reads  # skipped once, not re-read


def test_curation_facts_reshape_the_shards() -> None:
    tree = sample_tree()
    first = update_index(tree, layout=STORE, reader=READER)
    facts = [make_fact(FactType.TOPIC_ALIAS, at="2026-09-30", **{"from": "jwt", "to": "auth"}),
             make_fact(FactType.TOPIC_PIN, topic="pinned", path="s1/chapters/002-login.md")]
    tree.write("edits/h2/curation.jsonl", "".join(f.to_line() + "\n" for f in facts).encode())
    update_index(tree, layout=STORE, reader=READER, fingerprints=first.fingerprints)
    assert sorted(p for p in tree.files if p.startswith("index/")) == [
        "index/auth.md", "index/manifest.json", "index/pinned.md"]
    assert json.loads(tree.files["topics/vocabulary.json"])["aliases"] == {"jwt": "auth"}
    assert derived(tree) == rebuilt_copy(tree)


def test_the_mirror_layout_takes_the_project_from_the_path() -> None:
    tree = MemoryDerivedTree(files={
        "chapters/pk1/s1/001-a.md": document_text(title="A", topics=["auth"], date="2026-01-01"),
        "chapters/pk2/s9/001-b.md": document_text(title="B", topics=["auth"], date="2026-01-02"),
        "rules/pk1/h1/001-testing-x.md": document_text(title="R", kind="rule", topics=["auth"]),
        "index/manifest.json": b"",
        "project.yml": b"projectKey: pk1\n",
    })
    update = update_index(tree, layout=DoorLayout.MIRROR, reader=READER)
    assert {r.path: r.project for r in update.manifest.inputs.values()} == {
        "chapters/pk1/s1/001-a.md": "pk1", "chapters/pk2/s9/001-b.md": "pk2",
        "rules/pk1/h1/001-testing-x.md": "pk1"}


# -- the property: incremental equals full rebuild, byte for byte --------------------------------

TOPICS = ["auth", "Auth", "jwt", "cache", "caches", "deploy", "tests", "db-migrations"]

op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 3), st.lists(st.sampled_from(TOPICS), max_size=4),
              st.integers(1, 28), st.text(min_size=0, max_size=12)),
    st.tuples(st.just("enrich"), st.integers(0, 30), st.lists(st.sampled_from(TOPICS), max_size=4)),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("alias"), st.sampled_from(TOPICS), st.sampled_from(TOPICS)),
    st.tuples(st.just("pin"), st.sampled_from(TOPICS), st.integers(0, 30)),
    st.tuples(st.just("tamper"), st.integers(0, 10)),
    st.tuples(st.just("garbage"),),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=14), st.booleans())
def test_incremental_equals_full_rebuild_byte_for_byte(ops: list[tuple], known_delta: bool) -> None:
    tree = MemoryDerivedTree()
    tokens: dict[str, str] = {}
    counter = [0] * 4
    facts = 0
    for step in ops:
        chapters = sorted(p for p in tree.files if "/chapters/" in p)
        touched: list[str] = []
        if step[0] == "add":
            _, session, topics, day, title = step
            counter[session] += 1
            path = chapter_path(f"s{session}", counter[session], "c")
            tree.write(path, document_text(title=title or "t", topics=topics,
                                           date=f"2026-02-{day:02d}T00:00:00Z"))
            touched.append(path)
        elif step[0] == "enrich" and chapters:
            path = chapters[step[1] % len(chapters)]
            tree.write(path, document_text(title="enriched", topics=step[2], date="2026-03-01"))
            touched.append(path)
        elif step[0] == "remove" and chapters:
            path = chapters[step[1] % len(chapters)]
            tree.remove(path)
            touched.append(path)
        elif step[0] in ("alias", "pin"):
            facts += 1
            fact = (make_fact(FactType.TOPIC_ALIAS, at=f"2026-04-{facts:02d}",
                              **{"from": step[1], "to": step[2]}) if step[0] == "alias" else
                    make_fact(FactType.TOPIC_PIN, topic=step[1],
                              path=chapters[step[2] % len(chapters)] if chapters else "x.md"))
            old = tree.files.get("edits/h1/curation.jsonl", b"")
            tree.write("edits/h1/curation.jsonl", old + (fact.to_line() + "\n").encode())
        elif step[0] == "tamper":
            shards = sorted(p for p in tree.files if p.startswith("index/") and p.endswith(".md"))
            if shards:
                target = shards[step[1] % len(shards)]
                tree.write(target, tree.files[target] + b"tampered\n")
        elif step[0] == "garbage":
            tree.write("index/zz-stray.md", b"stray\n")
        changed = touched if known_delta and step[0] in ("add", "enrich", "remove") else None
        update = update_index(tree, layout=STORE, reader=READER, fingerprints=tokens,
                              changed=changed)
        tokens = dict(update.fingerprints)
        assert derived(tree) == rebuilt_copy(tree)


def whole_body(manifest: IndexManifest) -> str:
    """The manifest's text made the way it was before it was streamed: one joined string."""
    parts = [f'"curation": {json.dumps(manifest.curation)},',
             f'"documents": {manifest.documents},',
             f'"edits": {json.dumps(dict(manifest.edits), sort_keys=True)},',
             '"inputs": {', manifest.inputs_text.decode("utf-8"), "},", '"shards": {',
             ",\n".join(f"{json.dumps(p, ensure_ascii=False)}: {json.dumps(s)}"
                        for p, s in sorted(manifest.shards.items())),
             "},", f'"version": {MANIFEST_VERSION}']
    return "\n".join(part for part in parts if part) + "\n"


@pytest.mark.parametrize("count", [0, 1, 2000, 4001])
def test_the_streamed_manifest_is_the_text_it_replaced(count: int) -> None:
    # Counts around the chunk size: the joints between chunks must fall where the commas were.
    records = {
        f"s{i % 7}/chapters/{i:04d}-é.md": IndexRecord(
            path=f"s{i % 7}/chapters/{i:04d}-é.md", sha256=f"{i:064x}",
            kind="" if i % 11 == 3 else "chapter", title=f"Title {i} — ünïcode \"quoted\"",
            date="2026-09-17T10:00:00Z", project="p1", topics=("auth", "jwt"))
        for i in range(count)}
    shards = {"index/auth.md": "a" * 64, "index/jwt-é.md": "b" * 64} if count else {}
    manifest = IndexManifest.of(dict(records), edits=(("h1", "c" * 64),), shards=shards,
                                curation="d" * 64)
    body = whole_body(manifest)
    assert manifest.key == hashlib.sha256(body.encode("utf-8")).hexdigest()
    assert manifest.dump() == f'{{\n"key": "{manifest.key}",\n{body}}}\n'.encode()
    tree = MemoryDerivedTree()
    tree.write_chunks(MANIFEST_PATH, manifest.dump_chunks())
    loaded = load_manifest(tree)
    assert loaded == manifest
    assert loaded is not None and loaded.inputs == records
    assert [r.path for r in loaded.records()] == sorted(records)
    assert json.loads(tree.files[MANIFEST_PATH])["documents"] == sum(
        1 for r in records.values() if not r.skipped)


def test_making_the_manifest_lets_go_of_the_records() -> None:
    records = {"a.md": IndexRecord("a.md", "0" * 64, "chapter"), "b.md": IndexRecord("b.md", "")}
    manifest = IndexManifest.of(records, edits=(), shards={}, curation="")
    assert records == {} and [r.path for r in manifest.records()] == ["a.md", "b.md"]
    assert manifest.documents == 1


@pytest.mark.parametrize("count", [0, 1, 5000, 12001])
def test_change_tokens_stream_as_the_json_they_replaced(count: int) -> None:
    tokens = {f"s{i}/chapters/{i:03d}-ü\".md": f"{i}:{i * 7919}" for i in reversed(range(count))}
    expected = json.dumps(tokens, sort_keys=True, separators=(",", ":")).encode("utf-8")
    assert b"".join(fingerprint_chunks(tokens)) == expected


_shard_record = st.builds(
    lambda n, title, date, kind: IndexRecord(f"s{n % 3}/chapters/{n:03d}-x.md", "", kind,
                                             title, date),
    st.integers(0, 40),
    st.text(st.sampled_from("ab |-é·"), max_size=8).map(lambda t: " ".join(t.split())),
    st.one_of(st.just(""), st.just("not a date"), st.dates().map(lambda d: d.isoformat()),
              st.datetimes().map(lambda d: d.isoformat() + "Z")),
    st.sampled_from(["chapter", "rule", "plan"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_shard_record, max_size=12, unique_by=lambda r: r.path),
       st.lists(_shard_record, max_size=6, unique_by=lambda r: r.path),
       st.sets(st.integers(0, 40), max_size=8))
def test_a_patched_shard_is_the_shard_rendered_from_its_rows(
        before: list[IndexRecord], added: list[IndexRecord], dropped: set[int]) -> None:
    """The delta path patches a shard as text; it must give render_shard's bytes exactly:
    the rows kept, the rows dropped or replaced, every recency hint and the header."""
    if not before:
        return
    drop = {f"s{n % 3}/chapters/{n:03d}-x.md" for n in dropped} | {r.path for r in added}
    rows = {r.path: r for r in before if r.path not in drop}
    rows.update((r.path, r) for r in added)
    patched = patch_shard("retry", render_shard("retry", before), drop, added)
    assert patched == (render_shard("retry", rows.values()) if rows else None)


_manifest_path = st.builds(lambda s, n, name: f"s{s}/chapters/{n:03d}-{name}.md",
                           st.integers(0, 3), st.integers(0, 30),
                           st.text(st.sampled_from("aé\"\\: ,}"), min_size=1, max_size=4))


def _manifest_record(path: str, version: int) -> IndexRecord:
    kind = "" if version % 5 == 4 else "chapter"  # now and then a file that did not parse
    return IndexRecord(path, f"{version:064x}", kind, f"Title, {version}: \"é\"",
                       "2026-09-17T10:00:00Z", "p1", ("auth",) if version % 2 else ())


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_manifest_path, st.integers(0, 99), max_size=14),
       st.dictionaries(_manifest_path, st.one_of(st.none(), st.integers(0, 99)), max_size=8))
def test_a_patched_manifest_is_the_manifest_made_from_its_records(
        before: dict[str, int], changes: dict[str, int | None]) -> None:
    """The delta path splices the manifest's bytes by binary search; it must equal the
    manifest made from the resulting records, byte for byte, and `find` must agree with a
    sorted list (paths with quotes, commas, colons and braces included)."""
    records = {p: _manifest_record(p, v) for p, v in before.items()}
    prior = IndexManifest.of(dict(records), edits=(), shards={"index/auth.md": "a" * 64},
                             curation="c" * 64)
    ordered = sorted(records)
    for path in sorted({*records, *changes}):
        at, found = prior.find(path)
        assert found == records.get(path)
        # `at` is where the line starts: the bytes before it hold exactly the smaller paths
        at_end = at == len(prior.inputs_text) and at > 0  # no separator after the last line
        assert prior.inputs_text[:at].count(b"\n") + at_end == sum(
            1 for p in ordered if p < path)
        if found is not None:
            assert prior.record_at(at) == found
    after = dict(records)
    for path, version in changes.items():
        if version is None:
            after.pop(path, None)
        else:
            after[path] = _manifest_record(path, version)
    documents = sum(1 for r in after.values() if not r.skipped)
    patched = prior.patched({p: None if v is None else _manifest_record(p, v)
                             for p, v in changes.items()},
                            edits=(), shards={"index/auth.md": "a" * 64}, documents=documents)
    made = IndexManifest.of(dict(after), edits=(), shards={"index/auth.md": "a" * 64},
                            curation="c" * 64)
    assert patched.dump() == made.dump() and patched.key == made.key
    assert patched.count == len(after)
    assert [(at, r) for at, r in patched.located_records()] == [
        (patched.find(p)[0], after[p]) for p in sorted(after)]
    tree = MemoryDerivedTree()
    tree.write_chunks(MANIFEST_PATH, patched.dump_chunks())
    assert load_manifest(tree) == patched == load_manifest(tree, trusted=True)


def test_a_manifest_whose_bytes_disagree_with_its_key_is_not_loaded_unless_trusted() -> None:
    records = {"s0/chapters/001-a.md": _manifest_record("s0/chapters/001-a.md", 1)}
    manifest = IndexManifest.of(records, edits=(), shards={}, curation="")
    tree = MemoryDerivedTree()
    tree.write(MANIFEST_PATH, manifest.dump().replace(b"Title, 1", b"Title, 2"))
    assert load_manifest(tree) is None  # hand-edited: the update rebuilds
    loaded = load_manifest(tree, trusted=True)  # our own write, by its token: not re-hashed
    assert loaded is not None and loaded.record_at(0).title.startswith("Title, 2")
