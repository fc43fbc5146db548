"""The `chapters` commands: a static table, each family's module imported only when it runs.

Every command is one row: its name, the family module that registers its parser, and its
one-line help. `chapters --help` reads the table and imports no command module (so no adapter
stack: dulwich, httpx, mcp or the enrichment code), and static analysis sees every command
(STYLE.md, "Import lazily what a command needs"; hatch adds its commands the same way).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.errors import UsageError


@dataclass(frozen=True, slots=True)
class CommandEntry:
    """One row of the command table: enough for `--help` without importing the family."""

    name: str  # `chapters <name>`
    family: str  # the module `dsh_chapters.commands.<family>` that registers it
    help: str  # the line `chapters --help` shows


# Order is the order of `chapters --help`.
COMMANDS: tuple[CommandEntry, ...] = (
    CommandEntry("key", "identity", "print the projectKey and what it is derived from"),
    CommandEntry("redact", "identity", "redact credentials from stdin to stdout"),
    CommandEntry("scan", "scan", "find credentials already in the store and the pool"),
    CommandEntry("archive", "archive", "archive one session file into chapters"),
    CommandEntry("import", "archive", "archive every session of this project"),
    CommandEntry("list", "library", "one line per archived chapter"),
    CommandEntry("show", "library", "print one chapter"),
    CommandEntry("status", "status", "the store, the lock and the pool at a glance"),
    CommandEntry("rule", "rules", "propose, list, approve and revoke rules"),
    CommandEntry("notice", "rules", "print what a new session is told at its start"),
    CommandEntry("search", "search", "find past chapters, plans and rules"),
    CommandEntry("index", "search", "update the topic shards and the manifest"),
    CommandEntry("topic", "search", "curate topics (merge)"),
    CommandEntry("artifact", "search", "read an artifact or chapter by path or sha"),
    CommandEntry("link", "pool", "show or bind the project's knowledge pool"),
    CommandEntry("sync", "pool", "pull, publish and push the knowledge pool now"),
    CommandEntry("demo", "demo", "two machines share one pool, in temporary workspaces"),
    CommandEntry("enrich", "enrich", "relabel chapters with a model (off the archive path)"),
    CommandEntry("mcp", "agents", "run the MCP server on stdio (for agents)"),
    CommandEntry("hook", "agents", "Claude Code's hook entry point (payload on stdin)"),
    CommandEntry("install", "agents", "wire dsh-chapters into an agent"),
    CommandEntry("uninstall", "agents", "remove exactly what install added"),
    CommandEntry("doctor", "doctor", "check the store, mirror, index and credentials"),
    CommandEntry("watch", "watch", "archive this project's sessions as they are written"),
    CommandEntry("serve", "serve", "browse, search and curate the archive in a local web page"),
)
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(entry.family for entry in COMMANDS))


def _terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`, which argparse's formatter asks for on every
    `add_argument`; importing shutil (with its bz2 and lzma) costs every command's start."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        size = os.get_terminal_size(sys.__stdout__.fileno())  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80
    return size.columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, its default width found without shutil (the same width)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # argparse's own exit code is 2 already; keep the text
        raise UsageError(f"{self.prog}: {message}", hint=f"run `{self.prog} --help`")


def _family_of(argv: Sequence[str]) -> str | None:
    """The family of the command `argv` names (the first word that is not a global option)."""
    names = {entry.name: entry.family for entry in COMMANDS}
    words = iter(argv)
    for word in words:
        if word == "-C":
            next(words, None)
        elif not word.startswith("-"):
            return names.get(word)
    return None


def _may_list_commands(argv: Sequence[str]) -> bool:
    """Whether parsing `argv` may print the command list (the top-level help, or an unknown
    command's error). Only then are the other families' placeholder parsers built: twenty of
    them cost argparse milliseconds on every start. False only when the words before a known
    command are `--json` and `-C DIR`, which print nothing."""
    names = {entry.name for entry in COMMANDS}
    words = iter(argv)
    for word in words:
        if word == "-C":
            next(words, None)
        elif word != "--json":
            return word not in names
    return True


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `chapters` parser. With `argv`, only the family of the command it names is imported;
    the other commands appear in `--help` from the table alone (and only when a run could list
    them). Without, every family is."""
    from dsh_chapters.__about__ import __version__

    common = argparse.ArgumentParser(add_help=False, formatter_class=_Formatter)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print data as JSON")
    parser = _Parser(prog="chapters", description="Keep, share and find an agent's past work.",
                     parents=[common])
    parser.add_argument("-C", dest="chdir", metavar="DIR",
                        help="run as if chapters was started in DIR (as git does)")
    parser.add_argument("--version", action="version", version=f"chapters {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = FAMILIES if argv is None else tuple(f for f in (_family_of(argv),) if f)
    listed = argv is None or _may_list_commands(argv)
    registered: set[str] = set()
    for entry in COMMANDS:
        if entry.name in registered:
            continue
        if entry.family in wanted:
            module = importlib.import_module(f"dsh_chapters.commands.{entry.family}")
            before = set(subs.choices)
            module.register(subs, common)
            registered |= set(subs.choices) - before
        elif listed:  # listed for --help; never run, since its family was not the one asked for
            subs.add_parser(entry.name, help=entry.help, add_help=False)
            registered.add(entry.name)
    return parser
