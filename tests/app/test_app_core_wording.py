"""The core names no caller's command or flag; the CLI words the core's codes as it always has.

STYLE.md, "The domain returns data and structured errors; wording belongs to each caller": the
core's errors carry `NextStep` and `Argument` codes, `dsh_chapters.present` words them as
`chapters …` commands and `--flags`, and the MCP server words them as its tools' own.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import dsh_chapters_core
import pytest
from dsh_chapters import present
from dsh_chapters.cli import main
from dsh_chapters.commands import COMMANDS, build_parser
from dsh_chapters_core.errors import (
    Argument,
    ArgumentError,
    ChaptersError,
    NextStep,
    UnsafePathError,
    UsageError,
)

from tests.core.test_core_notice import CLI_WORDS

CORE = Path(dsh_chapters_core.__file__).parent


def _cli_flags() -> set[str]:
    """Every `--flag` of `chapters` and of each of its commands, from the real parser."""
    flags: set[str] = set()
    pending = [build_parser()]
    while pending:
        parser = pending.pop()
        for action in parser._actions:
            flags.update(s for s in action.option_strings if s.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                pending.extend(action.choices.values())
    return flags


def _docstrings(tree: ast.Module) -> set[int]:
    """Docstrings are the core's own documentation, read by its developers, not by a user."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(source: str, where: str) -> list[tuple[str, int, str]]:
    """Every string constant of `source` (f-string pieces included), no docstring."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [(where, node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skip]


def _offending(strings: list[tuple[str, int, str]]) -> list[str]:
    """The strings naming `chapters <command>` (from the command table) or a CLI `--flag`."""
    commands = sorted({entry.name for entry in COMMANDS})
    command = re.compile(r"\bchapters (?:" + "|".join(map(re.escape, commands)) + r")\b")
    flags = sorted(_cli_flags())
    flag = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, flags)) + r")(?![\w-])")
    return [f"{where}:{line}: {text!r}" for where, line, text in strings
            if command.search(text) or flag.search(text)]


def test_the_core_names_no_cli_command_and_no_cli_flag() -> None:
    assert {"--max-tokens", "--offset", "--limit", "--topic", "--remote"} <= _cli_flags()
    strings = [s for path in sorted(CORE.rglob("*.py"))
               for s in _strings(path.read_text(encoding="utf-8"), str(path.relative_to(CORE)))]
    assert len(strings) > 1000  # the walk found the core's source
    assert _offending(strings) == []


def test_the_walk_catches_a_command_or_a_flag_in_a_message() -> None:
    """Not vacuous: the same walk and patterns flag the wording the core must not hold."""
    source = (
        'def f(n):\n    """`chapters sync` in a docstring is documentation."""\n'
        '    raise E("x", hint=f"ask again with --max-tokens {n} or more")\n'
        'G = "run chapters sync"\nH = "--max-tokens-ish is no flag; the sync chapters are"\n'
    )
    found = _offending(_strings(source, "f.py"))
    assert sorted(found) == ["f.py:3: 'ask again with --max-tokens '",
                             "f.py:4: 'run chapters sync'"]


def test_every_step_and_argument_has_cli_words() -> None:
    for step in NextStep:
        assert present.step_text(step, {"needed": 7, "schemes": "file"}).strip(), step
    assert {present.cli_argument(a) for a in Argument} == {
        "--max-tokens", "--offset", "--limit", "--topic"}
    assert present.cli_argument(Argument.OFFSET, 200) == "--offset 200"


@pytest.mark.parametrize(("error", "printed"), [
    (ArgumentError(Argument.MAX_TOKENS, "must be at least 1, got 0", hint="the default is 4000"),
     "--max-tokens must be at least 1, got 0\n  next: the default is 4000"),
    (ArgumentError(Argument.OFFSET, "is past the end: a.md has 3 lines", value=9,
                   hint="use an offset below 3"),
     "--offset 9 is past the end: a.md has 3 lines\n  next: use an offset below 3"),
    (ArgumentError(Argument.OFFSET, "must be 0 or more, got -1", step=NextStep.READ_FROM_TOP),
     "--offset must be 0 or more, got -1\n  next: --offset 0 reads from the top"),
    (ChaptersError("search refused", step=NextStep.RAISE_MAX_TOKENS, data={"needed": 600}),
     "search refused\n  next: ask again with --max-tokens 600 or more"),
    (ChaptersError("no knowledge pool is linked (local-only)", step=NextStep.LINK_POOL),
     "no knowledge pool is linked (local-only)\n  next: run `chapters link <path>` or "
     "`chapters link <https-url> < token-file`"),
    (UsageError("empty query", step=NextStep.PASS_QUERY_OR_TOPIC),
     "empty query\n  next: pass words to search for, or --topic <name>"),
    (UnsafePathError("s/a.md", "is a symlink"),
     "refused: s/a.md is a symlink\n  next: replace it with the regular file it should be, or "
     "remove it (`chapters doctor` lists every such file)"),
    (ChaptersError("plain"), "plain"),
])
def test_the_cli_words_each_code_as_it_always_has(error: ChaptersError, printed: str) -> None:
    assert present.error_text(error) == printed


def test_the_neutral_words_name_no_command() -> None:
    """Outside a caller (logs), an error says its step's code and its numbers."""
    error = ChaptersError("refused", step=NextStep.RAISE_MAX_TOKENS, data={"needed": 9})
    assert str(error) == "refused\n  next: raise-max-tokens (needed=9)"
    assert str(ArgumentError(Argument.OFFSET, "is past the end", value=4)) == (
        "offset=4 is past the end")


def test_the_cli_gives_the_notice_the_words_its_goldens_hold() -> None:
    assert present.NOTICE_WORDS == CLI_WORDS


def test_a_bad_offset_prints_the_flag_and_its_next_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "hostA")
    ws = tmp_path / "w"
    (ws / ".dsh-chapters" / "s" / "chapters").mkdir(parents=True)
    (ws / ".dsh-chapters" / "s" / "chapters" / "001-x.md").write_text("one\ntwo\n",
                                                                    encoding="utf-8")
    chapter = ".dsh-chapters/s/chapters/001-x.md"
    code = main(["-C", str(ws), "artifact", chapter, "--offset", "-1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err == ("chapters: --offset must be 0 or more, got -1\n"
                   "  next: --offset 0 reads from the top\n")
    code = main(["-C", str(ws), "artifact", chapter, "--offset", "1"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"{chapter}: lines 2-2 of 2\n")
