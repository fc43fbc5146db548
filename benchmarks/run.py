"""Every benchmark, one command: `hatch run bench` (or `python benchmarks/run.py`).

Each benchmark is its own script that measures side by side in one run, reports medians and
ratios, and writes `benchmarks/results/<name>.json`. This runner runs them in turn (or only the
names given), gathers their figures into `benchmarks/results/summary.json`, and writes
`docs/performance.md` with its plot from them (`performance_page.py`).
`--quick` passes small sizes, for a smoke run; the figures the issues ask for come from a
full run. `--page-only` rewrites the page from the figures already there, running nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from performance_page import write_page

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

# name -> (script, full-size arguments, quick arguments)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "signatures": ("signatures.py", [], ["--turns", "100", "--repeat", "3"]),
    "composition_quality": ("composition_quality.py", [], []),
    "git_pool": ("git_pool.py", [], ["--chapters", "100", "--files", "500", "--repeat", "3"]),
    "search": ("search.py", [], ["--quick"]),
    "retrieval": ("retrieval.py", [], []),
    "treedx_pull": ("treedx_pull.py", [], ["--files", "500", "--repeat", "3"]),
    "enrich_archive": ("enrich_archive.py", [], ["--sessions", "5"]),
    "archive_scaling": ("archive_scaling.py", [], ["--chapters", "300", "--repeat", "3"]),
    "viewer": ("viewer.py", [], ["--size", "2000", "--samples", "10"]),
    "watch_idle": ("watch_idle.py", [], ["--idle-seconds", "5", "--turns", "2"]),
    # The real haystack ($DSH_HAYSTACK): every transcript through its reader, and the readers'
    # speed against main's on its largest files.
    "format_census": ("format_census.py", ["--docs"], ["--limit", "40"]),
    "reader_speed": ("reader_speed.py", [], ["--files", "2", "--rounds", "3"]),
    "redaction": ("redaction.py", [], ["--mb", "10", "--sessions", "3", "--rounds", "1"]),
    # One store of the real haystack ($DSH_HAYSTACK, $DSH_EVAL_DATA): import, first search,
    # search processes and in process, recall next to FTS5, at 400 MB and the whole 1.4 GB.
    "haystack": ("haystack.py", [], ["--sizes", "100"]),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"any of {', '.join(BENCHMARKS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--page-only", action="store_true",
                        help="only rewrite docs/performance.md from the last figures")
    args = parser.parse_args(argv)
    if args.page_only:
        print(f"page: {write_page()}")
        return 0
    names = args.names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    RESULTS.mkdir(exist_ok=True)
    # A run of some benchmarks keeps the others' last figures in the summary.
    previous = RESULTS / "summary.json"
    summary: dict[str, object] = json.loads(previous.read_text()) if previous.exists() else {}
    failed = []
    for name in names:
        script, full, quick = BENCHMARKS[name]
        if not (HERE / script).exists():
            print(f"{name}: {script} is missing", file=sys.stderr)
            failed.append(name)
            continue
        cmd = [sys.executable, str(HERE / script), *(quick if args.quick else full)]
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        started = time.perf_counter()
        done = subprocess.run(cmd, check=False)
        elapsed = round(time.perf_counter() - started, 1)
        result = RESULTS / f"{name}.json"
        entry: dict[str, object] = {"exit": done.returncode, "seconds": elapsed}
        if result.exists():
            entry["figures"] = json.loads(result.read_text())
        summary[name] = entry
        if done.returncode != 0:
            failed.append(name)
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    if (RESULTS / "search.json").exists():
        print(f"page: {write_page()}")
    print(
        f"figures: {RESULTS / 'summary.json'}"
        + (f" · failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
