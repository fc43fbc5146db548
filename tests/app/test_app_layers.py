"""The app's start-up pays only for the command it runs (ARCHITECTURE.md, "Services")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("dulwich", "httpx", "mcp", "dsh_chapters_core.enrich", "dsh_chapters_harness")

_PROBE = """
import contextlib, io, json, sys
from dsh_chapters.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules_after(tmp_path: Path, *argv: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=tmp_path, check=True,
                          capture_output=True, text=True, timeout=60)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return int(data["code"] or 0), set(data["modules"])


def _heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)}


def test_help_imports_no_adapter_stack_and_no_command_module(tmp_path: Path) -> None:
    code, modules = _modules_after(tmp_path, "--help")
    assert code == 0
    assert _heavy(modules) == set()
    commands = {m for m in modules if m.startswith("dsh_chapters.commands.")}
    assert commands == {"dsh_chapters.commands.invocation"}


def test_a_command_imports_its_own_family_only(tmp_path: Path) -> None:
    code, modules = _modules_after(tmp_path, "key", "--remote", "git@github.com:ada/widgets.git")
    assert code == 0
    commands = {m for m in modules if m.startswith("dsh_chapters.commands.")}
    assert commands == {"dsh_chapters.commands.invocation", "dsh_chapters.commands.identity"}
    assert _heavy(modules) == set()


def test_search_imports_no_transport_reader_mcp_or_enrichment(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    code, modules = _modules_after(tmp_path, "search", "retry", "backoff")
    assert code == 0
    assert _heavy(modules) == set()
    assert "dsh_chapters.services.search" in modules
