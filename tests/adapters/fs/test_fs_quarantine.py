"""Quarantine, never crash: every way frontmatter can be bad yields a quarantined document with
its reason, symlinks and FIFOs in the store are never listed or read, and a `config.toml`
directory is a ConfigError (§1, §11)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dsh_chapters_core.errors import ConfigError, UnsafePathError
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_fs.chapterfile import frontmatter_error, frontmatter_problem, parse_document
from dsh_chapters_fs.configfile import read_config_file
from dsh_chapters_fs.search_tree import FrontmatterReader
from dsh_chapters_fs.store import FsChapterStore
from dsh_chapters_fs.tree import DirectoryTree

SID = "0f7f4c7e-4a8e-4c55-9b3a-5d3e2c1b0a99"
BOMB = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]"
BAD = {
    "date": ("date: 2026-13-45", "invalid date '2026-13-45'"),
    "alias": (BOMB, "alias *a at line 3"),
    "mixed keys": ("m: {1: a, b: 2}", "frontmatter value cannot be read"),
    "unhashable key": ("? [a, b]\n: 1", "invalid YAML"),
    "deep": ("n: " + "[" * 5000 + "]" * 5000, "nests deeper than frontmatterMaxDepth = 32"),
    "oversized": ("title: " + "x" * 70000, "over frontmatterMaxBytes = 65536"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_frontmatter_is_quarantined_with_its_reason(case: str) -> None:
    yaml_text, reason = BAD[case]
    text = f"---\n{yaml_text}\n---\nthe body\n"
    doc = parse_document(f"{SID}/chapters/001-x.md", text)
    assert reason in frontmatter_error(doc) and doc.title == "001-x"
    assert reason in frontmatter_problem(f"{SID}/chapters/001-x.md", text.encode())
    assert reason in frontmatter_error(FrontmatterReader().parse(f"{SID}/chapters/001-x.md",
                                                                  text.encode()) or doc)


def test_a_good_chapter_has_no_problem() -> None:
    text = '---\ndate: "2026-11-20T09:00:00Z"\nharnessId: "box"\ntitle: "ok"\n---\nbody\n'
    assert frontmatter_problem(f"{SID}/chapters/001-x.md", text.encode()) == ""


def test_copy_in_reads_what_the_core_wrote_without_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new machine judges every pool chapter before copying it in: the frontmatter the core
    writes is read with json, as search reads it, and only anything else goes to PyYAML."""
    import dsh_chapters_fs.chapterfile as chapterfile

    parsed: list[str] = []
    real = chapterfile.load_frontmatter

    def counted(fm_text: str, *args: int) -> object:
        parsed.append(fm_text)
        return real(fm_text, *args)

    monkeypatch.setattr(chapterfile, "load_frontmatter", counted)
    fields = {"date": "2026-11-20T09:00:00Z", "harnessId": "box", "title": "yes: no",
              "topics": ["auth", "2026-01-01"], "seqRange": [1, 9],
              "messages": {"assistant": 3, "user": 2}, "summary": "null"}
    text = dump_frontmatter(fields) + "the body\n"
    assert frontmatter_problem(f"{SID}/chapters/001-x.md", text.encode()) == ""
    assert parsed == []
    doc = parse_document(f"{SID}/chapters/001-x.md", text)
    assert (doc.title, doc.summary, doc.topics) == ("yes: no", "null", ("auth", "2026-01-01"))
    edited = "---\ntitle: edited by hand\nharnessId: box\n---\nthe body\n"
    assert frontmatter_problem(f"{SID}/chapters/001-x.md", edited.encode()) == ""
    assert parsed == ["title: edited by hand\nharnessId: box\n"]


def test_the_store_lists_every_quarantined_file_and_skips_links(tmp_path: Path) -> None:
    store = FsChapterStore(tmp_path / ".dsh-chapters")
    store.write_chapter(SID, 1, "good", '---\ntitle: "good"\n---\nbody\n')
    store.write_chapter(SID, 2, "bad", "---\ndate: 2026-13-45\n---\nbody\n")
    chapters = Path(store.root) / SID / "chapters"
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0\n")
    os.symlink(secret, chapters / "003-link.md")
    os.mkfifo(chapters / "004-fifo.md")
    assert store.chapter_paths() == [f"{SID}/chapters/001-good.md", f"{SID}/chapters/002-bad.md"]
    docs = list(store.documents())
    assert [d.title for d in docs] == ["good", "002-bad"]
    assert store.quarantined() == [
        (f"{SID}/chapters/002-bad.md", "invalid date '2026-13-45' at line 2 (month must be in "
                                       "1..12)"),
        (f"{SID}/chapters/003-link.md", "is a symlink"),
        (f"{SID}/chapters/004-fifo.md", "is not a regular file"),
    ]
    with pytest.raises(UnsafePathError, match="is a symlink"):
        store.read_text(f"{SID}/chapters/003-link.md")
    tree = DirectoryTree(store.root)
    assert not any("003-link" in p or "004-fifo" in p for p in tree.list())
    with pytest.raises(UnsafePathError):
        tree.read(f"{SID}/chapters/003-link.md")
    assert not tree.exists(f"{SID}/chapters/003-link.md")


def test_a_symlinked_directory_is_never_walked(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "chapters").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "001-x.md").write_text("outside\n")
    os.symlink(outside, root / "chapters" / "s1")
    tree = DirectoryTree(root)
    assert list(tree.list()) == [] and list(tree.list("chapters/s1/")) == []
    with pytest.raises(UnsafePathError, match="passes through a symlink"):
        tree.read("chapters/s1/001-x.md")


def test_a_config_toml_directory_or_fifo_is_a_config_error(tmp_path: Path) -> None:
    directory = tmp_path / "config.toml"
    directory.mkdir()
    with pytest.raises(ConfigError, match="is a directory, not a TOML file"):
        read_config_file(directory)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="is not a regular file"):
        read_config_file(fifo)
