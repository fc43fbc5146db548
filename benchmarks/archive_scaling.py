"""Archive cost against store size: one new turn into an empty store and into a 5,000-chapter one.

The archive path must be O(new turns), not O(corpus): its crash check reads the newest
chapter of the session, never every document, and the search index it keeps current reads
only the chapters it wrote (both stores have a current index, as a store in use does). Both
cases run side by side in one process, each trial on a fresh copy of its store, and the figure
is the ratio of medians (target ≤ 2×).
Writes `benchmarks/results/archive_scaling.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dsh_chapters.bootstrap import bootstrap
from dsh_chapters.services.archive import archive_and_log, read_transcript
from dsh_chapters.services.search import refresh_index

RESULTS = Path(__file__).resolve().parent / "results"
CWD = "/home/dev/work/widgets"


def _record(kind: str, session: str, n: int, text: str, parent: str | None) -> dict[str, Any]:
    uid = f"{session[:8]}-{kind}-{n:06d}"
    message: dict[str, object]
    if kind == "user":
        message = {"role": "user", "content": text}
    else:
        message = {"id": f"msg_{uid}", "type": "message", "role": "assistant",
                   "model": "claude-opus-4-1-20250805", "content": [{"type": "text", "text": text}],
                   "stop_reason": "end_turn", "stop_sequence": None}
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": CWD,
            "sessionId": session, "version": "2.1.37", "gitBranch": "main", "type": kind,
            "uuid": uid, "timestamp": f"2026-11-20T09:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
            "message": message}


def transcript(path: Path, session: str, turns: int, offset: int = 0) -> Path:
    """A Claude Code transcript of `turns` completed turns, each about a different file."""
    lines, parent = [], None
    for t in range(offset, offset + turns):
        # Words of their own per turn, so the composer opens a chapter for each (§4.4).
        words = " ".join(f"{w}{t}" for w in ("ledger", "parser", "cache", "socket", "quota"))
        user = _record("user", session, 2 * t, f"lib{t}/worker{t}.py {words}", parent)
        reply = _record("assistant", session, 2 * t + 1, f"lib{t}/worker{t}.py {words} done{t}",
                        user["uuid"])
        parent = reply["uuid"]
        lines += [json.dumps(user), json.dumps(reply)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _workspace(root: Path) -> Path:
    ws = root / "widgets"
    (ws / ".git").mkdir(parents=True)
    (ws / ".dsh-chapters").mkdir()
    (ws / ".dsh-chapters" / "config.toml").write_text(
        'projectKey = "github.com/dev/widgets"\nharnessId = "bench"\n', encoding="utf-8")
    return ws


def build_store(root: Path, chapters: int, per_session: int, env: dict[str, str]) -> Path:
    ws = _workspace(root)
    app = bootstrap(ws, env)
    sessions = max(1, chapters // per_session)
    for s in range(sessions):
        path = transcript(root / f"s{s}.jsonl", f"{s:08d}-0000-4000-8000-000000000000",
                          per_session)
        archive_and_log(app, read_transcript(app, path, "claude-code"))
    refresh_index(app, rebuild=False)  # a store in use has a current index: archive keeps it so
    return ws


def one_turn(base: Path, scratch: Path, env: dict[str, str], new_session: bool) -> float:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(base.parent, scratch, symlinks=True)
    ws = scratch / base.name
    session = "ffffffff-0000-4000-8000-000000000000" if new_session else \
        "00000000-0000-4000-8000-000000000000"
    path = transcript(scratch / "new.jsonl", session, 1, offset=10_000)
    app = bootstrap(ws, env)
    started = time.perf_counter()
    report = archive_and_log(app, read_transcript(app, path, "claude-code"))
    elapsed = time.perf_counter() - started
    assert report.turns_archived == 1, report.turns_archived
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", type=int, default=5000)
    parser.add_argument("--per-session", type=int, default=1,
                        help="turns per archived session (the composer may merge them)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-archive-"))
    env = {**os.environ, "DSH_HOME": str(root / "home")}
    try:
        started = time.perf_counter()
        empty = _workspace(root / "empty")
        refresh_index(bootstrap(empty, env), rebuild=False)
        full = build_store(root / "full", args.chapters, args.per_session, env)
        built = len(list((full / ".dsh-chapters").glob("*/chapters/*.md")))
        print(f"built a store of {built} chapters in {time.perf_counter() - started:.1f} s",
              flush=True)
        rows = {"empty": [], "full": []}
        for _ in range(args.repeat):  # interleaved, so machine noise hits both alike
            rows["empty"].append(one_turn(empty, root / "scratch-empty", env, True))
            rows["full"].append(one_turn(full, root / "scratch-full", env, True))
        medians = {k: statistics.median(v) * 1000 for k, v in rows.items()}
        ratio = medians["full"] / medians["empty"]
        figures = {"chapters": built, "repeat": args.repeat,
                   "emptyStoreMs": round(medians["empty"], 2),
                   "fullStoreMs": round(medians["full"], 2),
                   "ratio": round(ratio, 3), "target": "<= 2x", "met": ratio <= 2.0}
        print(f"one new turn: empty store {medians['empty']:.1f} ms, {built}-chapter store "
              f"{medians['full']:.1f} ms (median of {args.repeat}) -> {ratio:.2f}x (target <= 2x)")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "archive_scaling.json").write_text(json.dumps(figures, indent=2) + "\n")
        return 0 if figures["met"] else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
