"""What every command receives: where it runs, how it prints, and the App composed once."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from dsh_chapters.app import App


@contextmanager
def collector_paused() -> Iterator[None]:
    """Start-up (importing a command's modules, composing the App) creates thousands of
    objects that live as long as the process; the cyclic collector's passes over them free
    nothing and cost a search about 5% of its start. Paused for that stretch only: the
    command's own work, and a long-running one (serve, watch, mcp), runs with it on."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _compose(cwd: Path, env: Mapping[str, str]) -> App:
    # Imported on first use: `chapters --help` and `chapters key --remote` compose nothing.
    from dsh_chapters.bootstrap import bootstrap

    return bootstrap(cwd, env)


@dataclass
class Invocation:
    """One command run. `app` is composed on first use and then reused: once per process
    (STYLE.md, "Compose once per process and pass the result down")."""

    cwd: Path
    json: bool
    env: dict[str, str]
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    compose: Callable[[Path, Mapping[str, str]], App] = _compose
    _app: App | None = field(default=None, init=False, repr=False)

    @property
    def app(self) -> App:
        if self._app is None:
            with collector_paused():
                self._app = self.compose(self.cwd, self.env)
        return self._app

    def emit(self, data: Any, text: str | None = None) -> None:
        """Data as JSON under --json, else the human text (or the data's str)."""
        if self.json:
            self.stdout.write(json.dumps(data, ensure_ascii=False, sort_keys=False) + "\n")
        else:
            out = text if text is not None else str(data)
            self.stdout.write(out if out.endswith("\n") or not out else out + "\n")
