"""Search benchmark (issue #5): one command, figures in `benchmarks/results/search.json`.

    hatch run python benchmarks/search.py --sizes 1000,10000,100000

Per corpus size, side by side in the same run:
- in-process query latency of `SearchService.search` (index current, SQLite FTS5 cache warm);
- the same queries as a `chapters search --json` process (it also brings the index current);
- SQLite FTS5 `bm25()` over the same fields (title, summary, topics, category), top 20;
- `rg -i -l` over the same chapter and rule files;
- a full index rebuild vs the incremental update after adding one chapter (index only, and
  index plus cache), as a ratio;
- peak RSS of the build process, the in-process query process and the CLI process.

Synthetic corpora come from a seeded generator with realistic topics (components, concerns,
file modules), sessions of 1-20 chapters, core-format frontmatter and verbatim-looking bodies.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.search.index import DoorLayout, update_index
from dsh_chapters_core.search.packing import max_lines
from dsh_chapters_core.search.scorer import LexicalWeights
from dsh_chapters_core.search.service import DoorName, SearchDoor, SearchRequest, SearchService
from dsh_chapters_fs.search_cache import SqliteSearchCache
from dsh_chapters_fs.search_tree import FrontmatterReader, SearchTree

HERE = Path(__file__).resolve().parent
TARGETS_AT = 100_000
TARGETS = {"inprocess_p50_ms": 50.0, "vs_fts5_max": 2.0, "vs_rg_min": 10.0,
           "incremental_ratio_max": 0.05, "rss_mb_max": 300.0}

COMPONENTS = ["auth", "billing", "search", "widgets", "http_client", "scheduler", "cache", "db",
              "api", "cli", "ui", "notifications", "payments", "storage", "queue", "metrics",
              "logging", "config", "sync", "parser", "importer", "exporter", "gateway", "admin",
              "reports", "webhooks", "mailer", "uploads", "profiles", "sessions", "router",
              "templates", "i18n", "plugins", "workers", "telemetry", "billing_ui", "ledger",
              "inventory", "checkout"]
CONCERNS = ["retry", "backoff", "timeout", "migration", "schema", "index", "jwt", "token",
            "refresh", "session", "pagination", "serialization", "validation", "rate-limit",
            "deadlock", "race-condition", "memory-leak", "flaky-test", "ci", "docker", "deploy",
            "release", "changelog", "benchmark", "profiling", "sqlite", "postgres", "redis",
            "kafka", "grpc", "websocket", "oauth", "csrf", "cors", "tls", "dns", "encoding",
            "unicode", "accessibility", "dark-mode", "layout", "typing", "mypy", "ruff",
            "pytest", "hypothesis", "fixtures", "mocking", "logging-format", "tracing",
            "alerts", "dashboards", "cron", "locking", "transactions", "n-plus-one", "orm",
            "query-plan", "caching", "eviction", "compression", "streaming", "upload-limits",
            "permissions", "roles", "audit-log", "feature-flags", "config-reload", "secrets",
            "key-rotation", "backups", "restore", "sharding", "replication", "failover",
            "healthcheck", "graceful-shutdown", "signals", "threads", "asyncio", "event-loop",
            "packaging", "wheels", "dependencies", "lockfile", "monorepo", "hatch", "pypi",
            "docs", "readme", "api-design", "versioning", "deprecation", "error-messages",
            "exit-codes", "cli-flags", "parsing", "regex", "dates", "timezones", "money",
            "rounding", "currency", "invoices", "refunds", "emails", "templates-html", "css",
            "responsive", "forms", "search-ranking", "tokenizer", "stemming", "fts", "vectors"]
ACTIONS = ["Fix", "Add", "Refactor", "Debug", "Investigate", "Document", "Test", "Optimize",
           "Remove", "Rename", "Upgrade", "Revert", "Review", "Split", "Harden"]
MODULES = ["client", "server", "models", "views", "handlers", "service", "repository", "tasks",
           "utils_legacy", "middleware", "schema", "forms", "serializers", "signals", "admin",
           "commands", "settings", "routes", "store", "adapter"]
CATEGORIES = ["testing", "style", "security", "workflow", "docs", "performance"]
FILLER = [
    "the", "a", "to", "of", "and", "in", "that", "is", "for", "it", "with", "as", "on", "this",
    "be", "by", "we", "not", "are", "or", "at", "from", "should", "when", "then", "but", "if",
    "so", "can", "will", "was", "have", "has", "our", "one", "all", "there", "which", "their",
    "what", "about", "would", "more", "other", "into", "also", "than", "some", "these", "only",
    "after", "before", "where", "because", "while", "still", "again", "first", "last", "next",
    "every", "each", "both", "few", "most", "same",
]


def zipf_choice(rnd: random.Random, items: list[str], s: float = 1.1) -> str:
    weights = [1.0 / (rank + 1) ** s for rank in range(len(items))]
    return rnd.choices(items, weights=weights, k=1)[0]


def long_tail(rnd: random.Random) -> str:
    """Identifiers and rare words: the long tail real transcripts are full of."""
    return "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(5, 9)))


def sentence(rnd: random.Random, words: list[str], n: int) -> str:
    out = []
    for _ in range(n):
        r = rnd.random()
        out.append(rnd.choice(words) if r < 0.35 else long_tail(rnd) if r < 0.45
                   else rnd.choice(FILLER))
    return " ".join(out).capitalize() + "."


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:48].strip("-") or "chapter"


def generate(root: Path, size: int, seed: int) -> dict[str, Any]:
    """`size` documents under `root/.dsh-chapters/` (1% rules), like the archive writes them."""
    rnd = random.Random(seed)
    store = root / ".dsh-chapters"
    project_key = str(uuid.UUID(int=rnd.getrandbits(128)))
    written = 0
    nbytes = 0
    start_day = 20_000  # days since the epoch (2024-10-04)
    rules = max(1, size // 100)
    for n in range(1, rules + 1):
        category = rnd.choice(CATEGORIES)
        concern = zipf_choice(rnd, CONCERNS)
        text = f"When touching {concern}, {sentence(rnd, CONCERNS, 10).lower()}"
        fields = {"kind": "rule", "category": category, "status": "proposed",
                  "title": text[:80], "projectKey": project_key, "harnessId": "hostA",
                  "date": _iso(start_day + n)}
        path = store / "rules" / "hostA" / f"{n:03d}-{category}-{slug(text)}.md"
        data = (dump_frontmatter(fields) + text + "\n").encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written += 1
        nbytes += len(data)
    while written < size:
        session = str(uuid.UUID(int=rnd.getrandbits(128)))
        day = start_day + rnd.randint(0, 720)
        component = zipf_choice(rnd, COMPONENTS)
        for number in range(1, min(rnd.randint(1, 20), size - written) + 1):
            concern = zipf_choice(rnd, CONCERNS)
            module = rnd.choice(MODULES)
            path_hint = f"src/{component}/{module}.py"
            title = f"{rnd.choice(ACTIONS)} the {concern} handling in {path_hint}"
            topics = list(dict.fromkeys(
                [concern, component, module,
                 *(zipf_choice(rnd, CONCERNS) for _ in range(rnd.randint(1, 4))),
                 *(zipf_choice(rnd, COMPONENTS) for _ in range(rnd.randint(0, 2)))]))[:8]
            vocab = [*topics, component, module]
            summary = sentence(rnd, vocab, rnd.randint(18, 34))
            body_parts = []
            for _ in range(rnd.randint(2, 8)):
                role = rnd.choice(["user", "assistant", "assistant", "tool"])
                body_parts.append(f"## {role}\n\n" + " ".join(
                    sentence(rnd, vocab, rnd.randint(8, 20)) for _ in range(rnd.randint(1, 4))))
                if role == "tool":
                    body_parts.append(f"```\n$ pytest tests/{component}\n"
                                      f"{rnd.randint(1, 300)} passed in {rnd.random():.2f}s\n```")
            body = "\n\n".join(body_parts) + "\n"
            fields = {"title": title, "summary": summary, "kind": "chapter",
                      "projectKey": project_key, "harnessId": "hostA", "sessionId": session,
                      "seqRange": [number * 10, number * 10 + 9], "date": _iso(day, number),
                      "messages": {"user": 1, "assistant": 2}, "topics": topics,
                      "generated": {"title": {"by": "deterministic"}}}
            path = store / session / "chapters" / f"{number:03d}-{slug(title)}.md"
            data = (dump_frontmatter(fields) + body).encode()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written += 1
            nbytes += len(data)
    return {"documents": written, "bytes": nbytes, "projectKey": project_key}


def _iso(day: int, minute: int = 0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(day * 86_400 + minute * 60))


def queries(seed: int, count: int) -> list[str]:
    rnd = random.Random(seed + 1)
    out = []
    for i in range(count):
        kind = i % 4
        if kind == 0:
            out.append(zipf_choice(rnd, CONCERNS))
        elif kind == 1:
            out.append(f"{rnd.choice(COMPONENTS)} {rnd.choice(CONCERNS)}")
        elif kind == 2:
            out.append(f"{rnd.choice(ACTIONS).lower()} {rnd.choice(CONCERNS)} "
                       f"{rnd.choice(MODULES)}")
        else:
            out.append(f"{rnd.choice(CONCERNS)} {rnd.choice(CONCERNS)}")
    return out


def peak_rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def store_door(store: Path, cache: SqliteSearchCache | None) -> SearchDoor:
    tree = SearchTree(store)
    return SearchDoor(name=DoorName.STORE, layout=DoorLayout.STORE, tree=tree,
                      reader=FrontmatterReader(), prefix=".dsh-chapters/", cache=cache,
                      state=tree, state_path="cache/index-store.tokens.json")


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


# ---------------------------------------------------------------------------------------------
# Worker phases (separate processes, so each one's peak RSS is its own)


def phase_build(ws: Path, size: int, seed: int) -> dict[str, Any]:
    store = ws / ".dsh-chapters"
    gen_s, corpus = timed(lambda: generate(ws, size, seed))
    reader = FrontmatterReader()
    tree = SearchTree(store)
    index_full_s, _ = timed(lambda: update_index(tree, layout=DoorLayout.STORE, reader=reader,
                                                 rebuild=True))
    with SqliteSearchCache(store / "cache/search-store.sqlite") as cache:
        service = SearchService(doors=[store_door(store, cache)], config=DEFAULTS)
        refresh_full_s, _ = timed(lambda: service.refresh(service.store, rebuild=True))
        # One new chapter, as an archive would add it.
        extra = store / "zz-new-session/chapters/001-fix-the-jwt-refresh.md"
        extra.parent.mkdir(parents=True)
        extra.write_bytes((dump_frontmatter({
            "title": "Fix the jwt refresh race", "summary": "jwt refresh token race in auth",
            "kind": "chapter", "topics": ["jwt", "refresh", "auth"], "projectKey":
            corpus["projectKey"], "date": "2026-11-30T00:00:00Z"}) + "## user\n\nhi\n").encode())
        refresh_incremental_s, report = timed(lambda: service.refresh(service.store))
        assert report.update.added == ("zz-new-session/chapters/001-fix-the-jwt-refresh.md",)
        # The same, index only: scanning for the delta, and with the delta known (archive/sync).
        extra2 = extra.with_name("002-more.md")
        extra2.write_bytes(extra.read_bytes().replace(b"race", b"race again"))
        tokens = service._load_tokens(service.store)
        index_incremental_s, upd = timed(lambda: update_index(
            tree, layout=DoorLayout.STORE, reader=reader, fingerprints=tokens))
        assert len(upd.added) == 1
        extra3 = extra.with_name("003-more.md")
        extra3.write_bytes(extra.read_bytes().replace(b"race", b"race 3"))
        tokens = dict(upd.fingerprints)
        index_known_delta_s, upd = timed(lambda: update_index(
            tree, layout=DoorLayout.STORE, reader=reader, fingerprints=tokens,
            changed=[str(extra3.relative_to(store))]))
        assert len(upd.added) == 1
        service.refresh(service.store)
        shards = report.update.shard_count
    # The bm25 baseline: the same fields in a plain FTS5 table (unicode61, default detail).
    fts_build_s, _ = timed(lambda: build_bm25(store, ws / "bm25.sqlite", reader))
    return {
        "documents": corpus["documents"], "corpus_mb": round(corpus["bytes"] / 2**20, 1),
        "generate_s": round(gen_s, 2), "shards": shards,
        "index_full_rebuild_s": round(index_full_s, 3),
        "index_incremental_scan_s": round(index_incremental_s, 4),
        "index_incremental_known_delta_s": round(index_known_delta_s, 4),
        "refresh_full_rebuild_s": round(refresh_full_s, 3),
        "refresh_incremental_s": round(refresh_incremental_s, 4),
        "ratio_index_incremental_scan": round(index_incremental_s / index_full_s, 4),
        "ratio_index_incremental_known_delta": round(index_known_delta_s / index_full_s, 4),
        "ratio_refresh_incremental": round(refresh_incremental_s / refresh_full_s, 4),
        "bm25_table_build_s": round(fts_build_s, 2),
        "build_peak_rss_mb": round(peak_rss_mb(), 1),
    }


def build_bm25(store: Path, db_path: Path, reader: FrontmatterReader) -> None:
    tree = SearchTree(store)
    with sqlite3.connect(db_path) as db:
        db.execute("CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, title, summary, "
                   "topics, category)")
        rows = []
        for path in tree.list(""):
            if not path.endswith(".md") or path.startswith(("index/", "cache/")):
                continue
            doc = reader.parse(path, tree.read(path))
            if doc is None:
                continue
            rows.append((path, doc.title, doc.body if doc.kind == "rule" else doc.summary,
                         " ".join(doc.topics), doc.category))
        db.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?)", rows)
    db.close()


def fts_query(text: str) -> str:
    words = re.findall(r"[^\W_]+", text.casefold())
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))


def phase_query(ws: Path, texts: list[str], repeats: int) -> dict[str, Any]:
    store = ws / ".dsh-chapters"
    with SqliteSearchCache(store / "cache/search-store.sqlite") as cache:
        service = SearchService(doors=[store_door(store, cache)], config=DEFAULTS)
        request = [SearchRequest(query=q, max_tokens=DEFAULTS.search_default_max_tokens)
                   for q in texts]
        totals = [service.search(r).total for r in request]  # warm: cache current, pages hot
        ours = [timed(lambda r=r: service.search(r))[0] for _ in range(repeats) for r in request]
        # What the cache hands to Python per query: the best `limit` plus specials.
        limit = max_lines(DEFAULTS.search_default_max_tokens, DEFAULTS, ".dsh-chapters/")
        weights = LexicalWeights.of(DEFAULTS)
        candidates = [len(cache.top_candidates(_terms(q), weights=weights, limit=limit).entries)
                      for q in texts]
    bm25: list[float] = []
    with sqlite3.connect(ws / "bm25.sqlite") as db:
        sql = ("SELECT path, bm25(docs) FROM docs WHERE docs MATCH ? "
               "ORDER BY bm25(docs) LIMIT 20")
        for q in texts:
            db.execute(sql, (fts_query(q),)).fetchall()
        for _ in range(repeats):
            for q in texts:
                bm25.append(timed(lambda q=q: db.execute(sql, (fts_query(q),)).fetchall())[0])
    db.close()
    return {
        "queries": len(texts), "repeats": repeats,
        "inprocess_p50_ms": round(statistics.median(ours) * 1000, 2),
        "inprocess_p90_ms": round(_pct(ours, 0.9) * 1000, 2),
        "bm25_p50_ms": round(statistics.median(bm25) * 1000, 2),
        "bm25_p90_ms": round(_pct(bm25, 0.9) * 1000, 2),
        "matches_median": statistics.median(totals),
        "handed_to_python_median": statistics.median(candidates),
        "query_peak_rss_mb": round(peak_rss_mb(), 1),
    }


def _terms(query: str) -> list[str]:
    from dsh_chapters_core.search.aliases import EMPTY_ALIASES

    return list(EMPTY_ALIASES.query_terms(query))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------------------------------
# The parent: subprocess figures (rg, the CLI) with each child's own peak RSS


def run_child(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str, float]:
    """(wall seconds, stdout, peak RSS MB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # rg exits 1 when nothing matched
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}: {err.decode()[:500]}")
    return elapsed, out.decode(), usage.ru_maxrss / 1024


