"""`chapters doctor [--repair]` and the quarantine lines of `chapters status`, through the
composition root against real local-path pools: an unsafe pool entry, a damaged mirror, a
stale pool lock, a symlink in the store and loose credential modes are found, and repaired
where no person is needed."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from dsh_chapters_treedx.testing import FakeTreeDX

from tests.acceptance.steps_common import Machine
from tests.reliability.pool_poison import FILE, chapter, plant

ORIGIN = "https://github.com/acme/widgets.git"

pytestmark = pytest.mark.slow


@pytest.fixture
def box(tmp_path: Path) -> Machine:
    workspace = tmp_path / "box" / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {ORIGIN}\n')
    home = tmp_path / "box" / "home"
    home.mkdir()
    return Machine("box", workspace, home, {"DSH_HOME": str(home),
                                            "DSH_CHAPTERS_HARNESS_ID": "box",
                                            "HOME": str(tmp_path / "box"),
                                            "PATH": "/usr/bin:/bin"})


def test_a_healthy_workspace_is_healthy(box: Machine) -> None:
    box.archive("s-1")
    out = box.ok("doctor").out
    assert "healthy" in out and box.ok("doctor", "--json").json()["healthy"] is True


def test_a_store_symlink_is_found_then_removed_and_its_target_kept(
    box: Machine, tmp_path: Path
) -> None:
    box.archive("s-1")
    sid = box.sessions["s-1"]
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    link = box.store / sid / "chapters" / "099-link.md"
    os.symlink(target, link)
    found = box.run("doctor")
    assert found.code == 1 and "symlink" in found.out and "--repair would" in found.out
    assert "099-link.md: is a symlink" in box.ok("status").out
    assert "root:x" not in box.run("show", f"{sid}/chapters/099-link.md").text
    repaired = box.run("doctor", "--repair")
    assert "repaired: removed" in repaired.out
    assert not link.is_symlink() and target.read_text() == "root:x:0:0\n"
    assert box.ok("doctor").code == 0


def test_pool_poison_a_damaged_mirror_and_a_stale_lock(box: Machine, tmp_path: Path) -> None:
    pool = tmp_path / "drive" / "widgets.git"
    box.ok("link", str(pool))
    box.archive("s-1")
    box.ok("sync")
    key = box.app().identity.project_key
    plant(pool, {f"chapters/{key}/../001-x.md": (FILE, chapter("mallory", "x", "climb")),
                 f"chapters/{key}/s-m/001-bad.md": (FILE, chapter("mallory", "s-m", "d",
                                                                  date="2026-13-45"))})
    report = box.ok("sync", "--json").json()
    assert report["ok"] and report["quarantined"] == 2
    status = box.ok("status").out
    assert "quarantine 2 file(s) set aside" in status and "invalid date" in status
    # damage the mirror: one object file overwritten in the middle
    objects = sorted((box.mirror / ".git" / "objects").rglob("*"))
    victim = next(p for p in objects if p.is_file() and p.parent.name != "info"
                  and p.stat().st_size > 64)
    os.chmod(victim, 0o644)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 16] = b"\0" * 16
    victim.write_bytes(bytes(data))
    (box.mirror / ".git" / "dsh-chapters-verified").unlink(missing_ok=True)
    found = box.run("doctor", "--json").json()
    codes = {f["code"] for f in found["findings"]}
    assert {"mirror-corrupt", "pool-unsafe-path", "quarantined-frontmatter"} <= codes
    repaired = box.run("doctor", "--repair", "--json").json()
    done = {f["code"]: f["repaired"] for f in repaired["findings"]}
    assert done["mirror-corrupt"].startswith("rebuilt the mirror from the pool")
    assert "mirror-corrupt" not in {f["code"] for f in box.run("doctor", "--json").json()[
        "findings"]}
    # a stale pool ref lock: the sync names it with its path instead of timing out
    lock = pool / "refs" / "heads" / "main.lock"
    lock.write_text("0" * 40 + "\n")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    box.archive("s-2")
    stuck = box.run("sync", "--json").json()
    assert stuck["failureCode"] == "locked" and "main.lock" in stuck["failureDetail"]
    repaired = box.run("doctor", "--repair", "--json").json()
    done = {f["code"]: f["repaired"] for f in repaired["findings"]}
    assert done["pool-lock-stale"].startswith("removed") and not lock.exists()
    after = box.ok("sync", "--json").json()
    assert after["ok"] and after["pushed"]
    # §5.2: corruption found at open routes the sync itself to the rebuild path
    loose = sorted(p for p in (box.mirror / ".git" / "objects").glob("??/*") if p.is_file())
    for path in loose[: max(1, len(loose) // 3)]:
        path.unlink()
    rebuilt = box.ok("sync", "--json").json()
    assert rebuilt["ok"] and rebuilt["movedAside"] and "moved a stale mirror aside" in \
        rebuilt["steps"]
    fsck = subprocess.run(["git", "-C", str(box.mirror), "fsck"], capture_output=True)
    assert fsck.returncode == 0


def test_loose_credential_modes_are_tightened(box: Machine) -> None:
    creds = box.home / "dsh-chapters" / "credentials"
    creds.mkdir(parents=True)
    token = creds / "some-key"
    token.write_text("not-a-real-token")
    os.chmod(token, 0o644)
    found = box.run("doctor")
    assert found.code == 1 and "credentials-mode" in found.out
    assert "not-a-real-token" not in found.out
    box.run("doctor", "--repair")
    assert token.stat().st_mode & 0o777 == 0o600


def test_a_treedx_linked_workspace_reports_reach_token_and_mirror(box: Machine) -> None:
    """`chapters doctor` over a TreeDX pool (the fake on loopback): healthy when it answers; the
    service down, a damaged mirror and a revoked token are each named, the token never."""
    fake = FakeTreeDX().start()
    try:
        token = fake.issue_token()
        box.ok("link", fake.remote("widgets-pool"), token)
        box.archive("s-1")
        box.ok("sync")
        assert box.ok("doctor", "--json").json() == {"healthy": True, "repair": False,
                                                      "findings": []}
        fake.stop()
        down = box.run("doctor")
        fake.start()
        assert down.code == 1 and "pool-unreachable" in down.out and "GET /health" in down.out
        mirrored = next(p for p in box.mirror.rglob("*.md") if p.is_file())
        mirrored.write_text("changed by hand\n", encoding="utf-8")
        found = box.run("doctor", "--json").json()
        assert [f["code"] for f in found["findings"]] == ["mirror-corrupt"]
        repaired = box.run("doctor", "--repair", "--json").json()
        assert repaired["healthy"] and "re-read" in repaired["findings"][0]["repaired"]
        assert box.ok("doctor").code == 0
        fake.revoke(token)
        refused = box.run("doctor")
        assert refused.code == 1 and "pool-token-rejected" in refused.out
        assert all(token not in r.text for r in box.results)
    finally:
        fake.stop()
    assert fake.errors == []
