"""`chapters watch` idle cost and latency: CPU time read from /proc, never the wall clock.

A real `chapters watch` process watches a Claude Code project folder (CLAUDE_CONFIG_DIR in a
temporary directory) while a transcript grows turn by turn: how long after each turn's last
record its reply is in a chapter (the bound is 5 s), then the watcher's own CPU time
(utime + stime of /proc/<pid>/stat) over an idle window, with nothing written (the bound is
0.5 s over 30 s: it waits on inotify, it does not poll).

    python benchmarks/watch_idle.py [--idle-seconds 30 --turns 5]

Writes `benchmarks/results/watch_idle.json`.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `tests.app` importable
    sys.path.insert(0, str(ROOT))

from tests.app.watch_session import Watcher, append, lands, make_setup, turn  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "watch_idle.json"
IDLE_CPU_LIMIT_S = 0.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="watch-idle-") as tmp:
        setup = make_setup(Path(tmp))
        append(setup.transcript, turn(0, setup.ws)[:1])
        watcher = Watcher(setup)
        try:
            watcher.wait_for("watching")
            latencies = []
            for n in range(1, args.turns + 1):
                records = turn(n, setup.ws)
                append(setup.transcript, records)
                latencies.append(lands(setup, f"Renamed helper_{n} to tidy_{n}."))
            time.sleep(1.0)  # let the last archive's output settle before measuring
            before = watcher.cpu_seconds()
            time.sleep(args.idle_seconds)
            idle_cpu = watcher.cpu_seconds() - before
        finally:
            code = watcher.stop()
    figures = {
        "benchmark": "chapters watch: idle CPU and turn latency",
        "idleSeconds": args.idle_seconds,
        "cpuSecondsWhileIdle": round(idle_cpu, 3),
        "cpuLimitSeconds": IDLE_CPU_LIMIT_S,
        "turns": args.turns,
        "turnLandedSeconds": [round(x, 3) for x in latencies],
        "turnLandedMedianSeconds": round(statistics.median(latencies), 3),
        "turnLandedMaxSeconds": round(max(latencies), 3),
        "stopExitCode": code,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"idle CPU {idle_cpu:.3f} s over {args.idle_seconds:.0f} s (limit {IDLE_CPU_LIMIT_S}); "
          f"turn landed median {figures['turnLandedMedianSeconds']} s, "
          f"max {figures['turnLandedMaxSeconds']} s; SIGTERM exit {code}")
    return 0 if idle_cpu < IDLE_CPU_LIMIT_S and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
