"""Search speed benchmark: one command, figures in `benchmarks/results/search.json`.

    hatch run python benchmarks/search.py --sizes 1000,10000,100000
    hatch run python benchmarks/search.py --quick          # 1k only, fewer repeats

Per corpus size, side by side in the same run, on one seeded corpus of chapters laid out as
the archive renders them (turn headings, fenced prompts and replies, tool calls and their
output: file paths, shell commands, error messages with numbers, stack traces, camelCase and
snake_case identifiers, and rare identifiers that only a few chapters hold), as long as real
chapters are (a log-normal with a median of 17 KB and a p90 of about 61 KB, cut at 360 KB):

- `chapters search <q> --json` as a whole process (the installed entry point, cwd the
  workspace, the index already current), and `rg -i -l` over the same chapter files, run
  query by query one after the other so both see the same machine load. The workspace's
  sources are byte-compiled first and the process runs without `PYTHONDONTWRITEBYTECODE`,
  so it loads bytecode as an installed user's does instead of recompiling every module;
- in one process, our `SearchService.search` and an SQLite FTS5 `bm25()` query over the same
  text (title, summary, topics, body; top 20), query by query;
- a full index rebuild (`chapters index --rebuild`, timed inside its own process) and its
  peak RSS, read from the kernel (`ru_maxrss`) of that process;
- the update after archiving one chapter with `chapters archive`: the archive call plus the
  next search, minus a search on an index that was already current, as a fraction of the
  full rebuild. This counts the archive's own work too, so it is an upper bound whichever
  side (the archive or the next search) brings the index current.

Every measurement goes through the app's own entry points (`chapters` and its `main`, the
composition root's `open_search`), so the benchmark measures whatever the code under test
does to stay current, without knowing how.

The generated corpus is cached on disk, keyed by generator version, seed and size
(`--cache-dir`, default in the system temp directory), so a re-run does not regenerate it;
everything the app derived from it is removed before each run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import provenance

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# Bump when the generator's output changes, so a cached corpus of the old shape is not reused.
GENERATOR_VERSION = 4
STORE = ".dsh-chapters"
HARNESS_ID = "bench"
FIXTURE = REPO / "tests/fixtures/claude-code/-home-dev-work-acme-api" \
    / "5f0c2a9e-8d3b-4e61-9a7c-2b1d4e6f8a10.jsonl"
# The fixture's first 68 lines are one task (a logout bug, its fix and a test): one chapter.
FIXTURE_LINES = 68

# The search-at-scale targets on chapters as long as real ones (the real haystack's figures
# are benchmarks/haystack.py's): a whole process no slower than `rg -il` at 10k and at least
# 5x faster at 100k; an update a small share of a rebuild; the build bounded in memory.
TARGETS: dict[str, dict[str, Any]] = {
    "process_vs_rg_at_10k": {"size": 10_000, "max": 1.0,
                             "text": "`chapters search` process no slower than `rg -il` at 10k"},
    "rg_vs_process_at_100k": {"size": 100_000, "min": 5.0,
                              "text": "process ≥ 5× faster than `rg -il` at 100k"},
    "update_vs_rebuild_at_10k": {"size": 10_000, "max": 0.05,
                                 "text": "update after archiving one chapter ≤ 5% of a full "
                                         "rebuild at 10k"},
    "build_peak_rss_mb_at_100k": {"size": 100_000, "max": 400.0,
                                  "text": "full index build peak RSS ≤ 400 MB at 100k"},
}

# ---------------------------------------------------------------------------------------------
# Vocabulary of the generator: what agent sessions in a Python web codebase talk about.

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
VERBS = ["get", "set", "load", "parse", "refresh", "build", "fetch", "resolve", "validate",
         "sync", "flush", "emit", "render", "apply", "merge", "decode", "encode", "retry"]
NOUNS = ["Token", "Cache", "Session", "User", "Order", "Invoice", "Index", "Shard", "Queue",
         "Worker", "Config", "Schema", "Request", "Response", "Handler", "Lock", "Manifest",
         "Payload", "Batch", "Client", "Claims", "Ledger", "Bucket", "Cursor"]
ERRORS = ["ValueError", "KeyError", "TimeoutError", "ConnectionResetError", "IntegrityError",
          "OperationalError", "PermissionError", "FileNotFoundError", "AssertionError",
          "JSONDecodeError", "HTTPError", "RuntimeError", "TypeError", "DeadlockDetected"]
STATUSES = [400, 401, 403, 404, 409, 422, 429, 500, 502, 503, 504]
COMMANDS = ["pytest tests/{component}/test_{module}.py -x -q", "alembic upgrade head",
            "alembic downgrade -1", "git rebase -i HEAD~{n}", "docker compose up -d {component}",
            "ruff check src/{component}", "mypy --strict src/{component}",
            "curl -sS -X POST http://localhost:{port}/api/{component}/{module}",
            "kubectl rollout restart deploy/{component}", "make migrate",
            "uv pip install {package}=={version}", "git bisect run pytest -k {snake}",
            "python -m {component}.{module} --dry-run", "redis-cli --scan --pattern '{snake}:*'",
            "psql -c 'EXPLAIN ANALYZE SELECT * FROM {snake} WHERE id = {n}'"]
PACKAGES = ["sqlalchemy", "httpx", "pydantic", "fastapi", "celery", "redis", "alembic",
            "uvicorn", "attrs", "cattrs", "orjson", "structlog", "boto3", "stripe"]
ERROR_MESSAGES = ["connection reset by peer", "deadline exceeded after {ms} ms",
                  'duplicate key value violates unique constraint "{snake}_pkey"',
                  "'{snake}' is not a valid {camel}", "no such table: {snake}",
                  "expected {n} rows, got {m}", "upstream returned {status}",
                  "token expired {n} seconds ago", "could not acquire lock {snake} in {ms} ms",
                  "invalid literal for int() with base 10: '{hapax}'",
                  "{camel}.{snake}() missing 1 required positional argument: '{hapax}'"]
USER_TURNS = [
    "Why does `{camel}` fail with {status} when the {concern} path runs?",
    "The {concern} tests in tests/{component}/test_{module}.py are failing again. Can you look?",
    "Can we fix the {concern} handling in {path}? It raises {error} on large inputs.",
    "Which command fixed the failing {concern} last time?",
    "Where did the {status} come from in the {component} {module}?",
    "Please refactor `{snake}` so it stops calling `{camel}` twice per request.",
    "Run the {component} suite and tell me what broke.",
    "CI is red on the {concern} job since {sha}. Bisect it.",
]
ASSISTANT_TURNS = [
    "Found it: `{camel}` in {path} (line {line}) checks the {concern} deadline before it "
    "refreshes.",
    "The {error} comes from `{snake}()` when `{camel}` returns None; I added a guard and a test.",
    "I changed {path} so `{snake}` retries {n} times with backoff, capped at {ms} ms.",
    "Running `{command}` to confirm.",
    "The fix is in {path}: `{camel}` now reads `{upper}` from settings (default {n}).",
    "{n} tests pass after the change; tests/{component}/test_{module}.py::test_{snake} pins the "
    "{concern} case.",
    "Committed as {sha} on feat/{component}-{concern}.",
]
FILLER = [
    "the", "a", "to", "of", "and", "in", "that", "is", "for", "it", "with", "as", "on", "this",
    "be", "by", "we", "not", "are", "or", "at", "from", "should", "when", "then", "but", "if",
    "so", "can", "will", "was", "have", "has", "our", "one", "all", "there", "which", "their",
    "what", "about", "would", "more", "other", "into", "also", "than", "some", "these", "only",
    "after", "before", "where", "because", "while", "still", "again", "first", "last", "next",
    "every", "each", "both", "few", "most", "same",
]
# A slow build of the code under test must not stretch the run past its time box: a query loop
# stops at its time budget once it has this many samples, and says how many it took.
MIN_SAMPLES = 5
# Chapter bodies are as long as real ones: one store of 429 genuine public sessions (2,204
# chapters) had a median of 17 KB, p90 67 KB, p99 155 KB and a largest of 353 KB. A log-normal
# with that median and sigma 1.0 gives p90 61 KB and p99 175 KB; it is cut at 360 KB.
BODY_MEDIAN_BYTES = 17_000
BODY_SIGMA = 1.0
BODY_MIN_BYTES = 600
BODY_MAX_BYTES = 360_000
RARE_PER_DOC = 0.04  # the share of chapters that mention one rare identifier


def zipf_choice(rnd: random.Random, items: list[str], s: float = 1.1) -> str:
    weights = [1.0 / (rank + 1) ** s for rank in range(len(items))]
    return rnd.choices(items, weights=weights, k=1)[0]


def long_tail(rnd: random.Random) -> str:
    """A made-up word: the long tail of names real transcripts are full of."""
    return "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(5, 9)))


def sentence(rnd: random.Random, words: list[str], n: int) -> str:
    # A fifth of real chapter words are rare (names, ids, numbers, typos): the long tail.
    out = []
    for _ in range(n):
        r = rnd.random()
        out.append(rnd.choice(words) if r < 0.3 else long_tail(rnd) if r < 0.5
                   else rnd.choice(FILLER))
    return " ".join(out).capitalize() + "."


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:48].strip("-") or "chapter"


def _iso(day: int, minute: int = 0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(day * 86_400 + minute * 60))


class Slots(dict[str, str]):
    """Template slots: a chapter's own names, and numbers drawn afresh for each line."""

    def __init__(self, rnd: random.Random, fixed: dict[str, str], camels: list[str],
                 snakes: list[str]) -> None:
        super().__init__(fixed)
        self.rnd, self.camels, self.snakes = rnd, camels, snakes

    def __missing__(self, key: str) -> str:
        rnd = self.rnd
        if key == "camel":
            return rnd.choice(self.camels)
        if key == "snake":
            return rnd.choice(self.snakes)
        if key == "upper":
            return rnd.choice(self.snakes).upper()
        if key in ("n", "m", "line"):
            return str(int(rnd.random() * 400) + 1)
        if key == "ms":
            return str(int(rnd.random() * 30) * 250 + 250)
        if key == "status":
            return str(rnd.choice(STATUSES))
        if key == "port":
            return str(8000 + int(rnd.random() * 100))
        if key == "sha":
            return f"{rnd.getrandbits(28):07x}"
        if key == "error":
            return rnd.choice(ERRORS)
        if key == "hapax":
            return long_tail(rnd)
        if key == "package":
            return rnd.choice(PACKAGES)
        if key == "version":
            return f"{int(rnd.random() * 4)}.{int(rnd.random() * 30)}.{int(rnd.random() * 12)}"
        if key == "command":
            return rnd.choice(COMMANDS).format_map(self)
        raise KeyError(key)


