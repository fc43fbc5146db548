"""The compiled table of dataclass methods (dsh_chapters/startup.py): a class defined through it
is the class Python defines without it, the table is written like bytecode, and a bad table is
only slower."""

from __future__ import annotations

import dataclasses
import marshal
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dsh_chapters import startup

_CLASS = '''
from dataclasses import dataclass, field

@dataclass(frozen=True, slots=True)
class Record:
    """A record."""

    name: str
    count: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)
    hidden: str = field(default="", repr=False, compare=False)
'''


def _define(table: object | None) -> type:
    """`Record` defined in a fresh module, through `table`'s exec (or the builtin's)."""
    saved = vars(dataclasses).get("exec")
    if table is None:
        vars(dataclasses).pop("exec", None)
    else:
        dataclasses.exec = table.exec  # type: ignore[attr-defined]
    try:
        module = type(sys)("dsh_chapters_startup_fixture")
        sys.modules["dsh_chapters_startup_fixture"] = module
        namespace = module.__dict__
        exec(compile(_CLASS, "startup_fixture.py", "exec", dont_inherit=True), namespace)
        return namespace["Record"]  # type: ignore[return-value]
    finally:
        sys.modules.pop("dsh_chapters_startup_fixture", None)
        if saved is None:
            vars(dataclasses).pop("exec", None)
        else:
            dataclasses.exec = saved  # type: ignore[attr-defined]


@pytest.fixture
def table_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    yield tmp_path / "__pycache__" / "dataclass-methods.test.marshal"


_METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


def test_a_class_through_the_table_is_the_class_without_it(table_file: Path) -> None:
    plain = _define(None)
    table = startup._CompiledTable(str(table_file))
    cached = _define(table)
    assert table.grew and len(table.codes) == len(_METHODS)
    for name in _METHODS:
        a, b = getattr(plain, name).__code__, getattr(cached, name).__code__
        assert (a.co_code, a.co_consts, a.co_names, a.co_varnames) == (
            b.co_code, b.co_consts, b.co_names, b.co_varnames), name
    one, two = cached("a", 2, ("x",), hidden="h"), cached("a", 2, ("x",), hidden="other")
    assert one == two and hash(one) == hash(two)  # `hidden` is not compared
    assert repr(one) == "Record(name='a', count=2, tags=('x',))"
    assert cached("b").tags == () and cached("b").count == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.name = "c"  # type: ignore[misc]
    assert not hasattr(one, "__dict__")  # slots, as asked
    assert cached.__doc__ == "A record."
    # The methods' annotations are evaluated, as without the table (never left as text).
    assert cached.__init__.__annotations__ == plain.__init__.__annotations__
    assert plain.__init__.__annotations__["count"] is int


def test_a_record_without_a_docstring_gets_its_signature_as_without_the_table() -> None:
    probe = ("import dsh_chapters, dataclasses, sys\n"
             "assert 'inspect' not in sys.modules\n"
             "@dataclasses.dataclass\n"
             "class Pair:\n"
             "    left: int\n"
             "    right: str = ''\n"
             "import inspect\n"
             "print(Pair.__doc__, inspect.signature(Pair), dataclasses.inspect is inspect)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "Pair(left: int, right: str = '') (left: int, right: str = '') -> None True"


def test_every_record_of_ours_has_a_docstring() -> None:
    """Read from the source, so a record that only some command defines is caught too."""
    import ast

    root = Path(__file__).resolve().parents[2]
    missing = []
    for folder in ("packages", "adapters"):
        for path in sorted((root / folder).glob("*/src/**/*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and not ast.get_docstring(node) and any(
                        word in ast.unparse(d) for d in node.decorator_list
                        for word in ("dataclass", "define", "frozen")):
                    missing.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    assert not missing, "records without a docstring:\n" + "\n".join(missing)


_SEARCH_PROBE = """
import atexit, os, sys
atexit.register(lambda: print("inspect imported" if "inspect" in sys.modules else "no inspect"))
from dsh_chapters.cli import main
main(["-C", sys.argv[1], "search", "session", "--json"])
"""


def test_a_search_process_never_imports_inspect(tmp_path: Path) -> None:
    """A record without a docstring makes `dataclasses` import `inspect` (with `ast`, `dis` and
    `tokenize`: milliseconds of every search process) to write one; the records a search
    defines all have theirs."""
    from tests.app.archive_workspace import CLAUDE_MAIN, make_workspace

    ws = make_workspace(tmp_path / "ws")
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home"), "DSH_CHAPTERS_HARNESS_ID": "t"}
    subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(ws), "archive",
                    str(CLAUDE_MAIN)], env=env, capture_output=True, check=True)
    for _ in range(2):  # the first search may build what the second reads as it is
        done = subprocess.run([sys.executable, "-c", _SEARCH_PROBE, str(ws)], env=env,
                              capture_output=True, text=True, check=True)
        assert done.stdout.strip().splitlines()[-1] == "no inspect"
        assert '"matches"' in done.stdout


