"""SIGKILL at seeded points of archive, sync and index (the fs store's write trace parks the
process at one chosen write, before or after its rename, and the test kills it there): no
corrupt file, no stuck lock, and the next run completes; the two machines then converge.

Enrichment is not in this part: it needs the recorded model tape (tests/acceptance); its own
crash test lives with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_fs.atomic import is_temp_name
from dsh_chapters_fs.store import FsChapterStore

from tests.acceptance.steps_common import Machine, sample_session_text, session_id_for

ORIGIN = "https://github.com/acme/widgets.git"
SEED = 1616


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