class Generator:
    """Seeded chapters that look like archived agent sessions, made fast enough for 100k:
    shared prose comes from a pool drawn once, and each chapter adds its own names, numbers
    and made-up words, so the vocabulary keeps growing with the corpus as real archives do."""

    def __init__(self, seed: int, size: int) -> None:
        self.rnd = random.Random(seed)
        rnd = self.rnd
        vocab = [*CONCERNS, *COMPONENTS, *MODULES]
        self.prose = [sentence(rnd, vocab, rnd.randint(8, 22)) for _ in range(4000)]
        self.camels = [f"{v}{a}{b}" for v in VERBS for a in NOUNS for b in NOUNS if a != b]
        self.snakes = [re.sub(r"(?<!^)([A-Z])", r"_\1", c).lower() for c in self.camels]
        self.rare = [f"{long_tail(rnd)}{long_tail(rnd).capitalize()}"
                     for _ in range(max(50, size // 100))]
        self.rare_used: dict[str, int] = {}

    def body(self, component: str, module: str, topics: list[str]) -> str:
        rnd = self.rnd
        pick = rnd.randrange
        camels = [self.camels[pick(len(self.camels))] for _ in range(3)]
        snakes = [self.snakes[pick(len(self.snakes))] for _ in range(2)]
        path = f"src/{component}/{module}.py"
        slots = Slots(rnd, {"component": component, "module": module, "path": path,
                            "concern": topics[0]}, camels, snakes)
        rare = ""
        if rnd.random() < RARE_PER_DOC:
            rare = self.rare[pick(len(self.rare))]
            self.rare_used[rare] = self.rare_used.get(rare, 0) + 1
        target = int(min(BODY_MAX_BYTES, max(BODY_MIN_BYTES, rnd.lognormvariate(
            math.log(BODY_MEDIAN_BYTES), BODY_SIGMA))))
        # Laid out as the archive renders a chapter (render.py): a heading per turn, the
        # prompt and replies as fenced text, tool calls on one line, their output fenced.
        parts: list[str] = []
        size = 0
        turn = 0
        seq = 0
        while size < target:
            seq += 1
            # A prompt is one of the usual questions now and then; mostly it is the session's
            # own words (real prompts rarely repeat across a store).
            prompt = (rnd.choice(USER_TURNS).format_map(slots) if rnd.random() < 0.3
                      else sentence(rnd, [*topics, component, module, slots["camel"]],
                                    rnd.randint(8, 24)))
            prompt += " " + " ".join(rnd.choices(self.prose, k=rnd.randint(0, 2)))
            block = [f"## Turn · seq {seq}–{seq + 6} · 2026-{rnd.randint(1, 12):02d}-"
                     f"{rnd.randint(1, 28):02d}T10:00:00Z",
                     f"**User:**\n\n```text\n{prompt}\n```"]
            for _ in range(rnd.randint(1, 3)):
                command = slots["command"]
                block.append(f'→ tool Bash({{"command": "{command}"}})')
                lines = [self.tool_output(slots) for _ in range(
                    1 if rnd.random() < 0.8 else rnd.randint(2, 12))]
                block.append("← result Bash:\n\n```text\n" + "\n".join(lines) + "\n```")
            reply = [rnd.choice(ASSISTANT_TURNS).format_map(slots) if rnd.random() < 0.5
                     else sentence(rnd, [*topics, slots["snake"], slots["camel"]],
                                   rnd.randint(10, 30)),
                     " ".join(rnd.choices(self.prose, k=rnd.randint(1, 3))),
                     sentence(rnd, topics, rnd.randint(6, 14))]
            if rare and turn == 0:
                reply.append(f"The culprit was `{rare}` in {path}, called from "
                             f"`{slots['camel']}`.")
            block.append("**Assistant:**\n\n```text\n" + "\n".join(reply) + "\n```")
            part = "\n\n".join(block)
            parts.append(part)
            size += len(part) + 2
            seq += 6
            turn += 1
        return "\n\n".join(parts) + "\n"

    def tool_output(self, s: Slots) -> str:
        rnd = self.rnd
        kind = rnd.random()
        head = f"$ {s['command']}"
        if kind < 0.3:
            error = s["error"]
            return "\n".join([
                head, "Traceback (most recent call last):",
                f'  File "{s["path"]}", line {s["line"]}, in {s["snake"]}',
                f"    return {s['camel']}(payload, timeout={s['ms']})",
                f'  File "src/{s["component"]}/{rnd.choice(MODULES)}.py", line {s["line"]}, '
                f"in {s['snake']}",
                f"    raise {error}(msg)",
                f"{error}: " + rnd.choice(ERROR_MESSAGES).format_map(s)])
        if kind < 0.6:
            return "\n".join([
                head, f"collected {s['n']} items", "",
                f"tests/{s['component']}/test_{s['module']}.py ..F.{'.' * (len(s['n']) + 3)}",
                f"FAILED tests/{s['component']}/test_{s['module']}.py::test_{s['snake']} - "
                f"{s['error']}: " + rnd.choice(ERROR_MESSAGES).format_map(s),
                f"{s['n']} passed, 1 failed in {rnd.random() * 9:.2f}s"])
        if kind < 0.8:
            stamp = f"2026-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T"
            return "\n".join([head] + [
                f"{stamp}{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:00Z "
                f"{rnd.choice(['INFO', 'WARN', 'ERROR'])} {s['component']}.{s['module']} "
                f"{s['upper']}={s['n']} " + rnd.choice(ERROR_MESSAGES).format_map(s)
                for _ in range(rnd.randint(2, 5))])
        return "\n".join([
            head, f"--- a/{s['path']}", f"+++ b/{s['path']}",
            f"@@ -{s['line']},6 +{s['line']},7 @@ def {s['snake']}(self, payload):",
            f"-        return self.{s['camel']}(payload)",
            f"+        return self.{s['camel']}(payload, timeout={s['ms']})",
            f"+        # {s['status']} from upstream: retry once before giving up"])


def generate(ws: Path, size: int, seed: int) -> dict[str, Any]:
    """`size` documents under `ws/.dsh-chapters/` (1% rules), laid out as the archive writes
    them, with the workspace's projectKey pinned in its config so search sees all of them."""
    from dsh_chapters_core.frontmatter import dump_frontmatter

    gen = Generator(seed, size)
    rnd = gen.rnd
    store = ws / STORE
    store.mkdir(parents=True)
    project_key = str(uuid.UUID(int=rnd.getrandbits(128)))
    (store / "config.toml").write_text(f'projectKey = "{project_key}"\n')
    written = 0
    nbytes = 0
    body_bytes = 0
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
        chapters_dir = store / session / "chapters"
        chapters_dir.mkdir(parents=True)
        for number in range(1, min(rnd.randint(1, 20), size - written) + 1):
            concern = zipf_choice(rnd, CONCERNS)
            module = rnd.choice(MODULES)
            title = f"{rnd.choice(ACTIONS)} the {concern} handling in src/{component}/{module}.py"
            topics = list(dict.fromkeys(
                [concern, component, module,
                 *(zipf_choice(rnd, CONCERNS) for _ in range(rnd.randint(1, 4))),
                 *(zipf_choice(rnd, COMPONENTS) for _ in range(rnd.randint(0, 2)))]))[:8]
            summary = sentence(rnd, [*topics, component, module], rnd.randint(18, 34))
            body = gen.body(component, module, topics)
            fields = {"title": title, "summary": summary, "kind": "chapter",
                      "projectKey": project_key, "harnessId": "hostA", "sessionId": session,
                      "seqRange": [number * 10, number * 10 + 9], "date": _iso(day, number),
                      "messages": {"user": 1, "assistant": 2}, "topics": topics,
                      "generated": {"title": {"by": "deterministic"}}}
            data = (dump_frontmatter(fields) + body).encode()
            (chapters_dir / f"{number:03d}-{slug(title)}.md").write_bytes(data)
            written += 1
            nbytes += len(data)
            body_bytes += len(body)
    chapters = written - rules
    return {"generator": GENERATOR_VERSION, "seed": seed, "size": size, "documents": written,
            "rules": rules, "bytes": nbytes, "projectKey": project_key,
            "body_bytes_mean": round(body_bytes / max(1, chapters)),
            "rare": sorted(gen.rare_used.items()),
            "store_entries": sorted(p.name for p in store.iterdir()),
            "workspace_entries": sorted(p.name for p in ws.iterdir())}


def queries(seed: int, count: int, corpus: dict[str, Any] | None = None) -> list[str]:
    """Questions as a developer types them a week later: natural-language questions, code
    identifiers, error names with numbers, paths, commands, rare identifiers (those `corpus`
    used; an identifier no chapter holds without it), topic words."""
    rnd = random.Random(seed + 1)
    camels = [f"{v}{a}{b}" for v in VERBS for a in NOUNS for b in NOUNS if a != b]
    rare = [name for name, _ in (corpus or {}).get("rare", ())] or ["nomatchIdentifier"]
    out: list[str] = []
    kinds: list[Callable[[], str]] = [
        lambda: f"which command fixed the failing {rnd.choice(CONCERNS)}",
        lambda: rnd.choice(camels),
        lambda: rnd.choice(rare),
        lambda: f"{rnd.choice(ERRORS)} {rnd.choice(STATUSES)}",
        lambda: f"where did the {rnd.choice(STATUSES)} come from in {rnd.choice(COMPONENTS)}",
        lambda: f"src/{rnd.choice(COMPONENTS)}/{rnd.choice(MODULES)}.py",
        lambda: rnd.choice(["alembic upgrade head", "kubectl rollout restart",
                            "git bisect run pytest", "redis-cli --scan"]),
        lambda: f"{rnd.choice(COMPONENTS)} {rnd.choice(CONCERNS)}",
        lambda: re.sub(r"(?<!^)([A-Z])", r"_\1", rnd.choice(camels)).lower(),
        lambda: f"{rnd.choice(rare)} {rnd.choice(ERRORS)}",
    ]
    # Kinds rotate by attempt, not by answers kept: a kind that can only repeat itself (one
    # rare identifier without a corpus) must not stall the rotation forever.
    for attempt in range(count * 50):
        if len(out) >= count:
            break
        query = kinds[attempt % len(kinds)]()
        if query not in out:
            out.append(query)
    return out


# ---------------------------------------------------------------------------------------------
# The corpus cache


def corpus_dir(cache: Path, size: int, seed: int) -> Path:
    return cache / f"search-v{GENERATOR_VERSION}-seed{seed}-n{size}"


def ensure_corpus(cache: Path, size: int, seed: int) -> tuple[Path, dict[str, Any], float]:
    """(workspace, corpus facts, seconds spent generating: 0 when the cached one was reused).
    A cached workspace is reset to what the generator wrote: everything the app derived or
    archived into it since (index, cache, logs, archived sessions) is removed."""
    root = corpus_dir(cache, size, seed)
    ws, meta_path = root / "ws", root / "corpus.json"
    if meta_path.exists() and ws.is_dir():
        meta = json.loads(meta_path.read_text())
        for entry, keep in ((ws, meta["workspace_entries"]), (ws / STORE, meta["store_entries"])):
            for child in entry.iterdir():
                if child.name not in keep:
                    _remove(child)
        for derived in ("fts5.sqlite", "home", "transcripts", "empty"):
            _remove(root / derived)
        return ws, meta, 0.0
    if root.exists():
        shutil.rmtree(root)
    ws.mkdir(parents=True)
    started = time.perf_counter()
    meta = generate(ws, size, seed)
    elapsed = time.perf_counter() - started
    meta_path.write_text(json.dumps(meta) + "\n")  # last: a half-written corpus is never reused
    return ws, meta, elapsed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


# ---------------------------------------------------------------------------------------------
# Child phases: each runs in its own process, so its peak RSS and its imports are its own.


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The CLI's own output is not the measurement: send it nowhere."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def cli(argv: list[str]) -> float:
    """Seconds of one `chapters` call through the app's `main`, in this process."""
    from dsh_chapters.cli import main

    with quiet():
        started = time.perf_counter()
        code = main(argv)
        elapsed = time.perf_counter() - started
    if code != 0:
        raise RuntimeError(f"chapters {' '.join(argv)} exited {code}")
    return elapsed


def phase_build(ws: Path) -> dict[str, Any]:
    """A full rebuild of every derived search file, as `chapters index --rebuild` does it."""
    os.chdir(ws)
    return {"rebuild_s": round(cli(["index", "--rebuild", "--json"]), 3)}


def phase_fts(ws: Path, db_path: Path) -> dict[str, Any]:
    """The yardstick: a plain FTS5 table (unicode61) over the same chapter and rule files."""
    import yaml
    from dsh_chapters_core.frontmatter import split_frontmatter

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    started = time.perf_counter()
    db = sqlite3.connect(db_path)
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, title, summary, topics, "
               "body)")
    batch: list[tuple[str, str, str, str, str]] = []
    for path in chapter_files(ws):
        head, body = split_frontmatter(path.read_text(encoding="utf-8"))
        fields = yaml.load(head, Loader=loader) or {}  # CSafeLoader or SafeLoader
        batch.append((str(path.relative_to(ws)), str(fields.get("title", "")),
                      str(fields.get("summary", "")), " ".join(fields.get("topics") or ()),
                      body))
        if len(batch) >= 2000:
            db.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?)", batch)
            batch.clear()
    db.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?)", batch)
    db.commit()
    db.close()
    return {"fts5_build_s": round(time.perf_counter() - started, 2),
            "fts5_db_mb": round(db_path.stat().st_size / 2**20, 1)}