def measure_rg(ws: Path, texts: list[str], repeats: int) -> dict[str, Any]:
    rg = shutil.which("rg")
    if rg is None:
        return {"error": "ripgrep not installed (apt-get install -y ripgrep)"}
    times = []
    for _ in range(repeats):
        for q in texts:
            argv = [rg, "-i", "-l", "-g", "*.md", "-g", "!index/**", "-g", "!cache/**"]
            for word in re.findall(r"[^\W_]+", q):
                argv += ["-e", word]
            argv.append(str(ws / ".dsh-chapters"))
            times.append(run_child(argv)[0])
    return {"rg_p50_ms": round(statistics.median(times) * 1000, 2),
            "rg_p90_ms": round(_pct(times, 0.9) * 1000, 2)}


def measure_cli(ws: Path, texts: list[str], home: Path) -> dict[str, Any]:
    env = {**os.environ, "DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": "bench"}
    chapters = shutil.which("chapters") or ""
    argv0 = [chapters] if chapters else [sys.executable, "-m", "dsh_chapters"]
    times, rss = [], []
    for q in texts:
        elapsed, out, peak = run_child([*argv0, "-C", str(ws), "search", q, "--json"], env)
        json.loads(out)
        times.append(elapsed)
        rss.append(peak)
    return {"cli_p50_ms": round(statistics.median(times) * 1000, 1),
            "cli_peak_rss_mb": round(max(rss), 1), "cli_queries": len(texts)}


