"""What this machine set aside: store files that cannot be read, and pool files copy-in refused.

One poisoned file never stops a machine: every command skips it, and `chapters status` and
`chapters doctor` name it here with its path and the reason (§3.3, §11).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.sync.state import read_quarantine

from dsh_chapters.app import App

LABEL = "quarantine".ljust(11)  # status aligns values after an 11-column label
MORE = " " * 11


@dataclass(frozen=True, slots=True)
class QuarantineRow:
    """One file this machine set aside, in the store or the pool, with its path and the reason."""

    where: str  # "store" | "pool"
    path: str  # store-relative or pool-relative
    reason: str
    code: str = ""  # copy-in's QuarantineCode for pool files
    commit: str = ""  # the pool head at which copy-in found it

    def to_json(self) -> dict[str, str]:
        from dsh_chapters.wire import to_json  # only `--json` pays for the converter

        return to_json(self)


def quarantined(app: App) -> list[QuarantineRow]:
    rows = [QuarantineRow("store", path, reason)
            for path, reason in app.factories.store_quarantine(app)]
    rows += [QuarantineRow("pool", r.get("path", ""), r.get("reason", ""), r.get("code", ""),
                           r.get("commit", "")) for r in read_quarantine(app.store_tree)]
    return rows


def row_line(row: QuarantineRow) -> str:
    seen = f" (pool at {row.commit[:12]})" if row.commit else ""
    return f"{row.where} {row.path}: {row.reason}{seen}"


def status_section(app: App) -> tuple[dict[str, Any], list[str]]:
    """`chapters status`'s quarantine lines: one count, then one line per file."""
    rows = quarantined(app)
    data = {"count": len(rows), "files": [r.to_json() for r in rows]}
    if not rows:
        return data, []
    lines = [f"{LABEL}{len(rows)} file(s) set aside, skipped by every command "
             "(`chapters doctor` says what to do)"]
    lines += [f"{MORE}{row_line(r)}" for r in rows]
    return data, lines