def chapter_files(ws: Path) -> Iterator[Path]:
    store = ws / STORE
    for path in sorted(store.rglob("*.md")):
        if path.relative_to(store).parts[0] not in ("index", "cache", "topics"):
            yield path


def fts_match(text: str) -> str:
    words = re.findall(r"[^\W_]+", text.casefold())
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))


FTS_SQL = ("SELECT path, bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) "
           "LIMIT 20")


def phase_query(ws: Path, db_path: Path, texts: list[str], repeats: int,
                budget_s: float, probe: str) -> dict[str, Any]:
    """Our in-process search and FTS5, query by query in one process."""
    from dsh_chapters.bootstrap import bootstrap
    from dsh_chapters_core.search.service import SearchRequest

    os.chdir(ws)
    cli(["search", probe, "--json"])  # whatever the app does to be current, done here
    app = bootstrap(ws, dict(os.environ))
    service = app.open_search()
    db = sqlite3.connect(db_path)
    requests = [SearchRequest(query=q, max_tokens=app.config.search_default_max_tokens,
                              project_key=app.identity.project_key) for q in texts]
    try:
        service.search(replace(requests[0], query=probe))  # warm: pages hot
        for q in texts:
            db.execute(FTS_SQL, (fts_match(q),)).fetchall()
        ours: list[float] = []
        fts: list[float] = []
        totals: dict[str, int] = {}
        deadline = time.perf_counter() + budget_s
        for _ in range(repeats):
            for request, q in zip(requests, texts, strict=True):
                if len(ours) >= MIN_SAMPLES and time.perf_counter() > deadline:
                    break
                started = time.perf_counter()
                answer = service.search(request)
                ours.append(time.perf_counter() - started)
                totals[q] = answer.total
                fts.append(_timed(lambda q=q: db.execute(FTS_SQL, (fts_match(q),)).fetchall()))
    finally:
        service.close()
        db.close()
    return {"inprocess_p50_ms": _ms(statistics.median(ours)),
            "inprocess_p90_ms": _ms(_pct(ours, 0.9)),
            "fts5_p50_ms": _ms(statistics.median(fts)), "fts5_p90_ms": _ms(_pct(fts, 0.9)),
            "inprocess_samples": len(ours), "inprocess_queries": len(totals),
            "matches_median": statistics.median(totals.values()),
            "no_match_queries": sum(1 for t in totals.values() if t == 0),
            "query_peak_rss_mb": _self_rss_mb()}


