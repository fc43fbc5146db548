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
    "redaction_credentials": (315, 630),
    "redaction_benign_lines": (10_000, 20_000),
    "hostile_rounds": (1, 3),
    "sigkills": (12, 60),
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
        "One poisoned file never stops a machine. This page is the last full run of the",
        "reliability suite: every figure below was measured by it, against real components",
        "(local-path git pools, the fs store, the harness readers, the redaction chokepoint).",
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
    lines += ["", "Sizes (bounded, full): " + ", ".join(
        f"{k} {b}/{f}" for k, (b, f) in SIZES.items()), ""]
    return "\n".join(lines)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _RESULTS is None:
        return
    target = session.config.getoption("--reliability-report")
    path = Path(target) if target else (None if _RESULTS.bounded else REPORT)
    if path is None:
        return
    outcome = "all parts passed" if exitstatus == 0 else f"FAILED (pytest exit {exitstatus})"
    path.write_text(_render(_RESULTS, outcome), encoding="utf-8")
