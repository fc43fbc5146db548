"""Start-up: the methods stdlib dataclasses write, compiled once and kept like bytecode.

The domain's records are frozen dataclasses (STYLE.md), and Python 3.11 writes each one's
methods (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`) as source
text and compiles it every time the class is defined: in every process, for every class. A
`chapters search` defines about fifty at start-up, and compiling their methods took about
45 ms of a 200 ms search process (docs/search.md, "Speed"). `dataclasses` compiles that text
with the builtin `exec`; `install` gives the module an `exec` that looks the text up in a table
of compiled code first.

The table's key is the source text itself, so what it hands back is always the compilation of
exactly that text: a class is the same with the table as without it. It is kept in one file
beside this package's bytecode and written the way Python writes bytecode: never when bytecode
is not written, through a temporary file and a rename, and ignored when it is unreadable or
was written by another Python.

`dataclasses` also imports `inspect` (and with it `ast`, `dis`, `tokenize` and `linecache`,
about 8 ms of every process) only to write a docstring for a class that has none. Before it is
imported, it is given a stand-in that imports the real `inspect` at the first use; nothing else
sees the stand-in, and every other `import inspect` gets the real module.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import marshal
import os
import sys
from types import CodeType, ModuleType
from typing import Any


class _InspectLater(ModuleType):
    """`inspect` as `dataclasses` holds it: the real module, imported when first used."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get("inspect") is self:  # used while `dataclasses` was being imported
            del sys.modules["inspect"]
        real = importlib.import_module("inspect")
        holder = sys.modules.get("dataclasses")
        if holder is not None and vars(holder).get("inspect") is self:
            holder.inspect = real  # type: ignore[attr-defined]  # later uses go straight there
        return getattr(real, name)


def _import_dataclasses() -> ModuleType:
    if "dataclasses" in sys.modules or "inspect" in sys.modules:
        import dataclasses  # already imported: nothing left to save

        return dataclasses
    stand_in = sys.modules["inspect"] = _InspectLater("inspect")
    try:
        import dataclasses
    finally:
        if sys.modules.get("inspect") is stand_in:  # not replaced by the real one meanwhile
            del sys.modules["inspect"]  # from here on, `import inspect` is the real one
    return dataclasses


dataclasses = _import_dataclasses()

# Written once per Python build: a table from another interpreter is never read.
# The "2": tables written before the methods were compiled without this module's future
# imports hold methods whose annotations are strings, and are never read.
_HEADER = f"dsh-chapters dataclass methods 2\n{sys.version}\n".encode()
# Past this many texts (classes of older versions piling up), the table is written again
# with only what this process used.
_MAX_ENTRIES = 4096
# The modules whose records the table holds: this project's packages and plugins.
_OURS = "dsh_chapters"


class _CompiledTable:
    """Source text -> compiled code (marshalled, read back on use), read from `path` and
    written back when it grew. Only our own packages' records go through it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.codes: dict[str, bytes] = {}
        self.used: set[str] = set()
        self.grew = False
        try:
            with open(path, "rb") as f:
                data = f.read()
            if data.startswith(_HEADER):
                table = marshal.loads(data[len(_HEADER):])
                if isinstance(table, dict):
                    self.codes = table
        except (OSError, ValueError, EOFError, TypeError):
            self.codes = {}  # unreadable: compiled again, and written again

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        if (type(source) is not str or globals is None
                or not str(globals.get("__name__", "")).startswith(_OURS)):
            # Not a record of ours (a plugin's, a library's), or not what dataclasses passes
            # today: run it exactly as the builtin would, in the caller's globals.
            frame_globals = sys._getframe(1).f_globals if globals is None else globals
            if type(source) is str:  # compiled without this module's future imports
                source = compile(source, "<string>", "exec", dont_inherit=True)
            builtins.exec(source, frame_globals, locals)
            return
        code = self._code(source)
        self.used.add(source)
        builtins.exec(code, globals, locals)

    def _code(self, source: str) -> CodeType:
        blob = self.codes.get(source)
        if type(blob) is bytes:
            try:
                code = marshal.loads(blob)  # one method's code: the table is read as used
            except (ValueError, EOFError, TypeError):
                code = None  # a damaged entry: compiled again, and written again
            if isinstance(code, CodeType):
                return code
        # `dont_inherit`: this module's `from __future__ import annotations` would turn the
        # methods' annotations into strings, which `dataclasses`' own exec never does.
        code = compile(source, "<string>", "exec", dont_inherit=True)
        self.codes[source] = marshal.dumps(code)
        self.grew = True
        return code

    def save(self) -> None:
        if not self.grew or sys.dont_write_bytecode:
            return
        codes = self.codes
        if len(codes) > _MAX_ENTRIES:
            codes = {text: codes[text] for text in self.used}
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(temporary, "wb") as f:
                f.write(_HEADER + marshal.dumps(codes))
            os.replace(temporary, self.path)
        except (OSError, ValueError):
            # Like bytecode: a table that cannot be written leaves the next process only slower.
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def table_path() -> str:
    """Where the table is kept: this package's bytecode directory (`__pycache__`, or under
    `sys.pycache_prefix` when one is set), one file per Python version."""
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.pycache_prefix:  # as Python places bytecode there: the path less its drive
        folder = os.path.join(sys.pycache_prefix, os.path.splitdrive(here)[1].lstrip(os.sep))
    else:
        folder = os.path.join(here, "__pycache__")
    return os.path.join(folder, f"dataclass-methods.{sys.implementation.cache_tag}.marshal")


def install(path: str | None = None) -> _CompiledTable | None:
    """Give `dataclasses` the table's `exec`, once per process; returns the table (None when
    one was installed already, or `dataclasses` has an `exec` of its own)."""
    if "exec" in vars(dataclasses):
        return None
    table = _CompiledTable(path or table_path())
    dataclasses.exec = table.exec  # type: ignore[attr-defined]
    import atexit

    atexit.register(table.save)
    return table