def run_size(size: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    ws = workdir / f"corpus-{size}"
    if ws.exists():
        shutil.rmtree(ws)
    ws.mkdir(parents=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    _, out, _ = run_child([*me, "--phase", "build", "--workspace", str(ws), "--size", str(size),
                           "--seed", str(args.seed)])
    result: dict[str, Any] = {"size": size, **json.loads(out)}
    texts = queries(args.seed, args.queries)
    _, out, _ = run_child([*me, "--phase", "query", "--workspace", str(ws), "--seed",
                           str(args.seed), "--queries", str(args.queries), "--repeats",
                           str(args.repeats)])
    result.update(json.loads(out))
    result.update(measure_rg(ws, texts[: args.rg_queries], 1))
    result.update(measure_cli(ws, texts[: args.process_queries], workdir / "home"))
    ours = result["inprocess_p50_ms"]
    result["ratio_inprocess_vs_bm25"] = round(ours / result["bm25_p50_ms"], 2)
    if "rg_p50_ms" in result:
        result["ratio_rg_vs_inprocess"] = round(result["rg_p50_ms"] / ours, 1)
    if not args.keep:
        shutil.rmtree(ws)
    return result


def verdict(results: list[dict[str, Any]]) -> dict[str, Any]:
    at = next((r for r in results if r["size"] == TARGETS_AT), None)
    ten_k = next((r for r in results if r["size"] == 10_000), None)
    out: dict[str, Any] = {"targets": TARGETS}
    if at is not None:
        out["at_100k"] = {
            "inprocess_p50_ms": [at["inprocess_p50_ms"],
                                 at["inprocess_p50_ms"] <= TARGETS["inprocess_p50_ms"]],
            "vs_fts5_bm25": [at["ratio_inprocess_vs_bm25"],
                             at["ratio_inprocess_vs_bm25"] <= TARGETS["vs_fts5_max"]],
            "faster_than_rg": [at.get("ratio_rg_vs_inprocess"),
                               (at.get("ratio_rg_vs_inprocess") or 0) >= TARGETS["vs_rg_min"]],
            "query_process_peak_rss_mb": [at["query_peak_rss_mb"],
                                          at["query_peak_rss_mb"] <= TARGETS["rss_mb_max"]],
            "cli_peak_rss_mb": [at["cli_peak_rss_mb"],
                                at["cli_peak_rss_mb"] <= TARGETS["rss_mb_max"]],
        }
    if ten_k is not None:
        out["at_10k_incremental"] = {
            "index_scan": [ten_k["ratio_index_incremental_scan"],
                           ten_k["ratio_index_incremental_scan"]
                           <= TARGETS["incremental_ratio_max"]],
            "index_known_delta": [ten_k["ratio_index_incremental_known_delta"],
                                  ten_k["ratio_index_incremental_known_delta"]
                                  <= TARGETS["incremental_ratio_max"]],
            "index_and_cache": [ten_k["ratio_refresh_incremental"],
                                ten_k["ratio_refresh_incremental"]
                                <= TARGETS["incremental_ratio_max"]],
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=40, help="distinct in-process queries")
    parser.add_argument("--repeats", type=int, default=3, help="in-process and bm25 repeats")
    parser.add_argument("--rg-queries", type=int, default=10)
    parser.add_argument("--process-queries", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated corpora")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "search.json")
    parser.add_argument("--phase", choices=("build", "query"), help=argparse.SUPPRESS)
    parser.add_argument("--workspace", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "build":
        print(json.dumps(phase_build(args.workspace, args.size, args.seed)))
        return 0
    if args.phase == "query":
        texts = queries(args.seed, args.queries)
        print(json.dumps(phase_query(args.workspace, texts, args.repeats)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="dsh-search-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        results = []
        for size in sizes:
            started = time.perf_counter()
            result = run_size(size, args, workdir)
            result["wall_s"] = round(time.perf_counter() - started, 1)
            results.append(result)
            print(json.dumps(result), flush=True)
    report = {
        "benchmark": "search",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                    "sqlite": sqlite3.sqlite_version},
        "results": results,
        "verdict": verdict(results),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["verdict"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
