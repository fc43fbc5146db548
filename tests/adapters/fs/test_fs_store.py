"""The filesystem store on real files: layout, append-only numbering, artifacts, documents."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.ports.store import ChapterStore, FileTree
from dsh_chapters_fs.lock import FileWriterLock
from dsh_chapters_fs.store import FsChapterStore
from dsh_chapters_fs.tree import DirectoryTree

SID = "5f0c2a9e-8d3b-4e61-9a7c-2b1d4e6f8a10"
META = {"harnessId": "laptop", "harness": "claude-code", "projectKey": "pk-1", "source": "/x.jsonl"}


def chapter_text(body: str = "## Turn\n\nhello\n", **fields: object) -> str:
    fm = {"title": "Fix the refresh", "kind": "chapter", "sessionId": SID, "seqRange": [1, 9],
          "messages": {"user": 1, "assistant": 2}, "topics": ["auth", "jwt"],
          "date": "2026-09-17T10:00:00Z", "projectKey": "pk-1", "harnessId": "laptop",
          "sha256": hashlib.sha256(body.encode()).hexdigest(), "tokens": 12, **fields}
    return dump_frontmatter(fm) + body


@pytest.fixture
def store(tmp_path: Path) -> FsChapterStore:
    return FsChapterStore(tmp_path / ".dsh-chapters")


def test_it_satisfies_the_ports(store: FsChapterStore, tmp_path: Path) -> None:
    chapter_store: ChapterStore = store
    tree: FileTree = DirectoryTree(tmp_path)
    assert chapter_store.root.endswith(".dsh-chapters") and tree.root == str(tmp_path)


def test_layout_of_a_session(store: FsChapterStore) -> None:
    store.record_session(SID, SID, META)
    number = store.reserve_chapter_number(SID)
    path = store.write_chapter(SID, number, "fix-the-refresh", chapter_text())
    store.append_signatures(SID, ('{"seqs":[1,2,3],"paths":[]}',))
    store.set_watermark(SID, 9)
    root = Path(store.root)
    assert path == f"{SID}/chapters/001-fix-the-refresh.md"
    assert (root / path).read_text() == chapter_text()
    record = json.loads((root / SID / "session.json").read_text())
    assert record == {**META, "sessionId": SID, "watermark": 9}
    assert (root / SID / "collections.jsonl").read_text() == '{"seqs":[1,2,3],"paths":[]}\n'
    assert store.watermark(SID) == 9
    assert store.session_meta()[SID]["harnessId"] == "laptop"


def test_a_fork_keeps_its_own_watermark_under_the_root(store: FsChapterStore) -> None:
    store.record_session(SID, SID, META)
    store.record_session(SID, "agent-a4c1e2f", META)
    store.set_watermark(SID, 40)
    store.set_watermark("agent-a4c1e2f", 6)
    assert (Path(store.root) / SID / "sessions" / "agent-a4c1e2f.json").is_file()
    fresh = FsChapterStore(store.root)  # a new process sees the same records
    assert fresh.watermark(SID) == 40 and fresh.watermark("agent-a4c1e2f") == 6
    assert fresh.watermark("never-seen") == -1
    assert fresh.session_meta()["agent-a4c1e2f"]["rootSessionId"] == SID


def test_numbers_are_never_reused_even_after_a_lost_write(store: FsChapterStore) -> None:
    first = store.reserve_chapter_number(SID)
    lost = store.reserve_chapter_number(SID)  # the writer died before writing it
    third = FsChapterStore(store.root).reserve_chapter_number(SID)
    assert (first, lost, third) == (1, 2, 3)
    store.write_chapter(SID, third, "kept", chapter_text())
    assert store.chapter_numbers(SID) == [3]
    # the reservation file lost (state/ wiped): the chapters on disk still forbid reuse
    for f in (Path(store.root) / "state" / "reservations").iterdir():
        f.unlink()
    assert store.reserve_chapter_number(SID) == 4


def test_an_archive_reserves_its_numbers_at_once(store: FsChapterStore) -> None:
    """One reservation for a run's chapters: the next run starts after all of them, written
    or not (a run killed after its first chapter leaves the rest a gap)."""
    assert store.reserve_chapter_number(SID, 3) == 1
    store.write_chapter(SID, 1, "first", chapter_text())  # 2 and 3 were never written
    assert FsChapterStore(store.root).reserve_chapter_number(SID, 2) == 4
    assert store.reserve_chapter_number(SID) == 6
    reservation = json.loads(next((Path(store.root) / "state" / "reservations").iterdir())
                             .read_text())
    assert reservation == {"last": 6, "sessionId": SID}


def test_a_chapter_is_never_overwritten(store: FsChapterStore) -> None:
    store.write_chapter(SID, 1, "first", chapter_text())
    with pytest.raises(ChaptersError, match="already exists"):
        store.write_chapter(SID, 1, "first", "other text")
    with pytest.raises(ChaptersError, match="already exists"):
        store.write_chapter(SID, 1, "another-slug", "other text")
    assert (Path(store.root) / SID / "chapters" / "001-first.md").read_text() == chapter_text()


def test_bad_names_are_refused(store: FsChapterStore) -> None:
    for bad in ("artifacts", "state", "../up", ".hidden", "a/b"):
        with pytest.raises(ChaptersError, match="cannot name a store directory"):
            store.reserve_chapter_number(bad)
    with pytest.raises(ChaptersError, match="slug"):
        store.write_chapter(SID, 1, "Not A Slug", "x")
    with pytest.raises(ChaptersError, match="not in the store"):
        store.read_text("nope.md")
    with pytest.raises(ChaptersError, match="plain relative path"):
        store.read_text("../outside")


def test_artifacts_are_content_addressed(store: FsChapterStore) -> None:
    text = "line\n" * 1000
    sha = hashlib.sha256(text.encode()).hexdigest()
    assert not store.has_artifact(sha)
    assert store.write_artifacts([(sha, text)]) == 1
    path = Path(store.root) / f"artifacts/{sha[:2]}/{sha}.txt"
    assert store.artifact_path(sha) == f"artifacts/{sha[:2]}/{sha}.txt"
    assert store.has_artifact(sha) and store.artifact_count() == 1
    mtime = path.stat().st_mtime_ns
    others = [f"other {i}\n" * 50 for i in range(5)]
    batch = [(hashlib.sha256(t.encode()).hexdigest(), t) for t in others]
    # one already there, one asked twice: the four others and the new one are written once
    assert store.write_artifacts([(sha, text), *batch, batch[0]]) == 5
    assert path.stat().st_mtime_ns == mtime  # not rewritten
    assert store.artifact_count() == 6
    for digest, body in batch:
        assert (Path(store.root) / store.artifact_path(digest)).read_text() == body
    with pytest.raises(ChaptersError, match="hashes to"):
        store.write_artifacts([("0" * 64, text)])
    with pytest.raises(ChaptersError, match="sha256"):
        store.write_artifacts([("not-a-sha", text)])
    assert store.artifact_count() == 6


def test_signatures_append_and_skip_turns_already_recorded(store: FsChapterStore) -> None:
    store.append_signatures(SID, ('{"seqs":[1,2],"at":"t1"}', '{"seqs":[3,4],"at":"t1"}'))
    before = (Path(store.root) / SID / "collections.jsonl").read_bytes()
    store.append_signatures(SID, ('{"seqs":[3,4],"at":"t2"}', '{"seqs":[5,6],"at":"t2"}'))
    after = (Path(store.root) / SID / "collections.jsonl").read_bytes()
    assert after.startswith(before)
    assert after.decode().splitlines()[2] == '{"seqs":[5,6],"at":"t2"}'
    assert len(after.decode().splitlines()) == 3


def test_documents_parse_frontmatter_and_hash_the_body(store: FsChapterStore) -> None:
    store.write_chapter(SID, 1, "fix-the-refresh", chapter_text())
    tampered = chapter_text(body="## Turn\n\nhello\n").replace("hello", "edited by hand")
    store.write_chapter(SID, 2, "tampered", tampered)
    store.write_chapter(SID, 3, "broken", "---\ntitle: [unclosed\n---\nbody\n")
    rule_dir = Path(store.root) / "rules" / "laptop"
    rule_dir.mkdir(parents=True)
    (rule_dir / "001-testing-run-x.md").write_text(
        dump_frontmatter({"kind": "rule", "title": "Run -x", "category": "testing",
                          "status": "proposed"}) + "Always run the suite with -x.\n")
    docs = {d.path.rsplit("/", 1)[-1]: d for d in store.documents()}
    good = docs["001-fix-the-refresh.md"]
    assert good.kind is DocumentKind.CHAPTER and good.title == "Fix the refresh"
    assert good.topics == ("auth", "jwt") and good.seq_range == (1, 9)
    assert good.messages == (("assistant", 2), ("user", 1))
    assert good.session_id == SID and good.date == "2026-09-17T10:00:00Z"
    assert good.sha256 == good.body_sha256 and not good.modified_since_archived
    assert ("tokens", "12") in good.extra and good.body == ""
    assert docs["002-tampered.md"].modified_since_archived
    broken = docs["003-broken.md"]
    assert broken.title == "003-broken" and broken.extra[0][0] == "frontmatterError"
    rule = docs["001-testing-run-x.md"]
    assert rule.kind is DocumentKind.RULE and rule.category == "testing"
    assert rule.body == "Always run the suite with -x.\n"


def test_temp_files_are_never_listed_and_are_swept_under_the_lock(store: FsChapterStore) -> None:
    chapters = Path(store.root) / SID / "chapters"
    chapters.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=10)
    leftover = chapters / f".002-half.md.{dead.pid}-abcd.tmp"
    leftover.write_text("half a chapter")
    in_flight = chapters / f".003-busy.md.{os.getpid()}-beef.tmp"  # a live writer's file
    in_flight.write_text("being written")
    assert store.chapter_paths() == [] and list(store.documents()) == []
    assert list(DirectoryTree(store.root).list()) == []
    lock = FileWriterLock(store.root, stale_seconds=600)
    with lock.hold(1):
        assert lock.swept == 1
    assert not leftover.exists() and in_flight.exists()


def test_directory_tree(tmp_path: Path) -> None:
    tree = DirectoryTree(tmp_path)
    tree.write("chapters/pk/s1/001-a.md", b"one")
    tree.write("artifacts/pk/ab/abc", b"two")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    assert list(tree.list()) == ["artifacts/pk/ab/abc", "chapters/pk/s1/001-a.md"]
    assert list(tree.list("chapters/")) == ["chapters/pk/s1/001-a.md"]
    assert list(tree.list("chap")) == ["chapters/pk/s1/001-a.md"]
    assert list(tree.list("nothing/")) == []
    assert tree.exists("chapters/pk/s1/001-a.md") and not tree.exists("chapters")
    assert tree.read("artifacts/pk/ab/abc") == b"two"
    assert tree.digest("artifacts/pk/ab/abc") == hashlib.sha256(b"two").hexdigest()
    tree.write("artifacts/pk/ab/abc", b"three")  # a mirror file may be replaced (atomically)
    assert tree.read("artifacts/pk/ab/abc") == b"three"
    with pytest.raises(ChaptersError):
        tree.read("../etc/passwd")


def test_a_directory_tree_writes_a_batch_as_it_writes_one(tmp_path: Path) -> None:
    tree = DirectoryTree(tmp_path / "store")
    tree.write("s1/chapters/001-a.md", b"old")
    tree.write_many([("s1/session.json", b"{}"), ("s1/chapters/001-a.md", b"one"),
                     ("s2/chapters/001-b.md", b"two")])
    assert list(tree.list()) == ["s1/chapters/001-a.md", "s1/session.json",
                                 "s2/chapters/001-b.md"]
    assert tree.read("s1/chapters/001-a.md") == b"one"
    assert tree.read("s2/chapters/001-b.md") == b"two"
    assert not [p for p in (tmp_path / "store").rglob("*") if p.name.endswith(".tmp")]
    with pytest.raises(ChaptersError):  # a path out of the tree is refused before any write
        tree.write_many([("s3/chapters/001-c.md", b"x"), ("../escaped.md", b"x")])
    assert not (tmp_path / "escaped.md").exists() and not tree.exists("s3/chapters/001-c.md")
