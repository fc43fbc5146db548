"""SIGKILL at the first objects of a push and of a pull, on a local-path pool and on
`git http-backend` over loopback: the pool never publishes a partial closure, a killed pull
never wedges the mirror, and afterwards every machine and a freshly linked one sync, converge
and leave the pool `git fsck --strict` clean.

On a local-path pool the kill lands as an object lands: the git adapter's object trace
(`DSH_CHAPTERS_GIT_TRACE_OBJECTS`, packs.py) parks the process right after its n-th object of
a kind (`commit` into the mirror, `push` into the pool, `fetch` into the mirror) and the test
kills it there. Over HTTP the fault proxy holds the receive-pack or upload-pack exchange before
the server sees it, with half its body sent, or after the server answered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine, project_clone
from tests.reliability.fault_proxy import FaultProxy
from tests.reliability.served_pools import served_pool


def _kill_at_object(m: Machine, argv: list[str], where: str, number: int) -> bool:
    """`chapters ARGV` parked right after its `number`-th `where` object lands; SIGKILLed there.
    False when it finished first (it had fewer objects of that kind)."""
    env = {**os.environ, **m.env, "DSH_CHAPTERS_GIT_TRACE_OBJECTS": "1",
           "DSH_CHAPTERS_GIT_OBJECT_PAUSE_MS": "60000",
           "DSH_CHAPTERS_GIT_OBJECT_PAUSE_AT": f"{where}:{number}"}
    proc = subprocess.Popen([sys.executable, "-m", "dsh_chapters", "-C", str(m.workspace),
                             *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stderr is not None
    target = f"git-object {where} {number} "
    try:
        for line in proc.stderr:
            if line.startswith(target):
                proc.send_signal(signal.SIGKILL)
                return True
        return False
    finally:
        proc.kill()
        proc.wait(timeout=60)
        proc.stderr.close()


def _kill_parked(m: Machine, proxy: FaultProxy, only: str, stage: str) -> bool:
    """`chapters sync` with the proxy holding its first `only` exchange at `stage`; SIGKILLed
    while it is held. False when the sync never made such an exchange."""
    proxy.park_at(1, stage, only=only)
    proc = subprocess.Popen([sys.executable, "-m", "dsh_chapters", "-C", str(m.workspace),
                             "sync"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **m.env})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proxy.parked.wait(timeout=0.05):
                proc.send_signal(signal.SIGKILL)
                return True
            if proc.poll() is not None:
                return False
        raise AssertionError("the sync neither finished nor reached its kill point in 60 s")
    finally:
        proc.kill()
        proc.wait(timeout=60)
        proxy.release()


def _temp_files(objects: Path) -> list[Path]:
    """Temp files of a transfer in an object store: ours, dulwich's, a pack without index."""
    found = [p for p in objects.rglob("*") if p.is_file() and (
        p.name.startswith(("tmp_obj_", "tmp_pack_", "tmp")) or p.name.endswith(".lock"))]
    packs = objects / "pack"
    found += [p for p in packs.glob("*.pack") if not p.with_suffix(".idx").exists()]
    return sorted(set(found))


def _sync_json(m: Machine) -> dict[str, Any]:
    data: dict[str, Any] = m.run("sync", "--json").json()
    assert data["ok"], f"{m.name}: {data['line']}"
    return data


def _chapters(m: Machine) -> set[str]:
    return {p for p in m.store_files() if "/chapters/" in p}


def _fsck(git_dir: Path) -> None:
    done = subprocess.run(["git", "--git-dir", str(git_dir), "fsck", "--strict", "--no-dangling"],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(git_dir.parent),
                               "GIT_CONFIG_NOSYSTEM": "1"})
    assert done.returncode == 0, done.stdout + done.stderr


def _converge(machines: list[Machine], link: list[str], root: Path) -> tuple[int, Machine]:
    """Every machine syncs twice (no sync may fail), then a freshly linked machine clones and
    syncs: all hold the same chapters. Returns (chapters, the new machine)."""
    for _ in range(2):
        for m in machines:
            _sync_json(m)
    fresh = project_clone(root, f"box-new-{len(list(root.glob('box-new-*')))}")
    fresh.ok("link", *link)
    _sync_json(fresh)
    want = _chapters(machines[0])
    for m in [*machines[1:], fresh]:
        assert _chapters(m) == want, f"{m.name} differs: {_chapters(m) ^ want}"
    return len(want), fresh


@pytest.mark.slow
def test_kill_at_first_objects_of_local_push_and_pull_never_corrupts_the_pool(
    tmp_path: Path, size: Any, record: Any
) -> None:
    # Killed right after its n-th object of each kind lands: `push` into the pool and `fetch`
    # into the mirror (children come first, so the first ones are blobs; later ones reach the
    # trees and the commit itself), and `commit` into the mirror.
    first, last = 1, size("kill_objects")
    pool = tmp_path / "drive" / "widgets.git"
    a, b = project_clone(tmp_path, "box-a"), project_clone(tmp_path, "box-b")
    for m in (a, b):
        m.ok("link", str(pool))
    a.archive("a-0")
    _sync_json(a)
    _sync_json(b)
    kills = {"commit": 0, "push": 0, "fetch": 0}
    finished = 0
    label = 0
    for where in ("push", "commit", "fetch"):
        for number in range(first, last + 1):
            label += 1
            if where == "fetch":
                b.archive(f"b-{label}")  # something for box-a's pull to bring in
                _sync_json(b)
            else:
                a.archive(f"a-{label}")  # something for box-a to commit and push
            if _kill_at_object(a, ["sync"], where, number):
                kills[where] += 1
            else:
                finished += 1
            assert not a.app().lock.state().held, "a killed sync left the writer lock held"
            _fsck(pool)  # the ref never names a partial closure
            # the next sync of the killed machine completes, and the other one's too
            data = _sync_json(a)
            assert not data["failureCode"]
            _sync_json(b)
            _fsck(pool)
    chapters, _fresh = _converge([a, b], [str(pool)], tmp_path)
    _fsck(pool)
    total = sum(kills.values())
    assert total >= 3, f"too few runs reached a kill point: {kills}"
    record("SIGKILLs at a local-path pool's objects",
           f"{total} (mirror commit {kills['commit']}, push into the pool {kills['push']}, "
           f"pull into the mirror {kills['fetch']}; objects {first}..{last}); {finished} "
           "run(s) ended before their kill point")
    record("after every local kill", "pool git fsck --strict clean, the next sync of both "
           "machines completes (no mirror wedged)")
    record("converged (local kills)", f"{chapters} chapters on 2 machines and a freshly "
           "linked one, pool git fsck --strict clean")


