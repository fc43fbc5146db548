"""The writer lock across real processes: exclusion, the holder file, a stale holder."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.ports.store import WriterLock
from dsh_chapters_fs.atomic import write_atomic
from dsh_chapters_fs.lock import FileWriterLock, pid_alive, read_generation

HOLD_SCRIPT = r"""
import sys, time
from dsh_chapters_fs.lock import FileWriterLock
lock = FileWriterLock(sys.argv[1], stale_seconds=float(sys.argv[2]))
with lock.hold(5):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder(store: Path, stale: float = 600) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, str(store), str(stale)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.stdout is not None
    proc.stdout.close()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=10)
    assert not pid_alive(proc.pid)
    return proc.pid


def test_hold_writes_and_removes_the_holder_file(tmp_path: Path) -> None:
    lock: WriterLock = FileWriterLock(tmp_path, stale_seconds=600)
    assert lock.state().held is False
    with lock.hold(1):
        state = lock.state()
        assert state.held and state.pid == os.getpid() and not state.stale
        holder = json.loads((tmp_path / "state" / "writer.holder").read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with lock.hold(1):  # nested in the same process: no self-deadlock
            assert lock.state().held
    assert not (tmp_path / "state" / "writer.holder").exists()
    assert lock.state().held is False


@pytest.mark.slow
def test_another_process_waits_then_refuses_with_the_holder(tmp_path: Path) -> None:
    proc = _holder(tmp_path)
    try:
        lock = FileWriterLock(tmp_path, stale_seconds=600)
        state = lock.state()
        assert state.held and state.pid == proc.pid and not state.stale
        started = time.monotonic()
        with pytest.raises(ChaptersError) as refused, lock.hold(0.3):
            pass
        assert time.monotonic() - started >= 0.3
        assert f"pid {proc.pid}" in str(refused.value) and "waited 0.3 s" in str(refused.value)
    finally:
        _kill(proc)


@pytest.mark.slow
def test_a_killed_holder_frees_the_lock_and_is_reported_stale_once_old(tmp_path: Path) -> None:
    proc = _holder(tmp_path, stale=1)
    _kill(proc)
    lock = FileWriterLock(tmp_path, stale_seconds=1)
    state = lock.state()
    assert not state.held and state.pid == proc.pid
    assert not state.stale  # dead, but younger than lockStaleSeconds
    holder_file = tmp_path / "state" / "writer.holder"
    holder = json.loads(holder_file.read_text())
    holder["startedEpoch"] -= 5  # age it past lockStaleSeconds
    holder_file.write_text(json.dumps(holder))
    state = lock.state()
    assert state.stale and state.age_seconds >= 5
    with lock.hold(1):
        assert lock.took_over is not None and lock.took_over.pid == proc.pid
        assert lock.state().pid == os.getpid()
    assert lock.state().pid == 0 and not lock.state().stale


def test_a_live_old_holder_is_never_stale(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "writer.holder").write_text(json.dumps(
        {"pid": os.getpid(), "host": socket.gethostname(), "startedAt": "x",
         "startedEpoch": time.time() - 10_000}))
    assert not FileWriterLock(tmp_path, stale_seconds=1).state().stale
    (state_dir / "writer.holder").write_text(json.dumps(
        {"pid": _dead_pid(), "host": socket.gethostname(), "startedAt": "x",
         "startedEpoch": time.time() - 10_000}))
    assert FileWriterLock(tmp_path, stale_seconds=1).state().stale
    (state_dir / "writer.holder").write_text(json.dumps(
        {"pid": _dead_pid(), "host": "another-machine", "startedAt": "x",
         "startedEpoch": time.time() - 10_000}))
    # another host's pid cannot be checked from here: never declared dead
    assert not FileWriterLock(tmp_path, stale_seconds=1).state().stale


def test_a_soft_lock_left_by_a_dead_stale_holder_is_broken(tmp_path: Path, monkeypatch) -> None:
    import filelock

    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "writer.holder").write_text(json.dumps(
        {"pid": _dead_pid(), "host": socket.gethostname(), "startedAt": "x",
         "startedEpoch": time.time() - 10_000}))
    # A filesystem without flock: filelock falls back to a soft lock, which a dead writer leaves.
    monkeypatch.setattr(filelock, "FileLock", filelock.SoftFileLock)
    (state_dir / "writer.lock").write_text("")
    lock = FileWriterLock(tmp_path, stale_seconds=1)
    with lock.hold(0.2):
        assert lock.took_over is not None


