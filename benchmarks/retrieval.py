"""Retrieval benchmark on real agent sessions: figures in `benchmarks/results/retrieval.json`.

    hatch run python benchmarks/retrieval.py [--data DIR] [--eval-dir DIR] [--session NAME]...

Runs the shared evaluation (`eval_retrieval.py`: archive each session with `chapters archive`
into a fresh workspace, ask every query with `chapters search --json --max-tokens 4000`) and,
in the same run and over the same kept chapter files, the peer yardstick (`baseline_fts.py`:
SQLite FTS5 `bm25()`, the query as an OR of its words). Reports recall@1 and recall@3 per
session and overall, side by side.

The transcripts are other people's text: they are regenerated into a temporary directory (see
the evaluation's README.md) and never committed; the kept workspaces are deleted at the end.
When the data is missing the benchmark says how to regenerate it and exits 0 with no figures,
so `hatch run bench` still runs on a machine without it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_EVAL_DIR = HERE.parent.parent / "shared" / "eval"  # the worktree's sibling `shared/`
TARGETS = {"recall_at_1_min": 0.75, "recall_at_3_min": 0.90}

_SESSION = re.compile(r"^-- (\S+): hit@1 (\d+)/(\d+)\s+hit@3 (\d+)/(\d+)")
_FTS_SESSION = re.compile(r"^-- (\S+): (\d+) chapters, hit@1 (\d+)/(\d+) hit@3 (\d+)/(\d+)")
_KEPT = re.compile(r"^kept workspaces under (.+)$")


def _eval_dir(arg: str) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("DSH_EVAL_DIR")
    return Path(env) if env else DEFAULT_EVAL_DIR


def _chapters_exe() -> str:
    near = Path(sys.executable).parent / "chapters"
    return str(near) if near.exists() else (shutil.which("chapters") or "chapters")


def _per_session(lines: list[str], pattern: re.Pattern[str],
                 fts: bool) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for line in lines:
        m = pattern.match(line)
        if not m:
            continue
        if fts:
            name, chapters, a1, n, a3, _ = m.groups()
            extra = {"chapters": int(chapters)}
        else:
            name, a1, n, a3, _ = m.groups()
            extra = {}
        k = int(n)
        out[name] = {"n": k, "recall@1": round(int(a1) / k, 3) if k else 0.0,
                     "recall@3": round(int(a3) / k, 3) if k else 0.0, **extra}
    return out


def _overall(per: dict[str, dict[str, float]]) -> dict[str, float]:
    n = sum(v["n"] for v in per.values())
    if not n:
        return {"n": 0, "recall@1": 0.0, "recall@3": 0.0}
    h1 = sum(v["recall@1"] * v["n"] for v in per.values())
    h3 = sum(v["recall@3"] * v["n"] for v in per.values())
    return {"n": n, "recall@1": round(h1 / n, 3), "recall@3": round(h3 / n, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get(
        "DSH_EVAL_DATA", str(Path(tempfile.gettempdir()) / "dsh-eval")))
    parser.add_argument("--eval-dir", default="", help="where eval_retrieval.py lives")
    parser.add_argument("--session", action="append", default=[])
    parser.add_argument("--out", default=str(HERE / "results" / "retrieval.json"))
    parser.add_argument("--log", default="", help="also write the per-query report here")
    args = parser.parse_args(argv)

    eval_dir = _eval_dir(args.eval_dir)
    script = eval_dir / "eval_retrieval.py"
    if not script.exists():
        print(f"retrieval: {script} not found; pass --eval-dir or set DSH_EVAL_DIR",
              file=sys.stderr)
        return 0
    data = Path(args.data)
    if not data.is_dir() or not any(data.glob("*.jsonl")):
        print(f"retrieval: no transcripts in {data}; regenerate them as {eval_dir / 'README.md'} "
              "says (fetch + git show), then rerun", file=sys.stderr)
        return 0

    cmd = [sys.executable, str(script), _chapters_exe(), "--data", str(data), "--keep"]
    for name in args.session:
        cmd += ["--session", name]
    ours = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = ours.stdout.splitlines()
    kept = next((m.group(1) for m in map(_KEPT.match, lines) if m), "")
    try:
        fts_lines: list[str] = []
        if kept:
            queries = eval_dir / "queries.json"
            if args.session:  # the baseline reads every session in the file: narrow it
                picked = [q for q in json.loads(queries.read_text(encoding="utf-8"))
                          if q["session"] in args.session]
                queries = Path(kept) / "queries.json"
                queries.write_text(json.dumps(picked), encoding="utf-8")
            fts = subprocess.run([sys.executable, str(eval_dir / "baseline_fts.py"), kept,
                                  "--queries", str(queries)],
                                 capture_output=True, text=True, check=False)
            fts_lines = fts.stdout.splitlines()
    finally:
        if kept:
            shutil.rmtree(kept, ignore_errors=True)

    per_ours = _per_session(lines, _SESSION, fts=False)
    per_fts = _per_session(fts_lines, _FTS_SESSION, fts=True)
    figures = {
        "chapters": {"overall": _overall(per_ours), "sessions": per_ours},
        "fts5_bm25": {"overall": _overall(per_fts), "sessions": per_fts},
        "targets": TARGETS,
    }  # counts only: the per-query lines quote the sessions, they go to --log, never here
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n",
                              encoding="utf-8")
    if args.log:
        Path(args.log).write_text(ours.stdout + "\n".join(fts_lines) + "\n", encoding="utf-8")

    print(f"{'session':<14} {'n':>3}  {'ours @1':>7} {'ours @3':>7}  {'fts5 @1':>7} {'fts5 @3':>7}")
    for name in [*per_ours, "overall"]:
        o = figures["chapters"]["overall"] if name == "overall" else per_ours[name]
        f = figures["fts5_bm25"]["overall"] if name == "overall" else per_fts.get(name, {})
        print(f"{name:<14} {o['n']:>3}  {o['recall@1']:>7.2f} {o['recall@3']:>7.2f}  "
              f"{f.get('recall@1', 0.0):>7.2f} {f.get('recall@3', 0.0):>7.2f}")
    print(f"figures: {args.out}")
    return 0 if ours.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
