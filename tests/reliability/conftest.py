"""The reliability suite's sizes and its report.

`--bounded` runs every part at a size that fits the CI budget; without it the sizes of the
issue run (see SIZES). Every part records its figures through the `record` fixture; a full run
writes them to docs/reliability.md (a bounded run writes them only where
`--reliability-report` points), so the page always says exactly what was run.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "reliability.md"

# name -> (bounded, full)
SIZES: dict[str, tuple[int, int]] = {
    "fuzz_examples": (30, 120),
    "redaction_credentials": (330, 660),  # 5 and 10 of each credential kind
    "redaction_benign_lines": (10_000, 20_000),
    "hostile_rounds": (1, 3),
    "sigkills": (12, 50),
    "soak_operations": (20, 200),  # per machine, against each pool kind
    "kill_objects": (3, 8),  # objects of each kind a local-path sync is killed at (1..n)
    "damages_per_file": (1, 5),  # of damage.DAMAGES, each file of the damage matrix meets
}


@dataclass
class Results:
    bounded: bool
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # part, measure, value

    def add(self, part: str, measure: str, value: Any) -> None:
        self.rows.append((part, measure, str(value)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bounded", action="store_true", help="CI sizes (see SIZES)")
    parser.addoption("--reliability-report", default="", help="write the report here")


_RESULTS: Results | None = None


@pytest.fixture(scope="session")
def results(request: pytest.FixtureRequest) -> Results:
    global _RESULTS
    if _RESULTS is None:
        _RESULTS = Results(bounded=bool(request.config.getoption("--bounded")))
    return _RESULTS


@pytest.fixture(scope="session")
def size(results: Results) -> Any:
    def pick(name: str) -> int:
        bounded, full = SIZES[name]
        return bounded if results.bounded else full

    return pick


@pytest.fixture
def record(results: Results, request: pytest.FixtureRequest) -> Iterator[Any]:
    part = request.node.module.__name__.rsplit(".", 1)[-1].removeprefix("rel_")

    def add(measure: str, value: Any) -> None:
        results.add(part, measure, value)

    yield add


def _render(results: Results, outcome: str) -> str:
    lines = [
        "# Reliability",
        "",
        "<!-- Written by tests/reliability (`hatch run reliability`). Do not edit. -->",
        "",
        "One poisoned file never stops a machine. This page is the last written run of the",
        f"reliability suite, at its {'bounded (CI)' if results.bounded else 'full'} sizes "
        "(listed at the end): every figure below was",
        "measured by it, against real components (local-path git pools, `git http-backend`",
        "behind a token check and the TreeDX fake on loopback, the recorded model tape, the fs",
        "store, the harness readers, the redaction chokepoint).",
        "",
        "## What is contained",
        "",
        "- A chapter or rule whose frontmatter cannot be read (an impossible date, a wrong type,",
        "  a YAML alias, nesting past `frontmatterMaxDepth`, a block over",
        "  `frontmatterMaxBytes`) is skipped by every command and named, with the reason, in",
        "  `chapters status` and `chapters doctor`.",
        "- Copy-in judges every pool file before writing it: §2.2 path grammar and reserved",
        "  names, `poolFileMaxBytes`, frontmatter, artifact hashes, and namespace ownership",
        "  (a file lands only in its writer's namespace, never in this machine's). A refused",
        "  file is quarantined with its code, reason and pool head, and the sync goes on.",
        "- Every store and mirror read and publish refuses a symlink, a FIFO or a path through",
        "  a symlinked directory; unsafe pool tree entries (`..`, `.git`, names over 255 bytes)",
        "  are never checked out.",
        "- Readers refuse devices, FIFOs and directories before reading, stop a held line at",
        "  `readerLineMaxBytes` with the numbers, treat nesting past `readerJsonMaxDepth` as a",
        "  malformed line, replace lone surrogates, and any other shape error is one `InputError`",
        "  line (exit 1); session ids over `sessionIdMaxChars` are refused.",
        "- Redaction matches escaped forms and re-checks the rendered body ([redaction.md](",
        "  redaction.md)). A damaged mirror is rebuilt at open (§5.2); a stale pool lock fails",
        "  with code `locked` and its path; `chapters doctor --repair` clears it when no process",
        "  holds it.",
        "- Three machines converge on every pool kind (local path, `git http-backend`, TreeDX)",
        "  after seeded archives, grown sessions, syncs in every mode, rules, enrichment and",
        "  index builds, with pushes racing on one pool head (§5.2: the losers rebuild and push",
        "  again): every store holds every file byte for byte, nothing is lost, no sync fails.",
        "- No live token (as is, URL-encoded, or base64 at any alignment, as in a Basic header)",
        "  is found in any output, store, mirror (git objects decompressed), log, config, pool or",
        "  server log after a networked run and a wrong-token sync; credential files are 0600",
        "  under DSH_HOME (§2.1).",
        "",
        "- A loopback proxy in front of a `git http-backend` pool and the TreeDX fake injects",
        "  refused connections, resets mid-body, 401, 403, 500, 503 with Retry-After, stalled and",
        "  truncated bodies, on the pull and on the push: archive never fails, sync exits 1 with",
        "  its failure code (no traceback, no token), status shows local-only with the pending",
        "  count, and the next sync delivers the backlog.",
        "- The hostile pool is planted into local-path, `git http-backend` and TreeDX pools; the",
        "  SIGKILLs hit archive, sync (local, mid-request over HTTP and TreeDX), index builds and",
        "  enrichment (in a model call and at its store writes).",
        "- A push or a pull killed at its first objects never publishes or trusts a partial",
        "  closure: objects land children first (blobs, trees, then the commit) and only a ref",
        "  vouches for a commit; killed over a local path (at each of its first objects) and",
        "  over `git http-backend` (before the server, mid-pack, after its answer), every",
        "  machine and a freshly linked one sync, and the pool stays `git fsck --strict` clean.",
        "  A mirror whose objects do not read is marked and moved aside by the next sync.",
        "- Pool names no machine can hold (not UTF-8, over 200 bytes, a control character, a",
        "  device name, a `.git` alias, a trailing dot) are never checked out: quarantined and",
        "  named, and every sync goes on.",
        "- Quarantine means never served: no door (search, `list --pool`, `show`, `artifact`,",
        "  `notice`, the MCP tools, the viewer) gives back a word of a file copy-in set aside,",
        "  and none of its bytes reach the search cache.",
        "- The read doors read only documents (chapters, artifacts, rules, topic shards) through",
        "  one containment check, and open every path search prints at its anchor's line (a",
        "  line is what `\\n` ends).",
        "- The damage matrix: every file of the store, the mirror and the pool made unreadable,",
        "  the wrong type, garbage, too deep and too big, against every door: named errors,",
        "  never a traceback or a hang; derived `cache/` and `index/` are rebuilt.",
        "- Readers bound their inputs: JSON depth, side files (regular and inside the session",
        "  folder), decompressed bytes and ratio, with the counts in the report.",
        "- `chapters doctor` checks chapters and artifacts against their sha256, the mirror's",
        "  and a local pool's closure and stale temp files; `--repair` fixes what it can.",
        "",
        "## Not in this suite yet",
        "",
        "- No soak operation damages a mirror, yet the full soak still moves one aside now and",
        "  then (the `moved aside` figure below; before the pack-path fix it was nearly every",
        "  HTTP sync). Why is not recorded yet: the sync report names the mirror moved, not the",
        "  problem it had, so the soak counts these instead of failing on them.",
        "- The soak's three machines run as threads of one process (their syncs race on the",
        "  pool for real), not as three processes.",
        "- A TreeDX lease taken by a push killed before it heard the answer is not recorded",
        "  anywhere, so `chapters doctor --repair` cannot close it: it ends at its TTL.",
        "- The hostile names are planted into a local-path pool only; TreeDX judges names by",
        "  the same rule (`pool_layout.name_problem`) but no TreeDX pool is planted with them.",
        "- The damage matrix damages one file at a time; a bounded (CI) run meets each file",
        "  with one of the five damages, a full run with all five.",
        "",
        "## The last run",
        "",
        f"- run: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}, "
        f"{'bounded (CI) sizes' if results.bounded else 'full sizes'}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPU(s)",
        f"- outcome: {outcome}",
        "",
        "| part | measure | value |",
        "|---|---|---|",
    ]
    lines += [f"| {p} | {m} | {v} |" for p, m, v in results.rows]
    from tests.reliability.served_pools import SIZES as SERVED  # the networked parts' sizes

    lines += ["", "Sizes (bounded, full): " + ", ".join(
        f"{k} {b}/{f}" for k, (b, f) in {**SIZES, **SERVED}.items()), ""]
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config
                            ) -> None:
    """The table docs/reliability.md gets, printed at the end of every run."""
    if _RESULTS is None or not _RESULTS.rows:
        return
    terminalreporter.section("reliability (the table of docs/reliability.md)")
    width = max(len(p) for p, _m, _v in _RESULTS.rows)
    for part, measure, value in _RESULTS.rows:
        terminalreporter.write_line(f"{part:<{width}}  {measure}: {value}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _RESULTS is None:
        return
    target = session.config.getoption("--reliability-report")
    path = Path(target) if target else (None if _RESULTS.bounded else REPORT)
    if path is None:
        return
    outcome = "all parts passed" if exitstatus == 0 else f"FAILED (pytest exit {exitstatus})"
    path.write_text(_render(_RESULTS, outcome), encoding="utf-8")
