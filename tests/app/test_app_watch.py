"""`chapters watch` as a user runs it: a real process, a Claude Code transcript that grows turn by
turn, each completed turn in the store within 5 s, SIGTERM ends it cleanly; `--once` archives
what is pending and exits 0. The watcher's CPU time over 30 idle seconds is read from
/proc/<pid>/stat and reported (a test property and a line on the terminal;
`python benchmarks/watch_idle.py` writes the same figures to benchmarks/results/), never timed
on the wall clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.app.watch_session import (
    Setup,
    Watcher,
    append,
    lands,
    make_setup,
    turn,
)
from tests.fixtures import make_real_shapes as shapes

pytestmark = pytest.mark.slow

IDLE_S = 30.0
IDLE_CPU_LIMIT_S = 0.5


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return make_setup(tmp_path)


@pytest.fixture
def watcher(setup: Setup) -> Iterator[Watcher]:
    w = Watcher(setup)
    yield w
    if w.proc.poll() is None:
        w.proc.kill()
        w.proc.wait(timeout=10)
    assert w.proc.stdout is not None
    w.proc.stdout.close()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads CPU time from /proc")
def test_watch_archives_each_turn_as_it_completes_and_stops_on_sigterm(
    setup: Setup, watcher: Watcher, record_property: Callable[[str, object], None]
) -> None:
    append(setup.transcript, turn(1, setup.ws)[:1])  # a session has begun, nothing complete
    ready = watcher.wait_for("watching")
    assert str(setup.transcript.parent.parent) in ready["roots"][0]
    latencies = []
    for n in (1, 2, 3):
        records = turn(n, setup.ws)
        append(setup.transcript, records[1:] if n == 1 else records)
        latencies.append(lands(setup, f"Renamed helper_{n} to tidy_{n}."))
        watcher.wait_for("archived")
    body = setup.bodies()
    for n in (1, 2, 3):  # each turn once, nothing archived twice
        assert body.count(f"Step {n}: rename helper_{n}") == 1

    # Idle: the watcher waits on inotify; its CPU time over 30 s comes from /proc.
    before = watcher.cpu_seconds()
    time.sleep(IDLE_S)
    idle_cpu = watcher.cpu_seconds() - before
    record_property("watch_idle_cpu_seconds", round(idle_cpu, 3))
    record_property("watch_turn_landed_seconds", [round(x, 2) for x in latencies])
    sys.stderr.write(f"\nchapters watch: {idle_cpu:.3f} s CPU over {IDLE_S:.0f} idle seconds; "
                     f"turns landed after {', '.join(f'{x:.2f}' for x in latencies)} s\n")
    assert idle_cpu < IDLE_CPU_LIMIT_S, f"{idle_cpu:.3f} s of CPU over {IDLE_S} idle seconds"

    # A burst of writes after the idle period is still seen, then SIGTERM ends it cleanly.
    append(setup.transcript, turn(4, setup.ws))
    lands(setup, "Renamed helper_4 to tidy_4.")
    assert watcher.stop() == 0
    assert watcher.wait_for("stopped", timeout=10)["event"] == "stopped"


def test_once_archives_what_is_pending_and_exits_0(setup: Setup) -> None:
    append(setup.transcript, turn(1, setup.ws) + turn(2, setup.ws))
    done = subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(setup.ws), "watch",
                           "--once", "--json"], env=setup.env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in done.stdout.splitlines()]
    assert row["event"] == "archived" and row["turnsArchived"] == 2
    assert "Renamed helper_2 to tidy_2." in setup.bodies()
    again = subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(setup.ws), "watch",
                            "--once"], env=setup.env, capture_output=True, text=True,
                           timeout=120, check=False)
    assert again.returncode == 0 and again.stdout == ""  # nothing new: nothing said


def test_once_finalizes_an_idle_session_of_this_project(setup: Setup) -> None:
    v1 = shapes.ROOT / "claude-code" / shapes.PROJECT_DIR / f"{shapes.V1_SESSION}.jsonl"
    idle = setup.transcript.parent / v1.name
    idle.write_bytes(v1.read_bytes())
    hours_ago = time.time() - 3 * 3600
    os.utime(idle, (hours_ago, hours_ago))
    done = subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(setup.ws), "watch",
                           "--once", "--json", "--harness", "claude-code"], env=setup.env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in done.stdout.splitlines()]
    assert row["final"] is True and row["turnsArchived"] == 3
    assert shapes.V1_REPLIES[2] in setup.bodies()