def phase_update(ws: Path, transcripts: list[Path], empty: Path, probe: str) -> dict[str, Any]:
    """Archive one chapter at a time with `chapters archive`, and search after each."""
    os.chdir(ws)
    cli(["search", probe, "--json"])  # current before the first measurement
    rows = []
    for transcript in transcripts:
        current_s = cli(["search", probe, "--json"])
        archive_s = cli(["archive", str(transcript), "--final", "--json"])
        after_s = cli(["search", probe, "--json"])
        # One chapter is what the fixture's task makes today; a change in chaptering shows
        # here rather than failing a long run.
        written = len(list((ws / STORE / transcript.stem / "chapters").glob("*.md")))
        rows.append({"chapters": written, "search_current_s": current_s, "archive_s": archive_s,
                     "search_after_s": after_s,
                     "update_s": archive_s + after_s - current_s})
    # The same archives into an empty workspace: what archiving costs with nearly no index.
    empty_s = []
    for transcript in transcripts:
        os.chdir(empty)
        empty_s.append(cli(["archive", str(transcript), "--final", "--json"]))

    def med(key: str) -> float:
        return round(statistics.median(r[key] for r in rows), 4)

    return {"update_s": med("update_s"), "update_archive_s": med("archive_s"),
            "update_search_after_s": med("search_after_s"),
            "update_search_current_s": med("search_current_s"),
            "archive_into_empty_s": round(statistics.median(empty_s), 4),
            "updates": len(rows), "update_chapters_written": [r["chapters"] for r in rows]}


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _self_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# ---------------------------------------------------------------------------------------------
# The parent: children, rg and the CLI process


