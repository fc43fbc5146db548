"""The store's one sanctioned mutation on real files: the enrichment frontmatter write (§6.1),
and the drain lock enrichment runs under."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from dsh_chapters_core.errors import BodyChangedError, ChaptersError
from dsh_chapters_core.frontmatter import dump_frontmatter, split_frontmatter
from dsh_chapters_fs.runlock import FileRunLock
from dsh_chapters_fs.store import FsChapterStore

SID = "5f0c2a9e-8d3b-4e61-9a7c-2b1d4e6f8a10"
BODY = "## Turn\n\n**User:**\n\n```text\nhello — ünïcode\n```\n"


def _fields(**extra: object) -> dict[str, object]:
    return {"title": "hello", "kind": "chapter", "sessionId": SID, "harnessId": "laptop",
            "sha256": hashlib.sha256(BODY.encode()).hexdigest(), **extra}


@pytest.fixture
def written(tmp_path: Path) -> tuple[FsChapterStore, str]:
    store = FsChapterStore(tmp_path / ".dsh-chapters")
    store.record_session(SID, SID, {"harnessId": "laptop"})
    path = store.write_chapter(SID, store.reserve_chapter_number(SID), "hello",
                               dump_frontmatter(_fields()) + BODY)
    return store, path


def test_the_frontmatter_is_replaced_and_the_body_kept_byte_for_byte(written) -> None:
    store, path = written
    target = Path(store.root) / path
    inode_before = target.stat().st_ino
    block = dump_frontmatter(_fields(title="Greeting", unvetted=["greeting"]))
    store.rewrite_frontmatter(path, block, hashlib.sha256(BODY.encode()).hexdigest())
    data = target.read_bytes()
    assert data == (block + BODY).encode("utf-8")
    assert split_frontmatter(data.decode())[1] == BODY
    assert target.stat().st_ino != inode_before  # a new file renamed into place: atomic
    assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]
    assert store.document(path).title == "Greeting"


def test_another_body_is_refused_with_numbers(written) -> None:
    store, path = written
    target = Path(store.root) / path
    target.write_bytes(target.read_bytes() + b"appended by hand\n")
    before = target.read_bytes()
    with pytest.raises(BodyChangedError) as caught:
        store.rewrite_frontmatter(path, dump_frontmatter(_fields(title="x")),
                                  hashlib.sha256(BODY.encode()).hexdigest())
    assert "bytes" in caught.value.message and caught.value.hint
    assert target.read_bytes() == before


@pytest.mark.parametrize("bad", ["title: x\n", "---\ntitle: x\n"])
def test_a_block_that_is_not_one_frontmatter_block_is_refused(written, bad: str) -> None:
    store, path = written
    with pytest.raises(ChaptersError):
        store.rewrite_frontmatter(path, bad, hashlib.sha256(BODY.encode()).hexdigest())


@pytest.mark.parametrize("path", ["artifacts/ab/x.txt", f"{SID}/session.json",
                                  f"{SID}/chapters/999-missing.md", "../escape.md"])
def test_only_existing_chapters_can_be_rewritten(written, path: str) -> None:
    store, _ = written
    with pytest.raises(ChaptersError):
        store.rewrite_frontmatter(path, dump_frontmatter(_fields()), "0" * 64)


def test_the_drain_lock_never_waits_and_names_its_holder(tmp_path: Path) -> None:
    lock = FileRunLock(tmp_path / "state" / "enrich-run.lock")
    other = FileRunLock(tmp_path / "state" / "enrich-run.lock")
    with lock.try_hold() as mine:
        assert mine and lock.holder_pid() == os.getpid()
        with other.try_hold() as theirs:
            assert not theirs
    assert lock.holder_pid() == 0
    with other.try_hold() as again:
        assert again
