"""`chapters scan [--json]`: where credentials already stand in the store, the mirror and the
pool's history, by file, line and family, never the credential itself.

Exit codes: 0 when nothing is found, 1 when something is (the lines say where), so a script
can run `chapters scan || alert`.
"""

from __future__ import annotations

import argparse
from typing import Any

from dsh_chapters.commands.invocation import Invocation

WIDTH = 100


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    scan = subparsers.add_parser(
        "scan", parents=[common], help="find credentials already in the store and the pool",
        description="Run the current redaction rules over the store, the mirror and the "
                    "pool's history (as this machine holds it) and report every credential "
                    "found by file, line and family, with the first 8 hex digits of its "
                    "SHA-256. Never prints a credential. docs/redaction.md says what to do "
                    "next.")
    scan.set_defaults(run=run_scan)


def _header(hit: Any) -> str:
    path = hit.store_path or hit.path or "(an object no commit names)"
    if hit.where != "pool history":
        where = hit.where
    elif hit.commit:
        where = f"pool history, commit {hit.commit[:12]} ({hit.source} objects)"
    else:
        where = f"pool history ({hit.source} objects)"
    if len(where) + 2 + len(path) <= WIDTH:
        return f"{where}: {path}"
    return f"{where}:\n  {path}"


def _lines(hits: Any) -> list[str]:
    """Hits grouped by file: the place and path once, then a line per credential."""
    lines: list[str] = []
    last = None
    for hit in hits:
        header = _header(hit)
        if header != last:
            lines.append(header)
            last = header
        lines.append(f"    line {hit.line:<7}{hit.family:<24}sha256={hit.sha256}")
    return lines


def run_scan(args: argparse.Namespace, inv: Invocation) -> int:
    from dsh_chapters.services import scan  # reads the store, the mirror and the history

    report = scan.scan(inv.app)
    scanned = ", ".join(f"{n} {where} file(s)" for where, n in report.files.items())
    lines = _lines(report.hits)
    if report.clean:
        lines.append(f"scan: no credential found ({scanned}; pool history: {report.history})")
    else:
        where = ", ".join(f"{n} in the {w}" for w, n in report.counts.items() if n)
        lines += [
            f"scan: {len(report.hits)} credential(s) found: {where}",
            f"      ({scanned}; pool history: {report.history})",
            "next: rotate each credential now (its sha256 is `printf %s \"$SECRET\" | "
            "sha256sum | cut -c1-8`),",
            "      then drop it from the pool as docs/redaction.md says (\"Found by a scan\")",
        ]
        if any(hit.store_path for hit in report.hits):
            lines.insert(-4, "(mirror and pool files are named by their store twins; --json "
                             "has both paths)")
    if report.unreadable:
        lines.append(f"scan: {len(report.unreadable)} file(s) could not be read: "
                     + ", ".join(report.unreadable[:5]))
    inv.emit(report.to_json(), "\n".join(lines))
    return 0 if report.clean else 1
