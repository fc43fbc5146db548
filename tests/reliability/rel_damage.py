"""The damage matrix (damage.py): every file of the store, the mirror and the local-path
pool, made unreadable, the wrong type, garbage, too deep and too big, against every door of
the archive. Zero tracebacks, zero hangs; a broken pool or mirror never fails the archive;
search answers when only derived files were damaged (they are rebuilt)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.damage import (
    COMMANDS,
    DAMAGES,
    TARGETS,
    build_template,
    iter_outcomes,
    run_matrix,
    scenarios_for,
)

DERIVED = ("index manifest", "topic shard", "index/", "search cache", "cache/",
           "mirror search cache", "mirror index manifest", "vocabulary")


@pytest.mark.slow
def test_damage_matrix_gives_named_errors_never_tracebacks(
    tmp_path: Path, size: Any, record: Any
) -> None:
    template = build_template(tmp_path / "run", tmp_path / "saved")
    per_file = size("damages_per_file")
    scenarios = scenarios_for(per_file)
    ran = run_matrix(template, scenarios, COMMANDS, tmp_path)
    outcomes = list(iter_outcomes(ran))
    tracebacks = [o for o in outcomes if o["code"] == -1]
    hangs = [o for o in outcomes if o["code"] == -2]
    archive_broken = [o for o in outcomes if o["command"].startswith("archive")
                      and o["code"] != 0 and o["target"].split(" ", 1)[0] in ("pool", "mirror")]
    search_broken = [o for o in outcomes if o["command"].startswith("search")
                     and o["code"] != 0 and o["target"].split(" ", 1)[1] in DERIVED]
    named = Counter(o["code"] for o in outcomes)
    by_kind = Counter(o["damage"] for o in tracebacks)
    report = "\n".join(f"{o['target']} / {o['damage']} / {o['command']}: {o['error']}"
                       for o in [*tracebacks, *hangs, *archive_broken, *search_broken])
    record("damage scenarios", f"{len(ran)} ({len(TARGETS)} files and directories of the "
           f"store, mirror and pool x {per_file} of {len(DAMAGES)} damages: "
           f"{', '.join(DAMAGES)})")
    record("commands run against them", f"{len(outcomes)} ({len(COMMANDS)} a scenario: the "
           "CLI, the MCP tools and the viewer's pages)")
    record("tracebacks / hangs", f"{len(tracebacks)} / {len(hangs)}"
           + (f" ({dict(by_kind)})" if by_kind else ""))
    record("named refusals (exit 1 / 2)", f"{named.get(1, 0)} / {named.get(2, 0)}")
    record("archive failed for a broken pool or mirror", len(archive_broken))
    record("search failed with only derived files damaged", len(search_broken))
    assert not (tracebacks or hangs or archive_broken or search_broken), report
