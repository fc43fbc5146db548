"""`chapters doctor [--repair]`: one command that checks the store, the mirror, the index and
the credentials, prints what it found and what it would repair, and repairs with `--repair`.

Exit codes: 0 when nothing is left to fix, 1 when something is (the lines say what), so a
script can run `chapters doctor || chapters doctor --repair`.
"""

from __future__ import annotations

import argparse
from typing import Any

from dsh_chapters_core.errors import ConfigError

from dsh_chapters.commands.invocation import Invocation


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    doctor = subparsers.add_parser(
        "doctor", parents=[common], help="check the store, mirror, index and credentials",
        description="Check the store (files that cannot be read, symlinks), the pool files "
                    "copy-in quarantined, the writer lock, the mirror's integrity and the "
                    "pool's lock, the index and the credentials, and lists record types the "
                    "transcript readers met but do not know. Prints what it found and what "
                    "--repair would do; --repair does it.")
    doctor.add_argument("--repair", action="store_true",
                        help="do every repair that needs no person")
    doctor.set_defaults(run=run_doctor)


def _line(finding: Any) -> str:
    head = f"{finding.area:<12}{finding.code} {finding.path}: {finding.detail}"
    if finding.repaired:
        return f"{head}\n{'':<12}repaired: {finding.repaired}"
    if finding.repair:
        return f"{head}\n{'':<12}--repair would: {finding.repair}"
    return f"{head}\n{'':<12}a person fixes this (nothing is repaired automatically)"


def run_doctor(args: argparse.Namespace, inv: Invocation) -> int:
    from dsh_chapters.services import doctor  # its checks reach into every adapter

    try:
        app = inv.app
    except ConfigError as exc:
        # A broken config stops every other command; the doctor names it and stops too.
        data = {"healthy": False, "repair": bool(args.repair), "findings": [{
            "area": "config", "code": "config-invalid", "path": "", "detail": exc.message,
            "repair": "", "repaired": ""}]}
        inv.emit(data, f"{'config':<12}config-invalid: {exc.message}\n{'':<12}next: {exc.hint}")
        return 1
    report = doctor.run_doctor(app, repair=bool(args.repair))
    if not report.findings:
        text = "doctor: store, lock, mirror, index and credentials are healthy"
    else:
        text = "\n".join(_line(f) for f in report.findings)
        left = sum(1 for f in report.findings if not f.repaired)
        text += (f"\ndoctor: {len(report.findings)} finding(s), {left} left to fix"
                 + ("" if args.repair or not any(f.repair for f in report.findings)
                    else " (`chapters doctor --repair` does what it can)"))
    inv.emit(report.to_json(), text)
    return 0 if report.healthy else 1
