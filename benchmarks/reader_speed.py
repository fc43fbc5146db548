"""Reader speed, side by side: this checkout's Claude Code and Codex readers against a git ref's.

The readers' per-line cost decides how fast `chapters import` can go, so a change to a reader
is measured against the code before it on the same files in the same run: the N largest
haystack files of each kind are read by both, alternately, R rounds; the median per file and
the MB/s over the set are reported, with the ratio. Times are the reading process's CPU
seconds (`time.process_time`), so other work on a shared machine counts less than in wall
time; files are read from the page cache after the first round.

    python benchmarks/reader_speed.py [HAYSTACK] [--against REF] [--files 4] [--rounds 5]

REF (default `main`) is checked out into a temporary `git worktree` (removed afterwards); its
readers are imported from there in a child process, ours from this checkout. Writes
`benchmarks/results/reader_speed.json`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "reader_speed.json"
SOURCES = ("packages/dsh-chapters-core/src", "adapters/dsh-chapters-harness/src")

# Run in a child: read each file once with the readers found first on sys.path, print seconds.
CHILD = """
import json, sys, time
from dsh_chapters_harness.claude_code import ClaudeCodeReader
from dsh_chapters_harness.codex import CodexReader
readers = {"claude-code": ClaudeCodeReader(), "codex": CodexReader()}
out = []
for kind, path in json.loads(sys.argv[1]):
    started = time.process_time()
    readers[kind].read(path)
    out.append(time.process_time() - started)
print(json.dumps(out))
"""


def largest(haystack: Path, per_kind: int) -> list[tuple[str, str, int]]:
    rows = []
    with (haystack / "index.tsv").open(newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            path = haystack / row["file"]
            rows.append((row["file"].split("/", 1)[0], str(path), path.stat().st_size))
    chosen = []
    for kind in ("claude-code", "codex"):
        mine = sorted((r for r in rows if r[0] == kind), key=lambda r: -r[2])
        chosen.extend(mine[:per_kind])
    return chosen


def run_child(tree: Path, files: list[tuple[str, str, int]]) -> list[float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(tree / s) for s in SOURCES)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps([f[:2] for f in files])],
                          env=env, check=True, capture_output=True, text=True)
    seconds: list[float] = json.loads(done.stdout)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("haystack", nargs="?", type=Path, default=None)
    parser.add_argument("--against", default="main", help="the git ref to compare with")
    parser.add_argument("--files", type=int, default=4, help="largest files per kind")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from format_census import find_haystack

    haystack = args.haystack or find_haystack()
    if haystack is None:
        print("no haystack: pass its directory or set DSH_HAYSTACK", file=sys.stderr)
        return 2
    files = largest(haystack, args.files)
    with tempfile.TemporaryDirectory(prefix="reader-speed-") as scratch:
        base = Path(scratch) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base),
                        args.against], check=True, capture_output=True)
        try:
            rounds: dict[str, list[list[float]]] = {"before": [], "after": []}
            for _ in range(args.rounds):  # alternate, so both see the same machine
                rounds["before"].append(run_child(base, files))
                rounds["after"].append(run_child(ROOT, files))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(base)], check=False, capture_output=True)
    per_file = []
    for index, (kind, path, size) in enumerate(files):
        before = statistics.median(r[index] for r in rounds["before"])
        after = statistics.median(r[index] for r in rounds["after"])
        per_file.append({"kind": kind, "file": Path(path).name, "megabytes": round(size / 1e6, 1),
                         "beforeMBps": round(size / 1e6 / before, 1),
                         "afterMBps": round(size / 1e6 / after, 1),
                         "ratio": round(before / after, 3)})
    summary = {}
    for kind in ("claude-code", "codex"):
        mine = [(i, f) for i, f in enumerate(files) if f[0] == kind]
        size = sum(f[2] for _, f in mine) / 1e6
        before = sum(statistics.median(r[i] for r in rounds["before"]) for i, _ in mine)
        after = sum(statistics.median(r[i] for r in rounds["after"]) for i, _ in mine)
        summary[kind] = {"megabytes": round(size, 1), "beforeMBps": round(size / before, 1),
                         "afterMBps": round(size / after, 1),
                         "afterOverBefore": round(before / after, 3)}
    figures = {"against": args.against, "rounds": args.rounds, "files": per_file,
               "kinds": summary}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    for row in per_file:
        print(f"{row['kind']:<12} {row['file']}  {row['megabytes']:>6} MB  "
              f"{row['beforeMBps']:>6} -> {row['afterMBps']:>6} MB/s  (x{row['ratio']})")
    for kind, s in summary.items():
        print(f"{kind}: {s['megabytes']} MB, {s['beforeMBps']} -> {s['afterMBps']} MB/s "
              f"(after/before speed x{s['afterOverBefore']}, medians of {args.rounds} rounds)")
    print(f"figures: {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