def test_the_saved_table_serves_the_next_process_without_compiling(table_file: Path) -> None:
    first = startup._CompiledTable(str(table_file))
    _define(first)
    first.save()
    assert table_file.read_bytes().startswith(startup._HEADER)
    second = startup._CompiledTable(str(table_file))
    assert set(second.codes) == set(first.codes)
    record = _define(second)
    assert not second.grew  # every method came from the table
    assert record("a") == record("a")
    mtime = table_file.stat().st_mtime_ns
    second.save()  # nothing new: not written again
    assert table_file.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("content", [
    b"", b"garbage", b"dsh-chapters dataclass methods\nPython 0.0\n" + marshal.dumps({}),
    startup._HEADER + b"\x00\x01", startup._HEADER + marshal.dumps(["not", "a", "table"]),
])
def test_a_bad_table_is_only_slower(table_file: Path, content: bytes) -> None:
    table_file.parent.mkdir(parents=True)
    table_file.write_bytes(content)
    table = startup._CompiledTable(str(table_file))
    assert table.codes == {}
    record = _define(table)
    assert record("a", 1) == record("a", 1)
    table.save()
    assert set(startup._CompiledTable(str(table_file)).codes) == set(table.codes)


def test_nothing_is_written_when_bytecode_is_not(table_file: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    table = startup._CompiledTable(str(table_file))
    _define(table)
    table.save()
    assert not table_file.exists()


def test_a_table_where_a_file_stands_is_not_an_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    (tmp_path / "__pycache__").write_text("a file, not a directory")
    table = startup._CompiledTable(str(tmp_path / "__pycache__" / "t.marshal"))
    _define(table)
    table.save()  # the directory cannot be made: only slower
    assert (tmp_path / "__pycache__").read_text() == "a file, not a directory"


def test_an_overfull_table_is_written_again_with_what_was_used(
        table_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "_MAX_ENTRIES", 10)
    table = startup._CompiledTable(str(table_file))
    for k in range(12):
        table.exec(f"def __create_fn__():\n def f{k}(): return {k}\n return f{k}",
                   {"__name__": "dsh_chapters_x"}, {})
    table.used.clear()
    _define(table)
    table.save()
    assert set(startup._CompiledTable(str(table_file)).codes) == table.used
    assert len(table.used) == len(_METHODS)


def test_other_calls_run_as_the_builtin_runs_them(table_file: Path) -> None:
    table = startup._CompiledTable(str(table_file))
    space: dict[str, object] = {}
    table.exec(compile("x = 1", "<test>", "exec"), space, space)  # code, not text
    assert space["x"] == 1
    table.exec("found = __name__", None, space)  # no globals: the caller's, as the builtin
    assert space["found"] == __name__
    theirs = {"__name__": "a_library"}
    table.exec("y = 2", theirs)  # not one of our modules: compiled as the builtin would
    assert theirs["y"] == 2
    table.exec("def f(a: int) -> None: pass", theirs)  # annotations evaluated, as dataclasses'
    assert theirs["f"].__annotations__ == {"a": int, "return": None}  # type: ignore[attr-defined]
    assert table.codes == {}


def test_a_damaged_entry_is_compiled_again(table_file: Path) -> None:
    first = startup._CompiledTable(str(table_file))
    _define(first)
    damaged = iter([b"not marshal", marshal.dumps(None), marshal.dumps(1), b""] * 2)
    first.codes = {text: next(damaged) for text in first.codes}
    first.grew = False
    record = _define(first)
    assert first.grew and record("a") == record("a")


def test_the_command_line_defines_its_records_through_the_table(tmp_path: Path) -> None:
    probe = ("import dataclasses, dsh_chapters, dsh_chapters_core.config as c; "
             "print(dataclasses.exec.__self__.path, c.Config().search_body_weight)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    name = f"dataclass-methods.{sys.implementation.cache_tag}.marshal"
    assert out[0].startswith(str(tmp_path)) and out[0].endswith(name)  # the prefix is honoured
    assert out[1] == "3.0"
    written = Path(out[0])
    assert written.read_bytes().startswith(startup._HEADER)  # written at exit, like bytecode
    again = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    assert again == out


def test_a_table_that_cannot_replace_the_old_one_leaves_nothing_behind(
        table_file: Path) -> None:
    table_file.mkdir(parents=True)  # a directory where the table goes: the rename fails
    table = startup._CompiledTable(str(table_file))
    _define(table)
    table.save()
    assert table_file.is_dir() and list(table_file.parent.iterdir()) == [table_file]
