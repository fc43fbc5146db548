"""SIGKILL at seeded points of archive, sync, index and enrichment (the fs store's write trace
parks the process at one chosen write, before or after its rename, and the test kills it
there): no corrupt file, no stuck lock, and the next run completes; the machines converge.

Over the networked pools (`git http-backend`, the TreeDX fake) a sync is also killed in the
middle of the network: the loopback proxy holds its n-th request, before the server sees it
or after the server did the work and before the client hears, and the test kills it there.
A TreeDX lease a killed push recorded is closed by `chapters doctor --repair`; one it was
granted but never heard of ends at its TTL (CONTRACT.md), so the fake's clock is moved past it.

`chapters enrich run` is killed at its store writes (the enrichment frontmatter write, §6, and
the queue state) and in the middle of a model call (the same proxy, in front of the recorded
tape the enrichment tests use): no chapter's body changes, no run lock or writer lock stays
held, and the next run enriches every chapter.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.enrich.chapter import parse_chapter_file
from dsh_chapters_fs.atomic import is_temp_name
from dsh_chapters_fs.runlock import FileRunLock
from dsh_chapters_fs.store import FsChapterStore
from dsh_chapters_harness.testing.tape_server import TapeServer, load_tape

from tests.acceptance.steps_common import Machine, sample_session_text, session_id_for
from tests.acceptance.steps_common import project_clone as make_machine
from tests.fixtures.tapes import make_tapes
from tests.reliability.fault_proxy import FaultProxy
from tests.reliability.served_pools import (
    POOL_KINDS,
    TREEDX_REPO,
    ServedPool,
    pick,
    served_pool,
)

ORIGIN = "https://github.com/acme/widgets.git"
SEED = 1616



def _kill_when_parked(workspace: Path, command: list[str], env: dict[str, str],
                      proxy: FaultProxy) -> bool:
    """Run `chapters <command>` and SIGKILL it once the proxy holds its request: True when it
    was killed there, False when it finished first (bounded at 60 s either way)."""
    proc = subprocess.Popen([sys.executable, "-m", "dsh_chapters", "-C", str(workspace),
                             *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proxy.parked.wait(timeout=0.05):
                proc.send_signal(signal.SIGKILL)
                return True
            if proc.poll() is not None:
                return False
        raise AssertionError(f"`chapters {' '.join(command)}` neither finished nor reached its "
                             "kill point in 60 s")
    finally:
        proc.kill()
        proc.wait(timeout=60)
        proxy.release()

def _machine(root: Path, name: str) -> Machine:
    workspace = root / name / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {ORIGIN}\n')
    home = root / name / "home"
    home.mkdir()
    return Machine(name, workspace, home, {"DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": name,
                                           "HOME": str(root / name), "PATH": "/usr/bin:/bin"})


def _kill(m: Machine, argv: list[str], stage: str, number: int) -> bool:
    """Run `chapters ARGV` parked at write `number`'s `stage`; SIGKILL it there. False when it
    finished before reaching that write (then it ran to completion: also fine)."""
    env = {**os.environ, **m.env, "DSH_CHAPTERS_FS_TRACE_WRITES": "1",
           "DSH_CHAPTERS_FS_WRITE_PAUSE_MS": "60000",
           "DSH_CHAPTERS_FS_WRITE_PAUSE_AT": f"{stage}:{number}"}
    proc = subprocess.Popen([sys.executable, "-m", "dsh_chapters", "-C", str(m.workspace), *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    target = f"fs-write {stage} {number} "
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


def _whole(store: Path) -> None:
    """Every chapter, artifact and JSON file of the store is whole."""
    chapters = [p for p in store.glob("*/chapters/*") if not is_temp_name(p.name)]
    documents = list(FsChapterStore(store).documents())
    assert len(documents) == len(chapters)
    for document in documents:
        assert document.sha256 == document.body_sha256, document.path
    for artifact in store.glob("artifacts/*/*"):
        if not is_temp_name(artifact.name):
            assert hashlib.sha256(artifact.read_bytes()).hexdigest() == artifact.stem
    for path in [*store.glob("*/session.json"), *store.glob("state/*.json")]:
        json.loads(path.read_text())


@pytest.mark.slow
def test_sigkills_in_archive_sync_and_index_leave_nothing_corrupt(
    tmp_path: Path, size: Any, record: Any
) -> None:
    rng = random.Random(SEED)
    pool = tmp_path / "drive" / "widgets.git"
    a, b = _machine(tmp_path, "box-a"), _machine(tmp_path, "box-b")
    for m in (a, b):
        m.ok("link", str(pool))
    b.archive("b-0")
    b.ok("sync")
    wanted = size("sigkills")
    kills = {"archive": 0, "sync": 0, "index": 0}
    finished = 0
    labels: list[str] = []
    attempts = 0
    while sum(kills.values()) < wanted:
        attempts += 1
        assert attempts < wanted * 4, "too few runs reached their kill point"
        op = rng.choice(["archive", "sync", "index"])
        if op == "archive":
            label = f"a-{len(labels)}"
            labels.append(label)
            sid = session_id_for(label)
            path = a.workspace.parent / f"{label}.jsonl"
            path.write_text(sample_session_text(sid), encoding="utf-8")
            a.sessions[label] = sid
            argv = ["archive", str(path)]
        elif op == "sync":
            if rng.random() < 0.5:  # give copy-in something to write
                b.archive(f"b-{attempts}")
                b.ok("sync")
            argv = ["sync"]
        else:
            argv = ["index", "--rebuild"]
        if _kill(a, argv, rng.choice(["temp", "done"]), rng.randint(1, 6)):
            kills[op] += 1
        else:
            finished += 1
        _whole(a.store)
        lock = a.app().lock.state()
        assert not lock.held, "a killed writer left the lock held by a live pid"
        # the next run completes: the same command, now without a kill point
        a.ok(*argv)
        _whole(a.store)
    a.ok("sync")
    b.ok("sync")
    a.ok("sync")
    chapters_a = {p for p in a.store_files() if "/chapters/" in p}
    chapters_b = {p for p in b.store_files() if "/chapters/" in p}
    assert chapters_a == chapters_b
    for label in labels:
        assert any(p.startswith(f"{a.sessions[label]}/chapters/") for p in chapters_a), label
    fsck = subprocess.run(["git", "-C", str(pool), "fsck", "--strict"], capture_output=True,
                          text=True)
    assert fsck.returncode == 0, fsck.stderr
    record("SIGKILLs", f"{sum(kills.values())} (archive {kills['archive']}, sync "
           f"{kills['sync']}, index {kills['index']}); {finished} run(s) ended before their "
           "kill point")
    record("after every kill", "no partial file, lock not held, the same command completes")
    record("converged", f"{len(chapters_a)} chapters on both machines, pool git fsck --strict "
           "clean")


def _kill_in_flight(m: Machine, pool: ServedPool, number: int, stage: str) -> bool:
    """`chapters sync` with the proxy holding its `number`-th request at `stage`; SIGKILL it
    there. False when it finished first (fewer requests than that: also fine)."""
    proxy = pool.proxy
    assert proxy is not None
    proxy.park_at(number, stage)
    env = {**os.environ, **m.env}
    return _kill_when_parked(m.workspace, ["sync"], env, proxy)


@pytest.mark.slow
@pytest.mark.parametrize("kind", POOL_KINDS)
def test_sigkills_during_sync_over_networked_pools_leave_nothing_corrupt(
    kind: str, tmp_path: Path, results: Any, record: Any
) -> None:
    rng = random.Random(f"{SEED}-{kind}")
    wanted = pick(results, "networked_sigkills")
    with served_pool(kind, tmp_path / "pool", proxy_stall_s=1.0) as pool:
        a, b = make_machine(tmp_path, "box-a"), make_machine(tmp_path, "box-b")
        for m in (a, b):
            pool.link(m)
        b.archive("b-0")
        b.ok("sync")
        kills = {"network": 0, "store": 0}
        finished = leases_expired = leases_closed = attempts = 0
        labels: list[str] = []
        while sum(kills.values()) < wanted:
            attempts += 1
            assert attempts < wanted * 4, "too few syncs reached their kill point"
            label = f"a-{attempts}"
            labels.append(label)
            a.archive(label)  # something to publish
            if rng.random() < 0.5:  # and something for copy-in to write
                b.archive(f"b-{attempts}")
                b.ok("sync")
            if rng.random() < 0.7:
                where = "network"
                killed = _kill_in_flight(a, pool, rng.randint(1, 8),
                                         rng.choice(["request", "answer"]))
            else:
                where = "store"
                killed = _kill(a, ["sync"], rng.choice(["temp", "done"]), rng.randint(1, 6))
            if killed:
                kills[where] += 1
            else:
                finished += 1
            _whole(a.store)
            assert not a.app().lock.state().held, "a killed sync left the lock held"
            if pool.fake is not None and pool.fake.lease_holders(TREEDX_REPO):
                found = a.run("doctor", "--json").json()["findings"]
                if any(f["code"] == "pool-lease-held" for f in found):
                    # the push recorded its lease before writing: the doctor closes it
                    a.run("doctor", "--repair")
                    leases_closed += 1
                else:
                    # killed before it heard the lease it was given: nothing names it
                    # here, and it ends at its TTL (CONTRACT.md); let that time pass
                    leases_expired += 1
                    pool.fake.advance(a.app().config.treedx_workspace_ttl_seconds + 1)
                assert pool.fake.lease_holders(TREEDX_REPO) == 0
            a.ok("sync")  # the next run completes
            _whole(a.store)
        a.ok("sync")
        b.ok("sync")
        a.ok("sync")
        chapters_a = {p for p in a.store_files() if "/chapters/" in p}
        chapters_b = {p for p in b.store_files() if "/chapters/" in p}
        assert chapters_a == chapters_b
        for label in labels:
            assert any(p.startswith(f"{a.sessions[label]}/chapters/") for p in chapters_a), label
        in_pool = {p.rsplit("/", 1)[-1] for p in pool.files() if p.startswith("chapters/")}
        assert {p.rsplit("/", 1)[-1] for p in chapters_a} <= in_pool
        if pool.git_path is not None:
            fsck = subprocess.run(["git", "-C", str(pool.git_path), "fsck", "--strict"],
                                  capture_output=True, text=True, timeout=120, check=False)
            assert fsck.returncode == 0, fsck.stderr
            judge = "pool git fsck --strict clean"
        else:
            assert pool.fake is not None
            assert pool.fake.overwritten(TREEDX_REPO) == [], "a commit dropped a head unseen"
            judge = (f"no head overwritten; leases a kill left: {leases_closed} closed by "
                     f"`chapters doctor --repair`, {leases_expired} ended at their TTL")
    record(f"SIGKILLs during sync ({kind})",
           f"{sum(kills.values())} (in flight {kills['network']}, at a store write "
           f"{kills['store']}); {finished} run(s) ended before their kill point")
    record(f"converged ({kind})", f"{len(chapters_a)} chapters on both machines, {judge}")


TAPES = Path(__file__).resolve().parents[1] / "fixtures" / "tapes"


def _enriched(m: Machine) -> tuple[int, int]:
    """(chapters, chapters whose frontmatter a model wrote); every chapter must parse."""
    total = done = 0
    for rel, data in m.store_files().items():
        if "/chapters/" not in rel or is_temp_name(rel.rsplit("/", 1)[-1]):
            continue
        chapter = parse_chapter_file(rel, data.decode("utf-8"))
        assert chapter is not None, f"{rel}: the frontmatter left the archive's form"
        total += 1
        done += b"enricher-1" in data
    return total, done


@pytest.mark.slow
def test_sigkills_during_enrichment_leave_no_corrupt_chapter_and_no_stuck_lock(
    tmp_path: Path, results: Any, record: Any
) -> None:
    rng = random.Random(f"{SEED}-enrich")
    wanted = pick(results, "enrich_sigkills")
    tape = TapeServer(tapes=(load_tape(TAPES / "enrich-valid.json"),)).start()
    proxy = FaultProxy(tape.port, "git", stall_s=1.0)  # parking only: no fault is injected
    try:
        a = make_machine(tmp_path, "box-a")
        a.set_config(f'enrichmentModel = "{make_tapes.MODEL}"')
        a.set_config(f'enrichmentBaseUrl = "http://127.0.0.1:{proxy.port}/v1"')
        a.set_config('enrichmentTrigger = "manual"')  # drained only by the runs killed here
        run_lock = FileRunLock(a.store / "state" / "enrich-run.lock")
        kills = {"model call": 0, "store write": 0}
        finished = attempts = 0
        while sum(kills.values()) < wanted:
            attempts += 1
            assert attempts < wanted * 4, "too few runs reached their kill point"
            a.archive(f"e-{attempts}")  # more chapters queued
            total, done = _enriched(a)
            assert done < total, "the enrichment marker does not tell enriched chapters apart"
            bodies = {d.path: d.body_sha256 for d in FsChapterStore(a.store).documents()}
            if rng.random() < 0.5:
                where = "model call"
                killed = _kill_enrich_in_flight(a, proxy, rng.randint(1, 3),
                                                rng.choice(["request", "answer"]))
            else:
                where = "store write"
                killed = _kill(a, ["enrich", "run"], rng.choice(["temp", "done"]),
                               rng.randint(1, 4))
            if killed:
                kills[where] += 1
            else:
                finished += 1
            _whole(a.store)
            after = {d.path: d.body_sha256 for d in FsChapterStore(a.store).documents()}
            assert after == bodies, "a killed enrichment changed a chapter's body"
            _enriched(a)  # every chapter still parses
            assert not a.app().lock.state().held, "a killed run left the writer lock held"
            assert run_lock.holder_pid() == 0, "a killed run is still named as the holder"
            with run_lock.try_hold() as free:
                assert free, "a killed run left the enrichment run lock held"
            a.ok("enrich", "run")  # the next run completes
            total, done = _enriched(a)
            assert done == total, f"{total - done} of {total} chapters left unenriched"
        assert tape.misses == [], tape.misses
        assert proxy.errors == [], proxy.errors
    finally:
        proxy.stop()
        tape.stop()
    record("SIGKILLs during enrichment",
           f"{sum(kills.values())} (in a model call {kills['model call']}, at a store write "
           f"{kills['store write']}); {finished} run(s) ended before their kill point")
    record("after every enrichment kill",
           f"bodies unchanged, run lock and writer lock free, the next run enriched all "
           f"{total} chapters")


def _kill_enrich_in_flight(m: Machine, proxy: FaultProxy, number: int, stage: str) -> bool:
    """`chapters enrich run` with its `number`-th model call held at `stage`; SIGKILL it."""
    proxy.park_at(number, stage)
    return _kill_when_parked(m.workspace, ["enrich", "run"], {**os.environ, **m.env}, proxy)
