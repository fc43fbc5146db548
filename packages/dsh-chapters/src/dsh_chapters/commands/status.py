"""`chapters status`: the store, the lock, the pool, search and enrichment at a glance."""

from __future__ import annotations

import argparse
from typing import Any

from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import fold
from dsh_chapters.services.status import status


def run_status(args: argparse.Namespace, inv: Invocation) -> int:
    sections = status(inv.app)
    inv.emit({s.key: s.data for s in sections},
             fold("\n".join(line for s in sections for line in s.lines), wide=args.wide))
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    status_parser = subparsers.add_parser(
        "status", parents=[common], help="the store, the lock and the pool at a glance",
        description="Store root, projectKey, chapters, artifacts, sessions, the last archive, "
                    "the writer lock and the pool.")
    status_parser.add_argument("--wide", action="store_true",
                               help="one line per item, however long")
    status_parser.set_defaults(run=run_status)