def run_measured(argv: list[str], env: dict[str, str], cwd: Path,
                 ok: tuple[int, ...] = (0,)) -> tuple[float, bytes, float]:
    """(wall seconds, stdout, peak RSS MB) of one child, its peak RSS from `wait4`."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv[:4])} exited {proc.returncode}: "
                           f"{stderr.decode(errors='replace')[-800:]}")
    return elapsed, stdout, usage.ru_maxrss / 1024


def child_phase(phase: str, ws: Path, env: dict[str, str], *extra: str) -> tuple[dict[str, Any],
                                                                                float]:
    """Run one phase of this script in a fresh process: (its JSON, its peak RSS MB)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        result = Path(handle.name)
    try:
        _, _, rss = run_measured([sys.executable, str(Path(__file__).resolve()), "--phase",
                                  phase, "--workspace", str(ws), "--result", str(result),
                                  *extra], env, ws)
        return json.loads(result.read_text()), rss
    finally:
        result.unlink(missing_ok=True)


def rg_argv(rg: str, query: str) -> list[str]:
    argv = [rg, "-i", "-l", "-g", "*.md", "-g", "!index/**", "-g", "!cache/**",
            "-g", "!topics/**"]
    for word in dict.fromkeys(re.findall(r"[^\W_]+", query)):
        argv += ["-e", word]
    return [*argv, STORE]


