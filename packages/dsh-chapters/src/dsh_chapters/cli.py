"""The `chapters` command: global options, dispatch, and the exit-code contract.

Exit codes: 0 success, 1 an explained error (`ChaptersError`), 2 bad usage.
Each command family lives in `dsh_chapters.commands.<family>` and exposes
`register(subparsers, common)`; the parser it adds sets `run(args, ctx) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from dsh_chapters_core.errors import ChaptersError, UsageError

from dsh_chapters.__about__ import __version__

# One module per command family; order is the order of `chapters --help`.
COMMAND_FAMILIES: tuple[str, ...] = (
    "identity",  # key, redact
    "archive",  # archive, import, list, show, status
    "rules",  # rule add|list|approve|revoke, notice
    "search",  # search, index, topic merge, artifact
    "pool",  # link, sync, demo (and `list --pool`)
    "enrich",  # enrich run|report|model
    "agents",  # mcp, hook, install, uninstall
    "doctor",  # doctor [--repair]
)


@dataclass
class Invocation:
    """What every command receives: where it runs, how to print, and the environment."""

    cwd: Path
    json: bool
    env: dict[str, str]
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)

    def emit(self, data: Any, text: str | None = None) -> None:
        """Data as JSON under --json, else the human text (or the data's str)."""
        if self.json:
            self.stdout.write(json.dumps(data, ensure_ascii=False, sort_keys=False) + "\n")
        else:
            out = text if text is not None else str(data)
            self.stdout.write(out if out.endswith("\n") or not out else out + "\n")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own exit code is 2 already; keep the text
        raise UsageError(f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print data as JSON")
    parser = _Parser(prog="chapters", description="Keep, share and find an agent's past work.",
                     parents=[common])
    parser.add_argument("-C", dest="chdir", metavar="DIR",
                        help="run as if chapters was started in DIR (as git does)")
    parser.add_argument("--version", action="version", version=f"chapters {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for family in COMMAND_FAMILIES:
        module = importlib.import_module(f"dsh_chapters.commands.{family}")
        module.register(subs, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help(sys.stderr)
            return 2
        cwd = Path(args.chdir).resolve() if args.chdir else Path.cwd()
        if not cwd.is_dir():
            raise UsageError(f"-C {args.chdir}: not a directory", hint="pass an existing directory")
        inv = Invocation(cwd=cwd, json=bool(getattr(args, "json", False)), env=dict(os.environ))
        return int(args.run(args, inv))
    except UsageError as exc:
        sys.stderr.write(f"chapters: {exc}\n")
        return 2
    except ChaptersError as exc:
        sys.stderr.write(f"chapters: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
