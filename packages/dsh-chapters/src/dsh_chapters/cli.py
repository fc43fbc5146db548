"""The `chapters` command: global options, dispatch, and the exit-code contract.

Exit codes: 0 success, 1 an explained error (`ChaptersError`), 2 bad usage. With `--json`, an
error is a JSON object on stdout too (`{"error", "next", "exitCode"}`), so a program that reads
stdout never has to parse the stderr text.
The commands are a static table (`dsh_chapters.commands.COMMANDS`); only the family of the
command being run is imported, so `chapters --help` pays for no adapter.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from dsh_chapters_core.errors import ArgumentError, ChaptersError, UsageError

from dsh_chapters.commands import COMMANDS, FAMILIES, build_parser
from dsh_chapters.commands.invocation import Invocation, collector_paused
from dsh_chapters.present import cli_argument, error_text, hint_text

__all__ = ["COMMANDS", "FAMILIES", "Invocation", "build_parser", "entry", "leave", "main"]


def entry() -> None:
    """The `chapters` console script: `main`, then leave without tearing Python down."""
    leave(main())


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        with collector_paused():  # the command's family is imported here
            parser = build_parser(words)
            args = parser.parse_args(words)
        if not getattr(args, "command", None):
            parser.print_help(sys.stderr)
            return 2
        cwd = Path(args.chdir).resolve() if args.chdir else Path.cwd()
        if not cwd.is_dir():
            raise UsageError(f"-C {args.chdir}: not a directory", hint="pass an existing directory")
        inv = Invocation(cwd=cwd, json=bool(getattr(args, "json", False)), env=dict(os.environ))
        return int(args.run(args, inv))
    except UsageError as exc:
        return _fail(exc, 2, words)
    except ChaptersError as exc:
        return _fail(exc, 1, words)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def leave(code: int) -> NoReturn:
    """Exit with `code` as a normal exit would (output flushed, exit handlers run), less the
    interpreter's teardown: freeing every module, class and object one at a time took about
    20 ms of a 150 ms search process, and the system frees a process's memory at once (mypy
    leaves the same way). While another thread still runs, the normal exit waits for it."""
    import atexit

    threading = sys.modules.get("threading")
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_handlers is None or (threading is not None and threading.active_count() > 1):
        sys.exit(code)
    _flush()
    run_handlers()
    _flush()
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        # A reader that went away (a closed pipe) or a closed stream: nothing to deliver.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _fail(exc: ChaptersError, code: int, words: Sequence[str]) -> int:
    """The error on stderr for a person; under `--json` also as JSON on stdout."""
    sys.stderr.write(f"chapters: {error_text(exc)}\n")
    if "--json" in words[:words.index("--")] if "--" in words else "--json" in words:
        message = exc.worded(cli_argument) if isinstance(exc, ArgumentError) else exc.message
        sys.stdout.write(json.dumps({"error": message, "next": hint_text(exc), "exitCode": code},
                                    ensure_ascii=False) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
