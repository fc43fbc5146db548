"""Search at a real store's size: genuine public transcripts imported into ONE store, the way a
team's store fills after weeks of work. Figures in `benchmarks/results/haystack.json`.

    hatch run bench haystack                       # 400 MB and the whole haystack
    hatch run bench:python benchmarks/haystack.py --sizes 400 [--haystack DIR] [--data DIR]

The haystack is `../shared/eval/haystack.tsv`: 1,260 Claude Code and Codex transcripts (1.4 GB)
that their authors published. `fetch_haystack.py` assembles them into a folder (`--haystack`,
else `$DSH_HAYSTACK`, else `<tmp>/dsh-haystack`); the four sessions of the question set go in
with them (`--data`, else `$DSH_EVAL_DATA`, else `<tmp>/dsh-eval`; see the evaluation's
README.md). They are other people's text: regenerated, never committed. When they are missing
the benchmark says how to get them and exits 0 with no figures.

For each size, in a fresh workspace, measured side by side in one run:

- **import**: `chapters import claude-code|codex --source DIR --final`, then `chapters archive`
  of the four sessions: transcript MB per second of wall time, and the peak RSS of those
  processes (the search index is written as the chapters are, a batch at a time);
- **the first search after the import**: one `chapters search` process, which must build
  nothing (it says so on stderr when it does);
- **search processes**: every question of `queries.json` as `chapters search Q --json` (the
  default budget, as an agent asks), p50 and p95 of the wall time and the peak RSS;
- **in process**: the same questions through one composed App's search service, as the MCP
  server holds it: p50 and p95;
- **retrieval**: recall@1 / recall@3 (the answer in a top-1 / top-3 chapter or an artifact it
  links, `--max-tokens 4000`), next to SQLite FTS5 `bm25()` over the same chapter files;
- **the pool**: the store linked to a local-path pool and synced (every file published), then
  a second machine's first sync into an empty workspace and its first search (which must build
  nothing): wall time and peak RSS of each; then, in the linked workspace, every question again
  as a process, answered from the pool's copy as a team's search is: p50, p95 and recall.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DEFAULT_EVAL_DIR = HERE.parent.parent / "shared" / "eval"
SESSIONS = ("entire-cli-a", "pup-mcp", "entire-bmad", "cipher-box")
TIME = shutil.which("time", path="/usr/bin:/bin") or ""  # GNU time: a process's own peak RSS
TARGETS = {
    "import_mb_per_s_min": 15.0,
    "first_search_s_max": 1.0,
    "process_p50_ms_max": 150.0,
    "process_p95_ms_max": 400.0,
    "in_process_p50_ms_max": 20.0,
    "build_rss_mb_max": 400.0,
    "search_rss_mb_max": 100.0,
    "recall_at_1_min": 0.83,
    "recall_at_3_min": 0.97,
}


def _tmp_default(name: str) -> Path:
    return Path(tempfile.gettempdir()) / name


def _chapters_exe() -> str:
    near = Path(sys.executable).parent / "chapters"
    return str(near) if near.exists() else (shutil.which("chapters") or "chapters")


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str, str, int]:
    """(wall seconds, peak RSS MB, stdout, stderr, exit) of one process; the RSS is what GNU
    time reads from the kernel for that process alone."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        wrapped = ([TIME, "-f", "%M", "-o", rss_file.name, *cmd] if TIME else cmd)
        started = time.perf_counter()
        done = subprocess.run(wrapped, cwd=cwd, env=env, capture_output=True, check=False)
        wall = time.perf_counter() - started
        text = rss_file.read().strip().splitlines()
    rss = float(text[-1]) / 1024 if text and text[-1].isdigit() else 0.0
    return (wall, rss, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"), done.returncode)


def pick(haystack: Path, megabytes: float | None) -> list[tuple[str, Path, int]]:
    """(kind, file, bytes) of the haystack, in a stable pseudo-random order (by the file's
    sha256) so that a part is a cross-section of every repository, up to `megabytes`."""
    rows = list(csv.DictReader((haystack / "index.tsv").open(encoding="utf-8"), delimiter="\t"))
    out: list[tuple[str, Path, int]] = []
    total = 0
    for row in sorted(rows, key=lambda r: hashlib.sha256(r["file"].encode()).hexdigest()):
        path = haystack / row["file"]
        if not path.is_file():
            continue
        size = path.stat().st_size
        if megabytes is not None and total + size > megabytes * 1e6:
            continue
        out.append((row["file"].split("/", 1)[0], path, size))
        total += size
    return out


def stage(files: list[tuple[str, Path, int]], root: Path) -> dict[str, Path]:
    """One folder per harness of links to the picked files, named as `--source` finds them
    (Codex rollouts are `rollout-*.jsonl`)."""
    dirs: dict[str, Path] = {}
    for kind, path, _ in files:
        folder = dirs.setdefault(kind, root / kind)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"rollout-{path.name}" if kind == "codex" else path.name
        (folder / name).symlink_to(path)
    return dirs


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[k]


def fts5_recall(ws: Path, dsh: Path, queries: list[dict[str, Any]], ev: Any) -> dict[str, float]:
    """SQLite FTS5 `bm25()` over the same chapter files (frontmatter and body), the question as
    an OR of its words, as `baseline_fts.py` asks it."""
    files = sorted((ws / ".dsh-chapters").glob("*/chapters/*.md"))
    db = sqlite3.connect(":memory:")
    db.execute("create virtual table c using fts5(path, body, tokenize='unicode61')")
    for f in files:
        db.execute("insert into c values (?, ?)", (str(f), ev.read(f)))
    h1 = h3 = 0
    times = []
    for q in queries:
        words = [w for w in re.findall(r"\w+", q["query"].lower()) if len(w) > 1]
        expr = " OR ".join(f'"{w}"' for w in words)
        started = time.perf_counter()
        rows = db.execute("select path from c where c match ? order by bm25(c) limit 3",
                          (expr,)).fetchall()
        times.append(time.perf_counter() - started)
        rank = next((i for i, (p,) in enumerate(rows, 1) if ev.contains(q["answer"], Path(p), ws,
                                                                        dsh)), 0)
        h1 += rank == 1
        h3 += rank in (1, 2, 3)
    n = len(queries)
    return {"recall_at_1": round(h1 / n, 3), "recall_at_3": round(h3 / n, 3),
            "query_ms_p50": round(statistics.median(times) * 1000, 1)}


def in_process(ws: Path, env: dict[str, str], queries: list[dict[str, Any]]) -> list[float]:
    """Each question through one composed App's search service, as the MCP server holds it."""
    from dsh_chapters.bootstrap import bootstrap
    from dsh_chapters.services.search import search_answer
    from dsh_chapters_core.search.service import SearchRequest

    app = bootstrap(ws, env)
    times = []
    for _ in range(2):  # the first round warms what a long-lived server has warm
        times = []
        for q in queries:
            request = SearchRequest(query=q["query"], project_key=app.identity.project_key)
            started = time.perf_counter()
            search_answer(app, request)
            times.append(time.perf_counter() - started)
    return times


def workspace(ws: Path, home: Path) -> tuple[Path, Path]:
    """An empty project (a git repository with an origin, which names its projectKey) and its
    DSH_HOME: every machine of the benchmark gets one, so all share one project."""
    ws.mkdir()
    home.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    subprocess.run(["git", "remote", "add", "origin", "https://github.com/example/haystack.git"],
                   cwd=ws, check=True)
    return ws, home


class Asked(NamedTuple):
    """The questions asked as processes: each one's wall time and peak RSS, the share answered
    in the top 1 / top 3, and the doors the answers named."""

    seconds: list[float]
    peaks: list[float]
    recall_at_1: float
    recall_at_3: float
    doors: list[str]


def ask(ws: Path, home: Path, env: dict[str, str], queries: list[dict[str, Any]],
        ev: Any) -> Asked:
    """Every question as a `chapters search` process at the default budget, timed (as an agent
    asks), then again with `--max-tokens 4000` for recall: the answer in a top-1 / top-3
    chapter or an artifact it links, by the evaluation's own test."""
    exe = _chapters_exe()
    seconds, peaks, doors = [], [], set()
    h1 = h3 = 0
    for q in queries:
        took, peak, _, _, _ = timed([exe, "search", q["query"], "--json"], ws, env)
        seconds.append(took)
        peaks.append(peak)
        _, _, out, _, _ = timed([exe, "search", q["query"], "--json", "--max-tokens", "4000"],
                                ws, env)
        try:
            answer = json.loads(out)
        except ValueError:
            answer = {}
        doors.add(str(answer.get("door", "")))
        rank = next((i for i, m in enumerate(answer.get("matches", [])[:3], 1)
                     if ev.contains(q["answer"], ws / m["path"], ws, home)), 0)
        h1 += rank == 1
        h3 += rank in (1, 2, 3)
    n = len(queries)
    return Asked(seconds, peaks, round(h1 / n, 3), round(h3 / n, 3), sorted(doors))


def linked_search(ws: Path, home: Path, env: dict[str, str], queries: list[dict[str, Any]],
                  ev: Any) -> dict[str, Any]:
    """The questions asked again once the store is linked and synced, as a team asks them:
    each answered from the pool's copy (the mirror), with this machine's unpublished chapters
    beside it. Its p50 / p95 and recall@1 / @3, and the doors the answers named."""
    asked = ask(ws, home, env, queries, ev)
    return {"process_ms_p50": round(percentile(asked.seconds, 0.5) * 1000, 1),
            "process_ms_p95": round(percentile(asked.seconds, 0.95) * 1000, 1),
            "recall_at_1": asked.recall_at_1, "recall_at_3": asked.recall_at_3,
            "doors": asked.doors}


def pool_figures(root: Path, ws: Path, env: dict[str, str], query: str) -> dict[str, Any]:
    """The store shared through a local-path pool, as a team's is: this machine's first sync
    (every file published), then a second machine's first sync into an empty workspace (every
    file cloned, checked and copied in, both its search indexes written) and its first search,
    which must build nothing. Wall time and peak RSS of each process."""
    exe = _chapters_exe()
    pool = root / "pool.git"
    steps: dict[str, Any] = {}

    def run(name: str, cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
        seconds, peak, _, err, code = timed([exe, *cmd], cwd, env)
        if code != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({code}): {err[-400:]}")
        steps[name] = {"s": round(seconds, 1), "rss_mb": round(peak, 1)}
        print(f"  {name}: {seconds:.1f} s, {peak:.0f} MB RSS", flush=True)
        return err

    subprocess.run([exe, "link", str(pool)], cwd=ws, env=env, check=True, capture_output=True)
    run("first_sync", ["sync"], ws, env)
    # `chapters status` reads each chapter of ours once, then only what changed (filefacts)
    run("status_first", ["status"], ws, env)
    run("status_again", ["status"], ws, env)
    other, other_home = workspace(root / "ws2", root / "dsh_home2")
    env2 = {**env, "DSH_HOME": str(other_home), "DSH_CHAPTERS_HARNESS_ID": "bench-two"}
    subprocess.run([exe, "link", str(pool)], cwd=other, env=env2, check=True,
                   capture_output=True)
    run("second_machine_sync", ["sync"], other, env2)
    said = run("second_machine_first_search", ["search", query, "--json"], other, env2)
    steps["second_machine_first_search"]["said"] = said.strip()
    steps["pool_mb"] = round(sum(p.stat().st_size for p in pool.rglob("*") if p.is_file())
                             / 1e6, 1)
    return steps


def run_size(label: str, files: list[tuple[str, Path, int]], data: Path,
             queries: list[dict[str, Any]], ev: Any, keep: Path | None) -> dict[str, Any]:
    exe = _chapters_exe()
    root = Path(tempfile.mkdtemp(prefix=f"haystack-{label}-", dir=keep))
    ws, home = workspace(root / "ws", root / "dsh_home")
    env = {**os.environ, "DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": "bench"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # processes load bytecode, as installed
    dirs = stage(files, root / "sources")
    steps: list[tuple[list[str], int]] = [
        ([exe, "import", kind, "--source", str(folder), "--final", "--json"],
         sum(s for k, _, s in files if k == kind)) for kind, folder in sorted(dirs.items())]
    for name in SESSIONS:
        path = data / f"{name}.jsonl"
        steps.append(([exe, "archive", str(path), "--harness", "claude-code", "--final"],
                      path.stat().st_size))
    wall = rss = 0.0
    transcript_bytes = 0
    by_harness: dict[str, list[float]] = {}  # harness: [bytes, seconds] of its import
    for cmd, size in steps:
        seconds, peak, _, err, code = timed(cmd, ws, env)
        if code not in (0, 1):  # 1: some session unreadable (reported, the rest archived)
            raise SystemExit(f"{' '.join(cmd[1:3])} failed ({code}): {err[-400:]}")
        wall += seconds
        rss = max(rss, peak)
        transcript_bytes += size
        if cmd[1] == "import":
            by_harness[cmd[2]] = [size, seconds]
        print(f"  {' '.join(cmd[1:3])}: {size / 1e6:.0f} MB in {seconds:.1f} s, "
              f"{peak:.0f} MB RSS", flush=True)
    chapters = sorted((ws / ".dsh-chapters").glob("*/chapters/*.md"))
    sizes = sorted(p.stat().st_size for p in chapters)
    first_s, first_rss, _, first_err, _ = timed(
        [exe, "search", queries[0]["query"], "--json"], ws, env)
    asked = ask(ws, home, env, queries, ev)
    process, peaks = asked.seconds, [first_rss, *asked.peaks]
    inside = in_process(ws, env, queries)
    fts = fts5_recall(ws, home, queries, ev)
    index_mb = sum(p.stat().st_size for p in (ws / ".dsh-chapters" / "cache").glob(
        "search-*.sqlite*")) / 1e6
    shared = pool_figures(root, ws, env, queries[0]["query"])
    shared["linked_search"] = linked_search(ws, home, env, queries, ev)
    n = len(queries)
    result = {
        "transcripts": len(files) + len(SESSIONS),
        "transcript_mb": round(transcript_bytes / 1e6, 1),
        "chapters": len(chapters),
        "chapter_mb": round(sum(sizes) / 1e6, 1),
        "chapter_kb": {"median": round(percentile(sizes, 0.5) / 1e3, 1),
                       "p90": round(percentile(sizes, 0.9) / 1e3, 1),
                       "p99": round(percentile(sizes, 0.99) / 1e3, 1),
                       "max": round(sizes[-1] / 1e3, 1) if sizes else 0},
        "index_mb": round(index_mb, 1),
        "import_s": round(wall, 1),
        "import_mb_per_s": round(transcript_bytes / 1e6 / wall, 2) if wall else 0.0,
        "import_rss_mb": round(rss, 1),
        "import_by_harness": {kind: {"mb": round(size / 1e6, 1), "s": round(seconds, 1),
                                     "mb_per_s": round(size / 1e6 / seconds, 2) if seconds
                                     else 0.0}
                              for kind, (size, seconds) in sorted(by_harness.items())},
        "first_search_s": round(first_s, 3),
        "first_search_said": first_err.strip(),
        "process_ms_p50": round(percentile(process, 0.5) * 1000, 1),
        "process_ms_p95": round(percentile(process, 0.95) * 1000, 1),
        "search_rss_mb": round(max(peaks), 1),
        "in_process_ms_p50": round(percentile(inside, 0.5) * 1000, 1),
        "in_process_ms_p95": round(percentile(inside, 0.95) * 1000, 1),
        "recall_at_1": asked.recall_at_1,
        "recall_at_3": asked.recall_at_3,
        "fts5": fts,
        "questions": n,
        "pool": shared,
    }
    if keep is None:
        shutil.rmtree(root, ignore_errors=True)
    else:
        result["kept"] = str(root)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--haystack", default=os.environ.get("DSH_HAYSTACK", ""))
    parser.add_argument("--data", default=os.environ.get("DSH_EVAL_DATA", ""))
    parser.add_argument("--eval-dir", default=os.environ.get("DSH_EVAL_DIR", ""))
    parser.add_argument("--sizes", default="400,full",
                        help="comma-separated MB of transcripts, or `full` (default 400,full)")
    parser.add_argument("--keep", default="", help="keep the workspaces under this folder")
    parser.add_argument("--out", default=str(RESULTS / "haystack.json"))
    args = parser.parse_args(argv)
    haystack = Path(args.haystack) if args.haystack else _tmp_default("dsh-haystack")
    data = Path(args.data) if args.data else _tmp_default("dsh-eval")
    eval_dir = Path(args.eval_dir) if args.eval_dir else DEFAULT_EVAL_DIR
    missing = [str(p) for p in (haystack / "index.tsv", *(data / f"{s}.jsonl" for s in SESSIONS))
               if not p.is_file()]
    if missing or not (eval_dir / "eval_retrieval.py").is_file():
        print("haystack: the real transcripts are not here (" + ", ".join(missing[:3]) + "); "
              "assemble them as ../shared/eval/README.md says (fetch_haystack.py into "
              "$DSH_HAYSTACK, the four sessions into $DSH_EVAL_DATA). No figures this run.")
        return 0
    sys.path.insert(0, str(eval_dir))
    import eval_retrieval as ev  # the evaluation's own answer test

    queries = json.loads((eval_dir / "queries.json").read_text(encoding="utf-8"))
    keep = Path(args.keep) if args.keep else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"targets": TARGETS, "sizes": {},
                               "machine": {"cores": os.cpu_count(),
                                           "load": round(os.getloadavg()[0], 2),
                                           "python": sys.version.split()[0],
                                           "sqlite": sqlite3.sqlite_version},
                               "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for size in args.sizes.split(","):
        megabytes = None if size == "full" else float(size)
        files = pick(haystack, megabytes)
        label = "full" if megabytes is None else f"{size}mb"
        print(f"== haystack {label}: {len(files)} transcripts, "
              f"{sum(s for _, _, s in files) / 1e6:.0f} MB", flush=True)
        result = run_size(label, files, data, queries, ev, keep)
        figures["sizes"][label] = result
        print(json.dumps(result, indent=2), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
