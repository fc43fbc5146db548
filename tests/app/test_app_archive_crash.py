"""Crash safety: SIGKILL a real `chapters archive` mid-write, at many points, then recover.

The fs adapter's test hook (`DSH_CHAPTERS_FS_TRACE_WRITES`, `..._WRITE_PAUSE_MS`,
`..._WRITE_PAUSE_AT`) announces each write on stderr and parks the process at one chosen point:
after the temp file is synced but before its rename ("temp"), or right after the rename
("done"). The test SIGKILLs it there. Afterwards no chapter or artifact is partial, every
chapter's sha256 matches its body, and the next archive completes the job with every
completed turn in exactly one chapter.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dsh_chapters.bootstrap import bootstrap
from dsh_chapters_core.turns import split_turns
from dsh_chapters_fs.atomic import is_temp_name
from dsh_chapters_fs.store import FsChapterStore

from tests.app.archive_workspace import CLAUDE_MAIN, make_workspace

pytestmark = pytest.mark.slow


def _env(home: Path, **hooks: str) -> dict[str, str]:
    return {**os.environ, "DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": "laptop", **hooks}


def _archive_cmd(ws: Path) -> list[str]:
    return [sys.executable, "-m", "dsh_chapters", "-C", str(ws), "archive", str(CLAUDE_MAIN)]


@pytest.fixture(scope="module")
def writes_of_a_clean_run(tmp_path_factory: pytest.TempPathFactory) -> int:
    """How many atomic writes one full archive of the fixture makes (to spread kill points)."""
    root = tmp_path_factory.mktemp("clean")
    ws = make_workspace(root / "ws")
    traced = _env(root / "home", DSH_CHAPTERS_FS_TRACE_WRITES="1")
    done = subprocess.run(_archive_cmd(ws), env=traced, capture_output=True, text=True,
                          timeout=120, check=True)
    numbers = [int(line.split()[2]) for line in done.stderr.splitlines()
               if line.startswith("fs-write done ")]
    assert numbers == list(range(1, len(numbers) + 1))
    return len(numbers)


def _kill_at(ws: Path, home: Path, stage: str, number: int) -> str:
    """Run the archive, SIGKILL it parked at write `number`'s `stage`; the path it was writing."""
    proc = subprocess.Popen(
        _archive_cmd(ws), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=_env(home, DSH_CHAPTERS_FS_TRACE_WRITES="1", DSH_CHAPTERS_FS_WRITE_PAUSE_MS="60000",
                 DSH_CHAPTERS_FS_WRITE_PAUSE_AT=f"{stage}:{number}"))
    assert proc.stderr is not None
    target = f"fs-write {stage} {number} "
    try:
        for line in proc.stderr:
            if line.startswith(target):
                proc.send_signal(signal.SIGKILL)
                return line[len(target):].strip()
        raise AssertionError(f"the archive finished before {stage}:{number}")
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stderr.close()


def _check_no_partial_file(store: Path) -> int:
    """Every chapter, artifact and JSON file in the store is whole; returns the chapter count."""
    chapters = [p for p in store.glob("*/chapters/*") if not is_temp_name(p.name)]
    documents = list(FsChapterStore(store).documents())
    assert len(documents) == len(chapters)
    for document in documents:
        assert document.sha256 and document.sha256 == document.body_sha256, document.path
    for artifact in store.glob("artifacts/*/*"):
        if not is_temp_name(artifact.name):
            assert hashlib.sha256(artifact.read_bytes()).hexdigest() == artifact.stem
    for path in [*store.glob("*/session.json"), *store.glob("state/reservations/*.json")]:
        json.loads(path.read_text())
    for path in store.glob("*/collections.jsonl"):
        for line in path.read_text().splitlines():
            json.loads(line)
    return len(chapters)


def _check_complete(ws: Path, home: Path) -> None:
    """After recovery: every completed turn lies in exactly one chapter; nothing is left over."""
    store = ws / ".dsh-chapters"
    app = bootstrap(ws, {"DSH_HOME": str(home)})
    transcript = app.harnesses["claude-code"].read(str(CLAUDE_MAIN))
    turns = split_turns(transcript.events).complete
    ranges = [d.seq_range for d in app.store.documents()]
    for turn in turns:
        holders = [r for r in ranges if r[0] <= turn.start_seq and turn.end_seq <= r[1]]
        assert len(holders) == 1, (turn.index, holders)
    assert sum(1 for _ in ranges) == len({r for r in ranges})
    numbers = [p.name[:3] for p in store.glob("*/chapters/*.md")]
    assert len(numbers) == len(set(numbers))
    signatures = (store / transcript.session_id / "collections.jsonl").read_text().splitlines()
    assert len(signatures) == len(turns)
    assert app.store.watermark(transcript.session_id) == turns[-1].end_seq
    assert not [p for p in store.rglob("*") if is_temp_name(p.name)]


KILL_POINTS = [("temp", 1), ("done", 1), ("temp", 2), ("done", 3), ("temp", 4), ("temp", 6),
               ("done", 7), ("middle", 0), ("last", -1), ("last", 0)]


@pytest.mark.parametrize(("stage", "where"), KILL_POINTS,
                         ids=[f"{s}{'+' if w >= 0 else ''}{w}" for s, w in KILL_POINTS])
def test_sigkill_mid_write_leaves_no_partial_file_and_recovers(
    stage: str, where: int, writes_of_a_clean_run: int, tmp_path: Path,
) -> None:
    total = writes_of_a_clean_run
    if stage == "middle":
        stage, number = "temp", total // 2
    elif stage == "last":
        stage, number = ("temp", total) if where == -1 else ("done", total - 1)
    else:
        number = where
    ws = make_workspace(tmp_path / "ws")
    home = tmp_path / "home"
    _kill_at(ws, home, stage, number)
    store = ws / ".dsh-chapters"
    before = _check_no_partial_file(store)
    listed = subprocess.run(
        [sys.executable, "-m", "dsh_chapters", "-C", str(ws), "list", "--json"],
        env=_env(home), capture_output=True, text=True, timeout=60, check=True)
    assert len(json.loads(listed.stdout)) == before  # a temp file is never seen as a chapter
    again = subprocess.run(_archive_cmd(ws), env=_env(home), capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    _check_no_partial_file(store)
    _check_complete(ws, home)


@pytest.mark.parametrize("delay_ms", [250, 900])
def test_sigkill_at_an_arbitrary_moment_recovers(delay_ms: int, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    home = tmp_path / "home"
    proc = subprocess.Popen(_archive_cmd(ws), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            env=_env(home, DSH_CHAPTERS_FS_WRITE_PAUSE_MS="3"))
    time.sleep(delay_ms / 1000)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    if (ws / ".dsh-chapters").exists():
        _check_no_partial_file(ws / ".dsh-chapters")
    again = subprocess.run(_archive_cmd(ws), env=_env(home), capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    _check_complete(ws, home)
