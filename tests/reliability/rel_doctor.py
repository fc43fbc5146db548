"""`chapters doctor` checks what a sync trusts and `--repair` fixes what it can: a chapter and
an artifact cut short (against their recorded sha256, restored from the pool mirror's whole
copy), a mirror whose `.git` is gone, a local-path pool whose head names an
object the pool lost (written back from this machine's mirror), and the temp files killed
transfers leave in the pool and the mirror. What it cannot fix, it names.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from dulwich.objects import Commit
from dulwich.repo import Repo

from tests.acceptance.steps_common import Machine, project_clone


def _findings(m: Machine) -> dict[str, dict[str, str]]:
    result = m.run("doctor", "--json")
    return {f"{f['code']} {f['path']}": f for f in result.json()["findings"]}


def _codes(m: Machine) -> set[str]:
    return {key.split(" ", 1)[0] for key in _findings(m)}


def _fsck(git_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "--git-dir", str(git_dir), "fsck", "--strict",
                           "--no-dangling"], capture_output=True, text=True, timeout=120,
                          check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(git_dir),
                                            "GIT_CONFIG_NOSYSTEM": "1"})


def _head_tree_object(pool: Path) -> Path:
    repo = Repo(str(pool))
    try:
        commit = repo[repo.refs[b"refs/heads/main"]]
        assert isinstance(commit, Commit)
        tree = commit.tree.decode()
    finally:
        repo.close()
    path = pool / "objects" / tree[:2] / tree[2:]
    assert path.is_file(), "the head's tree is a loose object in a pool fed by small syncs"
    return path


@pytest.mark.slow
def test_doctor_finds_and_repairs_what_a_sync_trusts(tmp_path: Path, record: Any) -> None:
    pool = tmp_path / "drive" / "widgets.git"
    a, b = project_clone(tmp_path, "box-a"), project_clone(tmp_path, "box-b")
    for m in (a, b):
        m.ok("link", str(pool))
    a.set_config("toolResultDeferFloorTokens = 20")  # an artifact to tamper with
    a.archive("a-1")
    a.ok("sync")
    b.ok("sync")
    assert a.run("doctor").code == 0

    chapter = next(p for p in sorted(a.store.rglob("001-*.md")) if "/chapters/" in str(p))
    whole = chapter.read_bytes()
    chapter.write_bytes(whole[:-40])  # cut short, as a full disk or a bad copy would
    # a sync holds the damaged chapter back: never published as "changed"
    sync = a.run("sync", "--json").json()
    assert sync["ok"] and not sync["publishedChanged"], sync["line"]
    assert any("1 damaged held back" in step for step in sync["steps"]), sync["line"]
    artifact = next(a.store.glob("artifacts/*/*.txt"))
    pristine = artifact.read_bytes()
    artifact.write_bytes(pristine[: len(pristine) // 2])  # cut short, like the chapter
    # the pool's head loses its root tree (a pool a killed push left before this fix)
    lost = _head_tree_object(pool)
    lost.unlink()
    assert _fsck(pool).returncode != 0
    # temp files of killed transfers: ours (a dead pid) and dulwich's (old, no pid)
    dead = (pool / "objects" / "ab" / "tmp_obj_99999999_0badc0ffee00")
    dead.parent.mkdir(exist_ok=True)
    dead.write_bytes(b"x" * 1000)
    stale = a.mirror / ".git" / "objects" / "pack" / "tmpq1w2e3r4.pack"
    stale.write_bytes(b"PACK" + b"\0" * 500)
    old = time.time() - 3600
    os.utime(stale, (old, old))

    codes = _codes(a)
    wanted = {"chapter-cut-short", "artifact-cut-short", "pool-damaged", "pool-temp-files",
              "mirror-temp-files"}
    assert wanted <= codes, f"missing {wanted - codes}"
    assert a.run("doctor").code == 1
    repaired = a.run("doctor", "--repair", "--json").json()
    done = {f["code"]: f["repaired"] for f in repaired["findings"]}
    assert all(done.get(code) for code in wanted), done
    assert chapter.read_bytes() == whole
    assert artifact.read_bytes() == pristine
    assert list((a.store / "state" / "doctor").rglob("*")), "the damaged bytes were not kept"
    assert _fsck(pool).returncode == 0, _fsck(pool).stderr
    assert not dead.exists() and not stale.exists()
    assert a.run("doctor").code == 0, a.run("doctor").text
    b.ok("sync")
    assert b.run("doctor").code == 0, b.run("doctor").text

    # a mirror whose `.git` is gone: named, and rebuilt from the pool
    for entry in (a.mirror / ".git").iterdir():
        if entry.is_dir():
            for sub in sorted(entry.rglob("*"), reverse=True):
                sub.chmod(0o755) if sub.is_dir() else sub.unlink()
                if sub.is_dir():
                    sub.rmdir()
            entry.rmdir()
        else:
            entry.unlink()
    (a.mirror / ".git").rmdir()
    assert "mirror-unusable" in _codes(a)
    a.ok("doctor", "--repair")
    assert (a.mirror / ".git").is_dir()
    assert a.run("doctor").code == 0

    # what it cannot fix, it names: a chapter the pool holds no whole copy of
    a.archive("a-2")  # archived here, never synced: no pool copy
    fresh = next(p for p in sorted(a.store.rglob("*.md")) if a.sessions["a-2"] in str(p))
    fresh.write_bytes(fresh.read_bytes()[:-30])
    left = a.run("doctor", "--repair", "--json").json()["findings"]
    named = [f for f in left if f["code"] == "chapter-changed"]
    assert named and not named[0]["repaired"] and "holds no copy" in named[0]["detail"]
    record("doctor", "finds a chapter and an artifact cut short, a pool head missing its "
           "tree, temp files of killed transfers in the pool and the mirror, a mirror without "
           ".git; --repair restores them (pool git fsck --strict clean after), names a chapter "
           "changed with no copy to restore from (never overwritten: it may be a redaction)")
