"""A linked search sees everything this machine has (search.md "Two doors"): the pool door's
answer includes this machine's chapters not yet published, one entry per chapter, and says how
many; once they are published they are found at their pool path, never twice. And the index is
written where chapters are written: the first search after an archive builds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acceptance.steps_common import Machine, session_id_for
from tests.app.test_app_pool_cli import machine


@pytest.fixture
def a(tmp_path: Path) -> Machine:
    return machine(tmp_path, "box-a")


def archive_with(box: Machine, label: str, old: str, new: str) -> None:
    """Archive the sample session under `label` with one of its words replaced."""
    path = box.write_session(label)
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    box.ok("archive", str(path), "--json")


def test_a_chapter_archived_after_the_last_push_is_found(a: Machine, tmp_path: Path) -> None:
    a.ok("link", str(tmp_path / "pool.git"))
    a.archive("s-1")  # archived and pushed: the pool has it
    a.ok("sync")
    assert (a.mirror / "chapters").is_dir()
    # Archived after the push (the push is deferred): only this machine has it.
    archive_with(a, "s-2", "RetryExhausted", "quokka")
    status = a.ok("status").out
    assert "pending" in status
    data = a.ok("search", "quokka", "--json").json()
    assert data["door"] == "mirror" and data["unpublished"] >= 1
    sid = session_id_for("s-2")
    paths = [m["path"] for m in data["matches"]]
    assert paths and all(p.startswith(f".dsh-chapters/{sid}/chapters/") for p in paths)
    anchor = data["matches"][0]["anchor"]
    text = (a.workspace / paths[0]).read_text(encoding="utf-8").split("\n")
    assert "quokka" in text[anchor["line"] - 1]
    assert "unpublished" in a.ok("search", "quokka").out.splitlines()[0]
    # A word both sessions hold: each chapter once, the published ones at their pool path.
    both = a.ok("search", "exponential backoff", "--json", "--max-tokens", "4000").json()
    found = [m["path"] for m in both["matches"]]
    assert len(found) == len(set(found))
    assert any(p.startswith(".dsh-knowledge/") for p in found)
    assert any(p.startswith(f".dsh-chapters/{sid}/") for p in found)
    # Published: found in the pool, and no longer as this machine's own.
    a.ok("sync")
    after = a.ok("search", "quokka", "--json").json()
    assert "unpublished" not in after
    assert [m["path"] for m in after["matches"]] == [
        p.replace(f".dsh-chapters/{sid}/chapters/", f".dsh-knowledge/chapters/{key}/{sid}/")
        for p in paths for key in [after["matches"][0]["path"].split("/")[2]]]


def test_the_first_search_after_an_archive_builds_nothing(a: Machine) -> None:
    a.archive("s-1")
    assert (a.store / "cache" / "search-store.sqlite").is_file()  # written with the chapters
    generation = (a.store / "cache" / "index-store.generation").read_text()
    result = a.ok("search", "exponential backoff")
    assert result.err == "" and "shown" in result.out
    assert (a.store / "cache" / "index-store.generation").read_text() == generation
