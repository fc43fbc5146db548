"""Facts kept by a file's stat (filefacts): `chapters status` and sync read only what changed,
and what they say is what reading every file says, whatever was done to the files between
two runs."""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from pathlib import Path

import pytest
from dsh_chapters_core.documents import ChapterTally, Document
from dsh_chapters_core.errors import UnsafePathError
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_fs import store as store_module
from dsh_chapters_fs import tree as tree_module
from dsh_chapters_fs.filefacts import FileFacts, save_all, stat_key
from dsh_chapters_fs.store import FsChapterStore
from dsh_chapters_fs.tree import DirectoryTree

SIDS = ("0f7f4c7e-4a8e-4c55-9b3a-5d3e2c1b0a99", "1a2b3c4d-0000-4c55-9b3a-5d3e2c1b0a99")


def chapter_text(title: str, body: str, *, recorded: str | None = None) -> str:
    sha = recorded if recorded is not None else hashlib.sha256(body.encode()).hexdigest()
    fields = {"date": "2026-11-20T09:00:00Z", "harnessId": "box", "kind": "chapter",
              "sha256": sha, "title": title, "topics": ["auth"]}
    return dump_frontmatter(fields) + body


def facts_of(root: Path, racy_seconds: float = 0) -> FileFacts:
    """Kept whatever their age: each test waits `TICK` after reading before it changes a file,
    longer than a file system's timestamp granularity, as `RACY_SECONDS` waits in use."""
    return FileFacts(root / "cache" / "facts-store.json", root, racy_seconds=racy_seconds)


TICK = 0.03


Said = tuple[ChapterTally, list[tuple[str, str]], dict[str, str], list[Document]]


def truth(root: Path) -> Said:
    """What a store without kept facts says: every file read."""
    plain = FsChapterStore(root)
    tree = DirectoryTree(root)
    digests = {p: tree.digest(p) for p in plain.chapter_paths()}
    return plain.chapter_tally(), plain.quarantined(), digests, list(plain.documents())


def told(root: Path, facts: FileFacts) -> Said:
    """The same from kept facts (the parsed documents kept beside the judged facts here; the
    App keeps them in a file of their own)."""
    kept = FsChapterStore(root, facts=facts, document_facts=facts)
    tree = DirectoryTree(root, facts=facts)
    digests = {p: tree.digest(p) for p in kept.chapter_paths()}
    return kept.chapter_tally(), kept.quarantined(), digests, list(kept.documents())


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real_read, real_digest = store_module.read_contained, tree_module.digest_contained

    def read(root: str, relpath: str, limit: int | None = None) -> bytes:
        reads.append(relpath)
        return real_read(root, relpath, limit)

    def digest(root: str, relpath: str) -> str:
        reads.append(relpath)
        return real_digest(root, relpath)

    monkeypatch.setattr(store_module, "read_contained", read)
    monkeypatch.setattr(tree_module, "digest_contained", digest)
    return reads


def test_a_second_run_reads_only_the_file_that_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / ".dsh-chapters"
    store = FsChapterStore(root)
    for n in range(1, 6):
        store.write_chapter(SIDS[0], n, f"c{n}", chapter_text(f"c{n}", f"body {n}\n"))
    store.write_chapter(SIDS[1], 1, "bad", "---\ndate: 2026-13-45\n---\nbody\n")
    first = told(root, facts_of(root))
    assert first == truth(root)
    save_all()  # what the process does as it ends
    assert (root / "cache" / "facts-store.json").is_file()

    reads = count_reads(monkeypatch)
    again = facts_of(root)
    assert told(root, again) == first
    assert reads == []  # nothing read: every stat unchanged

    target = root / SIDS[0] / "chapters" / "003-c3.md"
    time.sleep(TICK)
    text = target.read_text()
    target.write_text(text.replace("body 3", "BODY 3"))  # modified since archived
    said = told(root, again)
    assert sorted(set(reads)) == [f"{SIDS[0]}/chapters/003-c3.md"]
    assert said == truth(root)
    assert said[0] == ChapterTally(chapters=6, modified=1)