HTTP_POINTS = (
    ("/git-receive-pack", "request"),  # the push never reaches the server
    ("/git-receive-pack", "request-half"),  # the server gets half the pack
    ("/git-receive-pack", "answer"),  # the server moved its ref; the client never heard
    ("/git-upload-pack", "answer-half"),  # the mirror gets half the pack
    ("/git-upload-pack", "answer"),  # the server answered; the client never read it
)


@pytest.mark.slow
def test_kill_in_an_http_push_or_pull_leaves_every_machine_syncing(
    tmp_path: Path, record: Any
) -> None:
    with served_pool("git-http", tmp_path / "pool", proxy_stall_s=1.0) as pool:
        assert pool.proxy is not None and pool.git_path is not None
        a, b = project_clone(tmp_path, "box-a"), project_clone(tmp_path, "box-b")
        for m in (a, b):
            pool.link(m)
        a.archive("a-0")
        _sync_json(a)
        _sync_json(b)
        kills = 0
        for n, (service, stage) in enumerate(HTTP_POINTS):
            if service == "/git-upload-pack":
                b.archive(f"b-http-{n}")
                _sync_json(b)
            else:
                a.archive(f"a-http-{n}")
            assert _kill_parked(a, pool.proxy, service, stage), (service, stage)
            kills += 1
            assert not a.app().lock.state().held
            _fsck(pool.git_path)
            _sync_json(a)
            _sync_json(b)
        chapters, _fresh = _converge([a, b], [pool.remote, pool.token], tmp_path)
        _fsck(pool.git_path)
        left = _temp_files(a.mirror / ".git" / "objects")
        # An hour on, no transfer of the killed process can still be writing them: the doctor
        # names and removes them (dulwich's names carry no pid, so they are judged by age).
        for path in left:
            os.utime(path, (time.time() - 3600,) * 2)
        if left:
            assert any(f["code"] == "mirror-temp-files"
                       for f in a.run("doctor", "--json").json()["findings"])
        a.ok("doctor", "--repair")
        assert not _temp_files(a.mirror / ".git" / "objects")
        assert a.run("doctor").code == 0
    record("SIGKILLs in an HTTP push or pull",
           f"{kills} (push: before the server, half a pack, after its answer; pull: half a "
           "pack, after the answer)")
    record("converged (HTTP kills)", f"{chapters} chapters on 2 machines and a freshly linked "
           f"one, pool git fsck --strict clean; {len(left)} temp file(s) the kills left in the "
           "mirror removed by `chapters doctor --repair`")


def _subtree_object(mirror: Path, name: bytes) -> Path:
    """The loose object of `name` under the root tree of the mirror's `main`."""
    from dulwich.objects import Commit, Tree
    from dulwich.repo import Repo

    repo = Repo(str(mirror))
    try:
        commit = repo[repo.refs[b"refs/heads/main"]]
        assert isinstance(commit, Commit)
        root = repo[commit.tree]
        assert isinstance(root, Tree)
        sha = root[name][1].decode()
    finally:
        repo.close()
    path = mirror / ".git" / "objects" / sha[:2] / sha[2:]
    assert path.is_file(), "small syncs leave loose objects"
    return path


@pytest.mark.slow
def test_a_mirror_whose_objects_do_not_read_is_moved_aside_by_the_next_sync(
    tmp_path: Path, record: Any
) -> None:
    pool = tmp_path / "drive" / "widgets.git"
    a, b = project_clone(tmp_path, "box-a"), project_clone(tmp_path, "box-b")
    for m in (a, b):
        m.ok("link", str(pool))
    a.archive("a-1")
    _sync_json(a)
    _sync_json(b)
    b.archive("b-1")
    _sync_json(b)
    # Damage an object the open does not read but the pull does (the old `chapters/` tree a
    # fast-forward diffs against), in place: the object directories look unchanged.
    damaged = _subtree_object(a.mirror, b"chapters")
    damaged.chmod(0o644)
    with damaged.open("r+b") as handle:
        handle.write(b"\x78\x9c garbage, not a zlib stream")
    first = a.run("sync", "--json").json()
    assert not first["ok"] and first["failureCode"] == "corrupt", first["line"]
    second = a.run("sync", "--json").json()
    assert second["ok"], second["line"]
    assert second["movedAside"] and second["cloned"], second["line"]
    assert list(tmp_path.glob("box-a/widgets/.dsh-knowledge.stale-*"))
    assert b.sessions["b-1"] in {p.split("/", 1)[0] for p in a.store_files()}
    record("damaged mirror", "a mirror object that does not read fails one pull (corrupt, "
           "named); the next sync moves the mirror aside and clones again, as it promised")
