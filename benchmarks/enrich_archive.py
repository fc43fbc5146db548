"""Enrichment's cost on the archive path (§1 invariant 1: the archive never waits on a model).

The archive's only enrichment work is to queue the new chapters (a small state write under the
writer lock) and, with an automatic trigger, to start a detached drain. This measures, side by
side in one run, the archive of one demo session into its own store:

- `off`: `enrichmentEnabled = false` (the baseline: no enrichment code runs);
- `queue`: a model configured, `enrichmentTrigger = manual` (queueing only);
- `idle`: a model configured, `enrichmentTrigger = idle` (queueing plus the idle waiter start);
and, alone, `note_archived` (the whole enrichment step of an archive) with 3 new chapters.

The model route points at a port nothing listens on: nothing on the archive path may call it,
so a model that is down costs the archive nothing either. Rounds alternate the modes.

    python benchmarks/enrich_archive.py [--sessions 20]

Writes medians (ms), the ratios to `off` and the workload to
`benchmarks/results/enrich_archive.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import socket
import statistics
import sys
import tempfile
import time
from importlib.resources import files
from pathlib import Path

from dsh_chapters.bootstrap import bootstrap, enrichment_lock
from dsh_chapters.services.archive import archive_and_log, read_transcript
from dsh_chapters.services.enrich import ENRICH_IDLE_LOCK, note_archived

RESULTS = Path(__file__).resolve().parent / "results" / "enrich_archive.json"
SAMPLE_SID = "5e1f0a2c-7d3b-4c8e-9a61-0d2f3b4c5a6e"
MODES = {
    "off": {"enrichmentEnabled": False},
    "queue": {"enrichmentTrigger": "manual"},
    "idle": {"enrichmentTrigger": "idle", "enrichmentIdleMs": 3_600_000},
}


def _closed_port() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _workspace(root: Path, mode: str, port: int) -> Path:
    ws = root / mode / "widgets"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/acme/widgets.git\n', encoding="utf-8")
    settings = {"enrichmentModel": "ollama/bench", "enrichmentBaseUrl":
                f"http://127.0.0.1:{port}/v1", **MODES[mode]}
    (ws / ".dsh-chapters").mkdir()
    (ws / ".dsh-chapters" / "config.toml").write_text(
        "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()), encoding="utf-8")
    return ws


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="archives per mode")
    args = parser.parse_args(argv)
    sample = (files("dsh_chapters") / "samples" / "demo-session.jsonl").read_text("utf-8")
    port = _closed_port()
    timings: dict[str, list[float]] = {m: [] for m in MODES}
    chapters: dict[str, int] = dict.fromkeys(MODES, 0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {"DSH_HOME": str(root / "home"), "DSH_CHAPTERS_HARNESS_ID": "bench",
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp}
        spaces = {m: _workspace(root, m, port) for m in MODES}
        try:
            for n in range(args.sessions):
                order = list(MODES) if n % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    sid = f"{n:08d}-0000-4000-8000-{list(MODES).index(mode):012d}"
                    path = root / f"{mode}-{n}.jsonl"
                    path.write_text(sample.replace(SAMPLE_SID, sid), encoding="utf-8")
                    app = bootstrap(spaces[mode], env)
                    transcript = read_transcript(app, path, "auto")
                    started = time.perf_counter()
                    report = archive_and_log(app, transcript)
                    timings[mode].append((time.perf_counter() - started) * 1000)
                    chapters[mode] += len(report.chapters)
            # The enrichment step alone, as the archive calls it (queue mode: no process start).
            app = bootstrap(spaces["queue"], env)
            for n in range(args.sessions * 5):
                fake = [f"q{n:06d}/chapters/{i:03d}-x.md" for i in range(1, 4)]
                started = time.perf_counter()
                note_archived(app, fake)
                timings.setdefault("noteArchived", []).append(
                    (time.perf_counter() - started) * 1000)
        finally:
            waiter = enrichment_lock(bootstrap(spaces["idle"], env), ENRICH_IDLE_LOCK)
            pid = waiter.holder_pid()
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
    medians = {m: round(statistics.median(t), 3) for m, t in timings.items()}
    figures = {
        "sessions": args.sessions,
        "chaptersPerMode": chapters,
        "medianMs": medians,
        "p90Ms": {m: round(sorted(t)[int(0.9 * (len(t) - 1))], 3) for m, t in timings.items()},
        "ratioToOff": {m: round(medians[m] / medians["off"], 3) for m in MODES},
        "noteArchivedShareOfOff": round(medians["noteArchived"] / medians["off"], 4),
        "modelCalls": 0,
        "python": platform.python_version(),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