def test_a_file_rewritten_in_place_with_its_old_times_is_read_again(tmp_path: Path) -> None:
    """Same size, the modification time set back: the change time, which no program can set,
    tells the file changed."""
    root = tmp_path / ".dsh-chapters"
    store = FsChapterStore(root)
    path = Path(store.root) / store.write_chapter(SIDS[0], 1, "a", chapter_text("a", "aaaa\n"))
    facts = facts_of(root)
    before = told(root, facts)
    st = os.stat(path)
    time.sleep(TICK)
    path.write_text(path.read_text().replace("aaaa", "bbbb"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    after = told(root, facts)
    assert after == truth(root) and after != before
    assert after[0].modified == 1


def test_a_file_changed_in_the_last_seconds_is_never_kept(tmp_path: Path) -> None:
    root = tmp_path / ".dsh-chapters"
    store = FsChapterStore(root)
    store.write_chapter(SIDS[0], 1, "a", chapter_text("a", "fresh\n"))
    facts = facts_of(root, racy_seconds=60)
    told(root, facts)
    facts.save()
    assert not (root / "cache" / "facts-store.json").exists()  # nothing learned that lasts


def test_a_symlink_in_place_of_a_read_chapter_is_refused(tmp_path: Path) -> None:
    root = tmp_path / ".dsh-chapters"
    store = FsChapterStore(root)
    rel = store.write_chapter(SIDS[0], 1, "a", chapter_text("a", "body\n"))
    facts = facts_of(root)
    tree = DirectoryTree(root, facts=facts)
    tree.digest(rel)
    secret = tmp_path / "secret.md"
    secret.write_text("not the store's\n")
    (root / rel).unlink()
    os.symlink(secret, root / rel)
    with pytest.raises(UnsafePathError):
        tree.digest(rel)
    kept = FsChapterStore(root, facts=facts)
    assert (rel, "is a symlink") in kept.quarantined()
    assert kept.chapter_tally().chapters == 0  # listed by neither, as without kept facts


def test_a_damaged_or_older_facts_file_is_read_past(tmp_path: Path) -> None:
    root = tmp_path / ".dsh-chapters"
    store = FsChapterStore(root)
    store.write_chapter(SIDS[0], 1, "a", chapter_text("a", "body\n"))
    (root / "cache").mkdir()
    rel = f"{SIDS[0]}/chapters/001-a.md"
    key = stat_key(os.stat(root / rel))
    for damaged in (b"{not json", b'{"format": 0, "files": {}}', b"[]",
                    json.dumps({"format": 1, "files": {rel: ["0:0:0:0:0", "x"]}}).encode(),
                    json.dumps({"format": 1, "files": {rel: [key, {
                        "sha256": 5, "problem": 7, "kind": None, "modified": "no"}]}}).encode(),
                    json.dumps({"format": 1, "files": {rel: [key, {
                        "document1": {"path": rel, "kind": "chapter"}}]}}).encode(),
                    json.dumps({"format": 1, "files": {rel: [key, {
                        "document1": {"path": rel, "kind": "scroll", "topics": 3}}]}}).encode()):
        (root / "cache" / "facts-store.json").write_bytes(damaged)
        assert told(root, facts_of(root)) == truth(root)


def test_facts_of_a_deleted_file_go_and_a_deleted_store_is_not_made_again(
        tmp_path: Path) -> None:
    root = tmp_path / ".dsh-chapters"
    store = FsChapterStore(root)
    a = store.write_chapter(SIDS[0], 1, "a", chapter_text("a", "a\n"))
    b = store.write_chapter(SIDS[0], 2, "b", chapter_text("b", "b\n"))
    facts = facts_of(root)
    told(root, facts)
    facts.save()
    (root / b).unlink()
    later = facts_of(root)
    DirectoryTree(root, facts=later).digest(a)  # this run asks about one file
    later.put(a, os.stat(root / a), {"seen": True})  # and learns something of it
    later.save()
    kept = json.loads((root / "cache" / "facts-store.json").read_bytes())["files"]
    assert sorted(kept) == [a]  # b's facts went with b; a path that is not there is not kept

    gone = facts_of(root)
    gone.put(a, os.stat(root / a), {"sha256": "1" * 64})
    for path in sorted(root.rglob("*"), reverse=True):
        path.unlink() if not path.is_dir() else path.rmdir()
    root.rmdir()
    gone.save()
    assert not root.exists()


def test_kept_facts_say_what_reading_every_file_says(tmp_path: Path) -> None:
    """Random edits between runs (bodies changed, frontmatter broken and mended, files
    replaced, removed, added, times set back), each run with the facts the last one kept:
    the tally, the quarantine and every digest equal a store read whole."""
    rng = random.Random(20261207)
    root = tmp_path / ".dsh-chapters"
    store = FsChapterStore(root)
    numbers = {sid: 0 for sid in SIDS}
    for _ in range(8):
        sid = rng.choice(SIDS)
        numbers[sid] += 1
        store.write_chapter(sid, numbers[sid], f"c{numbers[sid]}",
                            chapter_text("t", f"body {rng.random()}\n"))
    quarantined = modified = 0
    for _round in range(25):
        facts = facts_of(root)
        said = told(root, facts)
        assert said == truth(root)
        quarantined += bool(said[1])
        modified += said[0].modified
        facts.save()
        time.sleep(TICK)
        paths = FsChapterStore(root).chapter_paths()
        for _ in range(rng.randint(1, 3)):
            path = root / rng.choice(paths)
            if not path.exists():
                continue
            st = path.stat()
            action = rng.choice(("body", "break", "mend", "replace", "remove", "add", "rule"))
            if action == "body":
                text = path.read_text()
                path.write_text(text[:-2] + rng.choice("xyz") + "\n")  # same size, new bytes
            elif action == "break":
                path.write_text("---\ndate: 2026-13-45\n---\nbody\n")
            elif action == "mend":
                path.write_text(chapter_text("mended", "ok\n"))
            elif action == "replace":
                path.with_suffix(".tmp").write_text(chapter_text("new", "new body\n"))
                os.replace(path.with_suffix(".tmp"), path)
            elif action == "remove":
                path.unlink()
            elif action == "add":
                sid = rng.choice(SIDS)
                numbers[sid] += 1
                store.write_chapter(sid, numbers[sid], f"c{numbers[sid]}",
                                    chapter_text("t", "b\n", recorded="0" * 64))
            else:
                path.write_text(chapter_text("r", "b\n").replace('"chapter"', '"rule"'))
            if path.exists() and rng.random() < 0.5:
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # times set back
    assert told(root, facts_of(root)) == truth(root)
    assert quarantined and modified  # the rounds met both kinds of damage


def test_a_long_running_process_keeps_one_waiting_facts_object_a_file(tmp_path: Path) -> None:
    """The MCP server composes an App per request: each older FileFacts of the same file is
    written as the newer one starts learning, so memory stays one object a file."""
    root = tmp_path / ".dsh-chapters"
    store = FsChapterStore(root)
    a = store.write_chapter(SIDS[0], 1, "a", chapter_text("a", "a\n"))
    b = store.write_chapter(SIDS[0], 2, "b", chapter_text("b", "b\n"))
    first, second = facts_of(root), facts_of(root)
    first.put(a, os.stat(root / a), {"sha256": "1" * 64})
    assert not first.path.exists()  # waits for the exit
    second.put(b, os.stat(root / b), {"sha256": "2" * 64})
    kept = json.loads(first.path.read_bytes())["files"]
    assert sorted(kept) == [a]  # the first was written as the second took its place
    save_all()
    kept = json.loads(first.path.read_bytes())["files"]
    assert {k: v[1]["sha256"][0] for k, v in kept.items()} == {a: "1", b: "2"}
