"""Atomic writes: temp file in the same directory, fsync, rename; never half a file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dsh_chapters_fs.atomic as atomic
import pytest
from dsh_chapters_fs.atomic import (
    StoreWriteError,
    is_temp_name,
    recording,
    sweep_temp_files,
    write_atomic,
    write_atomic_many,
)
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


def test_many_files_are_each_synced_before_their_rename_and_their_folders_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The durability order of one write each, kept with the syncs made together."""
    events: list[tuple[str, str]] = []
    fsync, replace = os.fsync, os.replace

    def logged_fsync(fd: int) -> None:
        fsync(fd)
        events.append(("sync", os.readlink(f"/proc/self/fd/{fd}")))

    def logged_replace(src: os.PathLike[str], dst: os.PathLike[str]) -> None:
        events.append(("sync-check", str(src)))
        replace(src, dst)
        events.append(("rename", str(dst)))

    monkeypatch.setattr(atomic.os, "fsync", logged_fsync)
    monkeypatch.setattr(atomic.os, "replace", logged_replace)
    files = [(tmp_path / f"d{i % 3}" / f"f{i}", f"text {i}".encode()) for i in range(7)]
    with recording() as written:
        write_atomic_many(files)
    assert written == [str(path) for path, _ in files]
    for path, data in files:
        assert path.read_bytes() == data
    for folder in {path.parent for path, _ in files}:
        assert not [n for n in os.listdir(folder) if is_temp_name(n)]
    for path, _ in files:
        temp = next(name for kind, name in events if kind == "sync-check"
                    and Path(name).parent == path.parent and f".{path.name}." in name)
        # the temp file's data reached the disk before its rename
        assert events.index(("sync", temp)) < events.index(("sync-check", temp))
    last_rename = max(i for i, (kind, _) in enumerate(events) if kind == "rename")
    folders_synced_after = {name for kind, name in events[last_rename:] if kind == "sync"}
    assert {str(path.parent) for path, _ in files} <= folders_synced_after
    # each new folder's entry was synced into its parent (tmp_path) before any file was made
    first_file = next(i for i, (kind, name) in enumerate(events) if kind == "sync"
                      and is_temp_name(Path(name).name))
    assert ("sync", str(tmp_path)) in events[:first_file]


def test_many_files_a_failure_names_the_path_and_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where a folder should be")
    files = [(tmp_path / "ok" / "a", b"a"), (tmp_path / "blocked" / "b", b"b"),
             (tmp_path / "ok" / "c", b"c")]
    with pytest.raises(StoreWriteError, match="blocked/b"):
        write_atomic_many(files)
    assert not [n for n in os.listdir(tmp_path / "ok") if is_temp_name(n)]
    assert not (tmp_path / "ok" / "a").exists()  # nothing was renamed before the failure
    assert (tmp_path / "blocked").read_text() == "a file where a folder should be"


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
