"""SearchTree's writes of derived files: atomic, from whole bytes or from chunks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dsh_chapters_fs.search_tree import SearchTree


def test_chunks_are_written_as_their_concatenation(tmp_path: Path) -> None:
    tree = SearchTree(tmp_path)
    chunks = [b"{\n", b"x" * 100_000, b"}\n"]
    tree.write_chunks("index/manifest.json", iter(chunks))
    assert (tmp_path / "index" / "manifest.json").read_bytes() == b"".join(chunks)
    assert [p.name for p in (tmp_path / "index").iterdir()] == ["manifest.json"]  # no temp file


def test_a_stream_cut_short_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    tree = SearchTree(tmp_path)
    tree.write("cache/tokens.json", b"old")

    def chunks() -> Iterator[bytes]:
        yield b"new"
        raise RuntimeError("cut short")

    with pytest.raises(RuntimeError):
        tree.write_chunks("cache/tokens.json", chunks())
    assert (tmp_path / "cache" / "tokens.json").read_bytes() == b"old"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["tokens.json"]


def test_chunks_of_a_primary_file_take_the_durable_write(tmp_path: Path) -> None:
    tree = SearchTree(tmp_path)
    tree.write_chunks("s1/notes.txt", [b"a", b"b"])
    assert (tmp_path / "s1" / "notes.txt").read_bytes() == b"ab"