def chapters_argv() -> list[str]:
    """The installed entry point, as a user runs it."""
    found = shutil.which("chapters") or str(Path(sys.executable).with_name("chapters"))
    if not Path(found).exists():
        raise SystemExit("the `chapters` entry point is not installed in this environment")
    return [found]


def compile_sources(env: dict[str, str]) -> None:
    """Byte-compile the workspace members' `src` trees, which the editable install imports.

    An installed wheel ships (or compiles at install) its bytecode; without it, a shell that sets
    `PYTHONDONTWRITEBYTECODE` would make every timed process recompile every module it imports.
    """
    sources = sorted(str(src) for folder in ("packages", "adapters")
                     for src in (REPO / folder).glob("*/src") if src.is_dir())
    subprocess.run([sys.executable, "-m", "compileall", "-q", *sources], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def measure_processes(ws: Path, env: dict[str, str], texts: list[str], budget_s: float,
                      probe: str) -> dict[str, Any]:
    """`chapters search --json` and `rg -il`, query by query, one right after the other."""
    rg = shutil.which("rg")
    chapters = chapters_argv()
    # What an installed user runs: bytecode present and used, whatever this shell says.
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    compile_sources(env)
    # Warm-up: the index current, the page cache holding the corpus.
    run_measured([*chapters, "search", probe, "--json"], env, ws)
    if rg:
        run_measured(rg_argv(rg, texts[0]), env, ws, ok=(0, 1))
    ours, rss, grep, statuses = [], [], [], []
    deadline = time.perf_counter() + budget_s
    for q in texts:
        if len(ours) >= MIN_SAMPLES and time.perf_counter() > deadline:
            break
        elapsed, out, peak = run_measured([*chapters, "search", q, "--json"], env, ws)
        statuses.append(json.loads(out).get("status", "?"))
        ours.append(elapsed)
        rss.append(peak)
        if rg:
            grep.append(run_measured(rg_argv(rg, q), env, ws, ok=(0, 1))[0])  # 1: no match
    result: dict[str, Any] = {
        "process_p50_ms": _ms(statistics.median(ours)), "process_p90_ms": _ms(_pct(ours, 0.9)),
        "process_peak_rss_mb": round(max(rss), 1), "process_queries": len(ours),
        "process_statuses": {s: statuses.count(s) for s in sorted(set(statuses))}}
    if grep:
        result.update({"rg_p50_ms": _ms(statistics.median(grep)),
                       "rg_p90_ms": _ms(_pct(grep, 0.9))})
    else:
        result["rg_error"] = "ripgrep is not installed (apt-get install -y ripgrep)"
    return result


def one_chapter_transcripts(folder: Path, count: int, seed: int) -> list[Path]:
    """Copies of one task of a real-shaped Claude Code session, each under a new session id."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = FIXTURE.read_text().splitlines()[:FIXTURE_LINES]
    original = FIXTURE.stem
    rnd = random.Random(seed + 2)
    out = []
    for _ in range(count):
        session = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
        path = folder / f"{session}.jsonl"
        path.write_text("\n".join(lines).replace(original, session) + "\n")
        out.append(path)
    return out


def run_size(size: int, args: argparse.Namespace, cache: Path) -> dict[str, Any]:
    started = time.perf_counter()
    ws, corpus, generate_s = ensure_corpus(cache, size, args.seed)
    root = ws.parent
    home = root / "home"
    home.mkdir()
    env = {**os.environ, "DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": HARNESS_ID}
    texts = queries(args.seed, args.queries, corpus)
    # Warm-ups and the update's searches ask for a rare identifier: a few matches, so what
    # they time is staying current, not ranking thousands of chapters.
    probe = corpus["rare"][0][0] if corpus["rare"] else texts[0]
    result: dict[str, Any] = {
        "size": size, "documents": corpus["documents"],
        "corpus_mb": round(corpus["bytes"] / 2**20, 1),
        "body_bytes_mean": corpus["body_bytes_mean"],
        "generate_s": round(generate_s, 1) if generate_s else "cached",
        "queries": texts}
    build, rss = child_phase("build", ws, env)
    result.update({"rebuild_s": build["rebuild_s"], "build_peak_rss_mb": round(rss, 1)})
    fts, fts_rss = child_phase("fts", ws, env, "--db", str(root / "fts5.sqlite"))
    result.update({**fts, "fts5_build_peak_rss_mb": round(fts_rss, 1)})
    query, _ = child_phase("query", ws, env, "--db", str(root / "fts5.sqlite"),
                           "--texts", json.dumps(texts), "--repeats", str(args.repeats),
                           "--budget", str(args.budget), "--probe", probe)
    result.update(query)
    result.update(measure_processes(ws, env, texts[: args.process_queries], args.budget,
                                    probe))
    transcripts = one_chapter_transcripts(root / "transcripts", args.updates, args.seed)
    empty = root / "empty"
    empty.mkdir()
    update, _ = child_phase("update", ws, env, "--texts", json.dumps([str(t) for t in
                            transcripts]), "--empty", str(empty), "--probe", probe)
    result.update(update)
    result.update(ratios(result))
    result["wall_s"] = round(time.perf_counter() - started, 1)
    if not args.keep_derived:
        ensure_corpus(cache, size, args.seed)  # back to the generated files only
    return result


def ratios(r: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ratio_inprocess_vs_fts5": round(r["inprocess_p50_ms"] / r["fts5_p50_ms"], 2),
        "ratio_update_vs_rebuild": round(r["update_s"] / r["rebuild_s"], 4),
    }
    if "rg_p50_ms" in r:
        out["ratio_process_vs_rg"] = round(r["process_p50_ms"] / r["rg_p50_ms"], 2)
        out["ratio_rg_vs_process"] = round(r["rg_p50_ms"] / r["process_p50_ms"], 2)
    return out


TARGET_FIGURES = {
    "process_p50_ms_at_10k": "process_p50_ms",
    "process_vs_rg_at_10k": "ratio_process_vs_rg",
    "process_p50_ms_at_100k": "process_p50_ms",
    "rg_vs_process_at_100k": "ratio_rg_vs_process",
    "inprocess_vs_fts5_at_100k": "ratio_inprocess_vs_fts5",
    "update_vs_rebuild_at_10k": "ratio_update_vs_rebuild",
    "build_peak_rss_mb_at_100k": "build_peak_rss_mb",
}


def verdict(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target with the figure measured at its size: met, not met, or not measured."""
    by_size = {r["size"]: r for r in results}
    out = []
    for name, target in TARGETS.items():
        row = by_size.get(target["size"], {})
        value = row.get(TARGET_FIGURES[name])
        if value is None:
            met: bool | None = None
        elif "max" in target:
            met = value <= target["max"]
        else:
            met = value >= target["min"]
        out.append({"target": name, "text": target["text"], "size": target["size"],
                    "limit": target.get("max", target.get("min")),
                    "kind": "max" if "max" in target else "min", "value": value, "met": met})
    return out


def recorded_command(argv: list[str]) -> str:
    """The command to repeat this run; where the figures were written is not part of it."""
    kept: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--out":
            skip = True
        elif not word.startswith("--out="):
            kept.append(word)
    return " ".join(["python benchmarks/search.py", *kept])


def code_version() -> str:
    """The commit measured, `-dirty` when the members' code had changes."""
    return provenance.code_version(REPO)


def machine() -> dict[str, Any]:
    rg = shutil.which("rg")
    rg_version = ""
    if rg:
        rg_version = subprocess.run([rg, "--version"], capture_output=True, text=True,
                                    check=False).stdout.split("\n", 1)[0]
    return {"cpus": os.cpu_count(), "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version, "ripgrep": rg_version,
            "load_at_start": round(os.getloadavg()[0], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="corpus sizes, comma-separated (default 1000,10000,100000)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 1k only (unless --sizes), fewer repeats")
    parser.add_argument("--queries", type=int, default=20, help="distinct queries")
    parser.add_argument("--repeats", type=int, default=3, help="in-process and FTS5 repeats")
    parser.add_argument("--process-queries", type=int, default=12,
                        help="queries run as `chapters search` and `rg -il` processes (≥ 10)")
    parser.add_argument("--updates", type=int, default=3,
                        help="one-chapter archives measured for the update figure")
    parser.add_argument("--budget", type=float, default=120.0,
                        help="seconds after which a query loop stops once it has "
                             f"{MIN_SAMPLES} samples (the count measured is reported)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "dsh-chapters-bench-cache",
                        help="where generated corpora are kept between runs")
    parser.add_argument("--keep-derived", action="store_true",
                        help="leave the index, cache and archived chapters in the corpus")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "search.json")
    parser.add_argument("--phase", choices=("build", "fts", "query", "update"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--workspace", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--texts", help=argparse.SUPPRESS)
    parser.add_argument("--empty", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        return run_phase(args)
    if args.quick:
        if "--sizes" not in sys.argv:
            args.sizes = "1000"
        args.repeats, args.queries, args.process_queries, args.updates = 1, 10, 10, 2
    sizes = [int(s) for s in args.sizes.split(",") if s]
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "benchmark": "search", "command": recorded_command(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "code": code_version(),
        "machine": machine(),
        "results": []}
    for size in sizes:
        result = run_size(size, args, args.cache_dir)
        report["results"].append(result)
        brief = {k: v for k, v in result.items() if k != "queries"}
        print(json.dumps(brief), flush=True)
    report["verdict"] = verdict(report["results"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for row in report["verdict"]:
        state = {True: "met", False: "NOT met", None: "not measured"}[row["met"]]
        print(f"{state:>12}  {row['text']}: {row['value']}")
    return 0


def run_phase(args: argparse.Namespace) -> int:
    ws: Path = args.workspace
    if args.phase == "build":
        out = phase_build(ws)
    elif args.phase == "fts":
        out = phase_fts(ws, args.db)
    elif args.phase == "query":
        out = phase_query(ws, args.db, json.loads(args.texts), args.repeats, args.budget,
                          args.probe)
    else:
        out = phase_update(ws, [Path(p) for p in json.loads(args.texts)], args.empty,
                           args.probe)
    args.result.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
