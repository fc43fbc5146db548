"""Viewer benchmark (`chapters serve`): figures in `benchmarks/results/viewer.json`.

    hatch run python benchmarks/viewer.py --size 10000

On a synthetic store of `--size` documents (the search benchmark's seeded generator) plus one
session of chapters in the core's own rendered shape (turns, messages, tool calls, long tool
results), through the real ASGI app (`dsh_chapters_web`) over the real `AppViewer`:
- server time (the app's `Server-Timing`, the handler from first byte in to response built) of
  the chapter page and of the search page, p50 / p95 / max, HTML and JSON;
- the first search, which builds the index and the SQLite cache, reported apart (a one-off);
- the sessions page (every chapter of the store listed), its first load and warm loads;
- the background pass that keeps the index current (`viewerIndexRefreshMs`), and the search
  page without it (each request walking the store first, as `chapters search`), reported.

Target: a chapter page and a search page render in ≤ 200 ms server time (p95) on a 10k store.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dsh_chapters.bootstrap import bootstrap
from dsh_chapters.services.web_viewer import AppViewer
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_web.server import make_app
from starlette.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search import generate, queries  # the sibling benchmark's seeded corpus

HERE = Path(__file__).resolve().parent
TARGET_MS = 200.0
PORT = 8765
SHAPED_SESSION = "5eed0000-0000-4000-8000-000000000001"


def shaped_chapter(rnd: random.Random, number: int, result_lines: int, project_key: str) -> str:
    """A chapter as the core renders one: `**User:**` fences, `→ tool`, `← result` fences."""
    parts = [f"## Turn · seq {number * 10}–{number * 10 + 9} · 2026-11-30T09:00:00Z\n"]
    for turn in range(4):
        parts.append(f"**User:**\n\n```text\nStep {turn}: check the retry loop in module "
                     f"{rnd.randint(1, 99)}.\n```\n")
        parts.append('→ tool read_file({"path": "src/widgets/http_client.py"})\n')
        lines = "\n".join(f"    line {n}: retry attempt {rnd.randint(1, 9)} backoff "
                          f"{rnd.random():.3f}" for n in range(result_lines))
        parts.append(f"← result read_file:\n\n```text\n{lines}\n```\n")
        parts.append("**Assistant:**\n\n```text\nThe retry loop breaks on 5xx; "
                     "it should back off and continue.\n```\n")
    body = "\n".join(parts)
    return dump_frontmatter({
        "kind": "chapter", "title": f"Shaped chapter {number}", "sessionId": SHAPED_SESSION,
        "projectKey": project_key,
        "harnessId": "hostA", "date": "2026-11-30T09:00:00Z", "topics": ["retry", "backoff"],
        "messages": {"user": 4, "assistant": 4, "tool": 4},
        "generated": {"title": {"by": "deterministic"}}}) + body


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(statistics.median(values), 2),
            "p95_ms": round(percentile(values, 0.95), 2), "max_ms": round(max(values), 2)}


def server_ms(response: Any) -> float:
    timing = response.headers["server-timing"]  # "app;dur=12.3"
    return float(timing.split("dur=")[1])


def run(size: int, samples: int, seed: int, workdir: Path) -> dict[str, Any]:
    workspace = workdir / f"store-{size}"
    (workspace / ".git").mkdir(parents=True)
    started = time.perf_counter()
    corpus = generate(workspace, size, seed)
    rnd = random.Random(seed)
    shaped_dir = workspace / ".dsh-chapters" / SHAPED_SESSION / "chapters"
    shaped_dir.mkdir(parents=True)
    for number in range(1, 21):
        lines = 50 if number % 2 else 400  # 4 results of this many lines each
        (shaped_dir / f"{number:03d}-shaped-chapter-{number}.md").write_text(
            shaped_chapter(rnd, number, lines, corpus["projectKey"]), encoding="utf-8")
    generated_s = time.perf_counter() - started
    # The corpus is one project: this workspace is it (§2.3, a configured projectKey wins).
    (workspace / ".dsh-chapters" / "config.toml").write_text(
        f'projectKey = "{corpus["projectKey"]}"\n', encoding="utf-8")
    env = {"DSH_HOME": str(workdir / "home"), "DSH_CHAPTERS_HARNESS_ID": "hostA",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    app = bootstrap(workspace, env)
    # As `chapters serve` runs it: the index kept current in the background.
    viewer = AppViewer(app, refresh_interval_s=app.config.viewer_index_refresh_ms / 1000)
    client = TestClient(make_app(viewer, PORT, csrf="bench"),
                        base_url=f"http://127.0.0.1:{PORT}")
    json_headers = {"Accept": "application/json"}

    first = time.perf_counter()
    viewer.start()
    warm = client.get("/search", params={"q": "retry"})  # waits for the first pass (the build)
    assert warm.status_code == 200, warm.text[:400]
    first_search_s = time.perf_counter() - first

    store = workspace / ".dsh-chapters"
    plain = sorted(p.relative_to(store).as_posix() for p in store.glob("*/chapters/*.md")
                   if SHAPED_SESSION not in p.as_posix())
    shaped = sorted(p.relative_to(store).as_posix() for p in shaped_dir.glob("*.md"))
    picks = rnd.sample(plain, min(samples, len(plain)))
    figures: dict[str, list[float]] = {"chapter_html": [], "chapter_json": [],
                                       "chapter_shaped_html": [], "search_html": [],
                                       "search_json": [], "search_filtered_html": []}
    for path in picks:
        page = client.get(f"/chapter/{path}", params={"line": "12"})
        assert page.status_code == 200, page.text[:400]
        figures["chapter_html"].append(server_ms(page))
        figures["chapter_json"].append(server_ms(client.get(f"/chapter/{path}",
                                                            headers=json_headers)))
    for i in range(samples):
        page = client.get(f"/chapter/{shaped[i % len(shaped)]}", params={"line": "40"})
        assert page.status_code == 200
        figures["chapter_shaped_html"].append(server_ms(page))
    totals: list[int] = []
    for text in queries(seed, samples):
        page = client.get("/search", params={"q": text})
        assert page.status_code == 200, page.text[:400]
        figures["search_html"].append(server_ms(page))
        answer = client.get("/search", params={"q": text}, headers=json_headers)
        totals.append(answer.json()["total"])
        figures["search_json"].append(server_ms(answer))
        narrowed = client.get("/search", params={"q": text, "kind": "chapter",
                                                 "since": "2025-01-01"})
        figures["search_filtered_html"].append(server_ms(narrowed))
    sessions_first = server_ms(client.get("/"))  # reads every chapter's frontmatter once
    figures["sessions_html"] = [server_ms(client.get("/")) for _ in range(5)]
    viewer.stop()
    background_walk_ms = viewer.last_refresh_ms
    # The same search page where each request brings the index current itself, as the CLI
    # does (viewerIndexRefreshMs = 0): reported, not gated; the stat walk is what it adds.
    inline = TestClient(make_app(AppViewer(app), PORT, csrf="bench"),
                        base_url=f"http://127.0.0.1:{PORT}")
    figures["search_html_inline_refresh"] = [
        server_ms(inline.get("/search", params={"q": text})) for text in queries(seed, 10)]
    inline.close()
    client.close()
    shaped_lines = max(p.read_text().count("\n") for p in shaped_dir.glob("*.md"))
    pages = {name: summarize(values) for name, values in figures.items()}
    return {"documents": corpus["documents"] + len(shaped), "generated_s": round(generated_s, 1),
            "first_search_s": round(first_search_s, 2),
            "sessions_first_ms": round(sessions_first, 1),
            "background_refresh_walk_ms": round(background_walk_ms, 1),
            "refresh_interval_ms": app.config.viewer_index_refresh_ms,
            "search_matches": {"queries": len(totals), "with_matches":
                               sum(1 for t in totals if t), "median_total":
                               statistics.median(totals)},
            "largest_shaped_chapter_lines":
            shaped_lines, "pages": pages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "viewer.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsh-viewer-bench-") as tmp:
        result = run(args.size, args.samples, args.seed, Path(tmp))
    # The target: the chapter page and the search page. A search narrowed by kind,
    # machine or date ranks every match before filtering (so `total` stays exact): measured
    # against the same target and reported, not gated.
    gated = ("chapter_html", "chapter_shaped_html", "search_html")
    verdict = {name: result["pages"][name]["p95_ms"] <= TARGET_MS for name in gated}
    reported = {name: result["pages"][name]["p95_ms"] <= TARGET_MS
                for name in ("search_filtered_html", "search_html_inline_refresh",
                             "sessions_html")}
    report = {"benchmark": "viewer", "target": f"p95 server time <= {TARGET_MS:g} ms at "
              f"{args.size} documents", "machine": {"cpus": os.cpu_count(),
                                                     "python": sys.version.split()[0]},
              "result": result, "verdict": verdict, "reported": reported,
              "pass": all(verdict.values())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
