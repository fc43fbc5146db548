"""`chapters key` and `chapters redact`: what the archive would call this project, and hide.

`key` reads the git remote from `.git/config` itself (§3.2: no git binary), through the
composition root, so a configured `projectKey` override is honoured. `redact` lets a
user see what the archive would hide (§9) before anything is archived.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.projectkey import derive_project_key
from dsh_chapters_core.redact import FAMILIES, Redaction, redact

from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.plugins import KEY_NAMESPACES


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    key = subparsers.add_parser(
        "key", parents=[common], help="print the projectKey and what it is derived from",
        description="Print the projectKey and the canonical string it is derived from.",
    )
    source = key.add_mutually_exclusive_group()
    source.add_argument("--remote", metavar="URL", help="derive from this remote URL")
    source.add_argument("--path", metavar="DIR", help="derive from this directory (path-derived)")
    key.set_defaults(run=run_key)

    red = subparsers.add_parser(
        "redact", parents=[common], help="redact credentials from stdin to stdout",
        description="Read stdin, write it to stdout with every credential replaced by a marker.",
    )
    red.add_argument("--report", action="store_true",
                     help="print the families that matched, and the total, on stderr")
    red.set_defaults(run=run_redact)


def run_key(args: argparse.Namespace, inv: Invocation) -> int:
    if args.remote is not None:
        identity = derive_project_key(remote=args.remote, namespaces=KEY_NAMESPACES)
    elif args.path is not None:
        directory = (inv.cwd / args.path).resolve()
        if not directory.is_dir():
            raise ChaptersError(f"--path {args.path}: not a directory",
                                hint="pass an existing directory")
        identity = derive_project_key(path=str(directory))
    else:
        # The workspace's own identity: config `projectKey`, else its git remote (`origin`
        # first), else its path (§2.3), exactly as every other command derives it.
        identity = inv.app.identity
    data = {
        "projectKey": identity.project_key,
        "canonical": identity.canonical,
        "derivation": identity.derivation,
    }
    text = (
        f"projectKey  {identity.project_key}\n"
        f"canonical   {identity.canonical}\n"
        f"derivation  {identity.derivation}"
    )
    if identity.derivation == "path-derived":
        text += "\n(path-derived keys differ between machines; add a git remote or set projectKey)"
    inv.emit(data, text)
    return 0


def _read_all(stream: Any) -> tuple[str, bool]:
    """stdin as text; bytes that are not UTF-8 survive as surrogates and are written back."""
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        data: bytes = buffer.read()
        return data.decode("utf-8", "surrogateescape"), True
    return str(stream.read()), False


def _write(stream: Any, text: str, binary: bool) -> None:
    buffer = getattr(stream, "buffer", None)
    if binary and buffer is not None:
        stream.flush()
        buffer.write(text.encode("utf-8", "surrogateescape"))
        buffer.flush()
    else:
        stream.write(text)
        stream.flush()


def _report(result: Redaction, inv: Invocation) -> None:
    counts = dict(result.counts)
    if inv.json:
        data = {"families": {name: counts.get(name, 0) for name in FAMILIES},
                "total": result.total}
        inv.stderr.write(json.dumps(data) + "\n")
        return
    # The families that matched, in report order (there are dozens; --json lists every one).
    matched = [name for name in FAMILIES if counts.get(name)]
    width = max((len(name) for name in [*matched, "total"]), default=5)
    lines = [f"{name:<{width}}  {counts[name]}" for name in matched]
    lines.append(f"{'total':<{width}}  {result.total}")
    inv.stderr.write("\n".join(lines) + "\n")


def run_redact(args: argparse.Namespace, inv: Invocation) -> int:
    patterns = inv.app.config.redaction_patterns  # additive to the built-ins (§12)
    text, binary = _read_all(inv.stdin)
    result = redact(text, patterns)
    _write(inv.stdout, result.text, binary)
    if args.report:
        _report(result, inv)
    return 0
