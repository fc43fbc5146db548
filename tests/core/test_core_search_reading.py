"""Reading artifacts and chapters back: store then mirror, containment, line caps with totals."""

from __future__ import annotations

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.reading import (
    ReadRoot,
    read_lines,
    read_text,
    resolve,
    search_lines,
    table_of_contents,
)
from dsh_chapters_core.testing.fakes_search import MemoryDerivedTree

SHA = "ab" * 32
OTHER = "cd" * 32


def roots() -> tuple[ReadRoot, ReadRoot]:
    store = MemoryDerivedTree(files={
        f"artifacts/ab/{SHA}.txt": b"store copy\n",
        "s1/chapters/001-x.md": b"---\ntitle: x\n---\n# One\ntext\n## Two\n",
    })
    mirror = MemoryDerivedTree(files={
        f"artifacts/pk/ab/{SHA}": b"mirror copy\n",
        f"artifacts/pk/cd/{OTHER}": b"only in the pool\n",
    })
    return (ReadRoot("store", ".dsh-chapters", store),
            ReadRoot("mirror", ".dsh-knowledge", mirror, project_key="pk", mirror_layout=True))


def test_the_store_first_then_the_mirror() -> None:
    found = resolve(SHA, roots())
    assert (found.root.name, found.display) == ("store", f".dsh-chapters/artifacts/ab/{SHA}.txt")
    assert read_text(found) == "store copy\n"
    pool = resolve(OTHER, roots())
    assert pool.display == f".dsh-knowledge/artifacts/pk/cd/{OTHER}"
    assert resolve(".dsh-chapters/s1/chapters/001-x.md", roots()).path == "s1/chapters/001-x.md"
    assert resolve("s1/chapters/001-x.md", roots()).root.name == "store"


def test_a_miss_names_both_roots() -> None:
    with pytest.raises(ChaptersError) as caught:
        resolve("ef" * 32, roots())
    assert "store (.dsh-chapters)" in str(caught.value)
    assert "mirror (.dsh-knowledge)" in str(caught.value)


@pytest.mark.parametrize("ref", ["../etc/passwd", "/etc/passwd", "s1/../../x", "C:/x"])
def test_paths_that_leave_the_root_are_refused(ref: str) -> None:
    with pytest.raises(ChaptersError, match="refused"):
        resolve(ref, roots())


def test_a_symlink_leaving_the_root_is_refused() -> None:
    store, mirror = roots()
    store.tree.files["s1/chapters/002-link.md"] = b"secret"  # type: ignore[attr-defined]
    store.tree.links["s1/chapters/002-link.md"] = "/etc/passwd"  # type: ignore[attr-defined]
    with pytest.raises(ChaptersError, match="symlink"):
        resolve("s1/chapters/002-link.md", (store, mirror))


def test_line_caps_report_totals_and_the_next_offset() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 1001))
    first = read_lines(text, path="a", config=DEFAULTS)
    assert (len(first.lines), first.total_lines, first.next_offset) == (200, 1000, 200)
    assert "lines 1-200 of 1000; next: offset=200" in first.text()
    big = read_lines(text, path="a", config=DEFAULTS, offset=900, limit=5000)
    assert (len(big.lines), big.capped, big.limit, big.next_offset) == (100, True, 400, None)
    capped = read_lines(text, path="a", config=DEFAULTS, limit=401)
    assert len(capped.lines) == 400 and "(capped at 400 lines)" in capped.text()
    with pytest.raises(UsageError):
        read_lines(text, path="a", config=DEFAULTS, offset=1001)
    with pytest.raises(UsageError):
        read_lines(text, path="a", config=DEFAULTS, limit=0)


def test_toc_lists_headings_outside_fences() -> None:
    text = "# Title\n```\n# not a heading\n```\n## Part\ntext\n"
    toc = table_of_contents(text, path="c.md", config=DEFAULTS)
    assert [(e.line, e.level, e.title) for e in toc.entries] == [(1, 1, "Title"), (5, 2, "Part")]
    plain = table_of_contents("x\n" * 450, path="blob", config=DEFAULTS)
    assert [e.line for e in plain.entries] == [1, 201, 401]


def test_in_file_search_is_capped_and_counted() -> None:
    text = "".join(f"Error {n}\nok\n" for n in range(500))
    found = search_lines(text, "error", path="log", config=DEFAULTS)
    assert (found.total_matches, len(found.matches)) == (500, 200)
    assert found.matches[0] == (1, "Error 0")
    sevens = search_lines(text, "error 7", path="log", config=DEFAULTS)
    assert sevens.total_matches == len([n for n in range(500) if "7" in str(n)])
