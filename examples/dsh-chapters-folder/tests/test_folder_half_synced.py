"""A half-synced file in a folder pool is pending, never corrupt, and the next sync after it
completes copies it in: at the provider, and through `chapters sync` on two machines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
from dsh_chapters_core.testing.conformance import MakeProvider
from dsh_chapters_folder.manifest import MANIFESTS, read_pool

CHAPTER = "chapters/pk/s-1/001-first.md"
BODY = b"---\ntitle: first\n---\n\n" + b"a verbatim line of the session\n" * 400


def test_a_truncated_copy_is_pending_and_arrives_on_the_next_pull(
    tmp_path: Path, make_provider: MakeProvider
) -> None:
    remote = f"folder+{tmp_path / 'pool'}"
    a = make_provider(remote, str(tmp_path / "a" / ".dsh-knowledge"), "machine-a")
    a.open()
    a.stage({CHAPTER: BODY, "edits/machine-a/curation.jsonl": b"{}\n"})
    a.commit("two files", "machine-a")
    a.push()

    # The sync tool has copied only the first half of the chapter to this machine so far.
    pool_file = tmp_path / "pool" / CHAPTER
    whole = pool_file.read_bytes()
    pool_file.write_bytes(whole[: len(whole) // 2])

    b = make_provider(remote, str(tmp_path / "b" / ".dsh-knowledge"), "machine-b")
    state = b.open()
    assert state.cloned and state.arriving == (CHAPTER,)
    mirror = tmp_path / "b" / ".dsh-knowledge"
    assert not (mirror / CHAPTER).exists()  # never a half chapter in the mirror
    assert (mirror / "edits/machine-a/curation.jsonl").read_bytes() == b"{}\n"
    quiet = b.pull()
    assert quiet.arriving == (CHAPTER,) and quiet.changed_paths == ()

    pool_file.write_bytes(whole)  # the copy completes
    done = b.pull()
    assert done.changed_paths == (CHAPTER,) and done.arriving == ()
    assert (mirror / CHAPTER).read_bytes() == BODY


def test_a_half_synced_manifest_is_pending_not_an_error(
    tmp_path: Path, make_provider: MakeProvider
) -> None:
    remote = f"folder+{tmp_path / 'pool'}"
    a = make_provider(remote, str(tmp_path / "a" / ".dsh-knowledge"), "machine-a")
    a.open()
    a.stage({CHAPTER: BODY})
    a.commit("one", "machine-a")
    a.push()
    manifest = tmp_path / "pool" / MANIFESTS / "machine-a.json"
    whole = manifest.read_bytes()
    manifest.write_bytes(whole[:20])
    assert read_pool(str(tmp_path / "pool")).arriving_manifests == ("machine-a",)
    b = make_provider(remote, str(tmp_path / "b" / ".dsh-knowledge"), "machine-b")
    assert b.open().arriving == (f"{MANIFESTS}/machine-a.json",)
    manifest.write_bytes(whole)
    assert b.pull().changed_paths == (CHAPTER,)


# ---- two machines through the CLI ------------------------------------------------------
SAMPLE_ID = "demo-session-0001"


def _machine(root: Path, name: str) -> tuple[Path, dict[str, str]]:
    workspace = root / name / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://example.org/acme/widgets.git\n'
    )
    home = root / name / "home"
    home.mkdir()
    env = {**os.environ, "DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": name,
           "HOME": str(root / name)}
    return workspace, env


def _chapters(workspace: Path, env: dict[str, str], *argv: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(workspace), *argv,
                           "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    data: dict[str, object] = json.loads(done.stdout)
    return data


@pytest.mark.slow
def test_two_machines_sync_through_a_folder_pool_with_a_half_synced_chapter(
    tmp_path: Path,
) -> None:
    pool = tmp_path / "Sync" / "widgets-pool"
    pool.parent.mkdir()  # the synced folder exists on both machines; the pool is made in it
    a_ws, a_env = _machine(tmp_path, "box-a")
    b_ws, b_env = _machine(tmp_path, "box-b")
    sample = (files("dsh_chapters") / "samples" / "demo-session.jsonl").read_text("utf-8")
    session = tmp_path / "session.jsonl"
    session.write_text(sample, encoding="utf-8")

    linked = _chapters(a_ws, a_env, "link", f"folder+{pool}")
    assert linked["provider"] == "folder"
    _chapters(a_ws, a_env, "archive", str(session))
    pushed = _chapters(a_ws, a_env, "sync")
    assert pushed["ok"] is True and pushed["pending"] == 0  # the archive or this sync pushed

    chapters = sorted(p for p in pool.rglob("*.md") if "/chapters/" in p.as_posix())
    assert chapters, "A published no chapter into the folder"
    late = chapters[0]
    whole = late.read_bytes()
    late.write_bytes(whole[: len(whole) // 3])  # box-b's copy of it is still arriving

    _chapters(b_ws, b_env, "link", f"folder+{pool}")
    first = _chapters(b_ws, b_env, "sync")
    assert first["ok"] is True and first["arriving"] == 1
    assert "1 pending (not yet arrived)" in str(first["line"])
    store_b = b_ws / ".dsh-chapters"
    names = {p.name for p in store_b.rglob("*.md")}
    assert late.name not in names  # never a half chapter in the store

    late.write_bytes(whole)
    second = _chapters(b_ws, b_env, "sync")
    assert second["ok"] is True and second["arriving"] == 0
    copied = [p for p in store_b.rglob(late.name)]
    assert len(copied) == 1 and copied[0].read_bytes() == whole
