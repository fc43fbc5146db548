"""Atomic writes: temp file in the same directory, fsync, rename; never half a file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dsh_chapters_fs.atomic import is_temp_name, sweep_temp_files, write_atomic
from dsh_chapters_fs.clock import SystemClock
from dsh_chapters_fs.storelog import StoreLog


def test_write_creates_parents_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.md"
    write_atomic(target, b"hello")
    assert target.read_bytes() == b"hello"
    assert os.listdir(target.parent) == ["file.md"]
    write_atomic(target, b"again")
    assert target.read_bytes() == b"again"


def test_exclusive_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "001-x.md"
    write_atomic(target, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        write_atomic(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["001-x.md"]


def test_modes_are_exact_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_atomic(tmp_path / "public", b"x", mode=0o644)
    finally:
        os.umask(old)
    assert (tmp_path / "public").stat().st_mode & 0o777 == 0o644


KILL_MID_WRITE = r"""
import os, sys
from pathlib import Path
from dsh_chapters_fs.atomic import write_atomic
write_atomic(Path(sys.argv[1]), b"x" * 1_000_000)
"""


@pytest.mark.slow
def test_a_writer_killed_before_the_rename_leaves_only_a_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "001-big.md"
    env = {**os.environ, "DSH_CHAPTERS_FS_TRACE_WRITES": "1",
           "DSH_CHAPTERS_FS_WRITE_PAUSE_MS": "60000"}
    proc = subprocess.Popen([sys.executable, "-c", KILL_MID_WRITE, str(target)], env=env,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("fs-write temp ")
    proc.kill()
    proc.wait(timeout=10)
    proc.stderr.close()
    assert not target.exists()
    names = os.listdir(tmp_path)
    assert len(names) == 1 and is_temp_name(names[0])
    assert sweep_temp_files(tmp_path) == 1 and os.listdir(tmp_path) == []


def test_store_log_lines_and_the_clock(tmp_path: Path) -> None:
    log = StoreLog(tmp_path)
    clock = SystemClock()
    assert log.last("archive") is None
    log.write("archive", clock.now(), sessionId="s1", chapters=["a"])
    log.write("other", clock.now())
    with log.path.open("a") as handle:
        handle.write('{"cut short')  # a crash mid-line is skipped on read
    entry = log.last("archive")
    assert entry is not None and entry["sessionId"] == "s1" and entry["at"].endswith("Z")
    assert [e["event"] for e in log.entries()] == ["archive", "other"]
    assert clock.monotonic() <= clock.monotonic()