def test_each_writer_section_numbers_itself_in_the_store_log_as_it_starts(tmp_path: Path) -> None:
    """Search's freshness rule reads this number: it moves before a writer writes a byte, once
    per outermost section; a section that wrote nothing takes its line back (the store stays
    byte-identical); a damaged line restarts the count from the clock, never from a number
    an index may have recorded."""
    lock = FileWriterLock(tmp_path, stale_seconds=600)
    log = tmp_path / "logs/chapters.log"
    assert read_generation(tmp_path) == ""  # no writer yet: unknown
    with lock.hold(5):
        first = read_generation(tmp_path)
        assert first.isdigit()
        with lock.hold(5):  # nested in the same process: the same section
            assert read_generation(tmp_path) == first
    assert not log.exists()  # that section wrote nothing: its line was taken back
    with lock.hold(5):
        write_atomic(tmp_path / "s1/chapters/001-a.md", b"a chapter\n")
        written = read_generation(tmp_path)
    assert read_generation(tmp_path) == written
    kept = log.read_bytes()
    assert json.loads(kept.splitlines()[-1])["event"] == "writer"
    with lock.hold(5):
        assert int(read_generation(tmp_path)) == int(written) + 1
    assert log.read_bytes() == kept  # nothing written: back to the byte
    log.write_bytes(kept + b'{"event":"writer","generation":"x"}\n')
    assert read_generation(tmp_path) == ""
    with lock.hold(5):
        write_atomic(tmp_path / "s1/chapters/002-b.md", b"another\n")
    assert int(read_generation(tmp_path)) > int(written) + 1


def test_a_section_tells_what_it_wrote_as_it_ends_under_its_own_number(tmp_path: Path) -> None:
    """The index is told where documents are written: each outermost section that wrote
    hears its own store paths (relative, sorted, once) while the lock is still held."""
    store = tmp_path / ".dsh-chapters"
    told: list[tuple[str, list[str], bool]] = []
    lock = FileWriterLock(store, stale_seconds=60, on_written=lambda paths: told.append(
        (read_generation(store), paths, lock.state().held)))
    with lock.hold(1.0):
        write_atomic(store / "s1/chapters/002-b.md", b"b")
        with lock.hold(1.0):  # nested: one section, one report
            write_atomic(store / "s1/chapters/001-a.md", b"a")
        write_atomic(store / "s1/chapters/001-a.md", b"a again")
        write_atomic(tmp_path / "outside.txt", b"not the store's")
    first = read_generation(store)
    assert told == [(first, ["s1/chapters/001-a.md", "s1/chapters/002-b.md"], True)]
    with lock.hold(1.0):
        pass  # wrote nothing: no report, and its number is taken back
    assert len(told) == 1 and read_generation(store) == first
    write_atomic(store / "s1/chapters/003-c.md", b"c")  # outside any section: not recorded
    with lock.hold(1.0):
        write_atomic(store / "edits/h/curation.jsonl", b"{}\n")
    assert told[1][1] == ["edits/h/curation.jsonl"] and int(told[1][0]) == int(first) + 1


def test_a_failed_report_never_keeps_the_lock(tmp_path: Path) -> None:
    store = tmp_path / ".dsh-chapters"

    def refuse(paths: list[str]) -> None:
        raise OSError(28, "No space left on device")

    lock = FileWriterLock(store, stale_seconds=60, on_written=refuse)
    with lock.hold(1.0):
        write_atomic(store / "s1/chapters/001-a.md", b"a")
    assert not lock.state().held
    with lock.hold(1.0):  # taken again at once
        pass
