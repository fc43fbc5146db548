"""`chapters search` pays only for itself (STYLE.md "Import lazily what a command needs"): a
whole search process, run in a fresh interpreter, imports no transport, no MCP server and
no HTTP client; in a linked workspace, not the sync loop either."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NEVER_FOR_SEARCH = ("dulwich", "httpx", "mcp", "dsh_chapters_git", "dsh_chapters_treedx",
                    "dsh_chapters_mcp")

_PROBE = """
import json, sys
from dsh_chapters.cli import main
code = main(["-C", sys.argv[1], "search", "retry", "backoff", "--json"])
sys.stdout.flush()
print("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""
# What a linked search reads of sync is the quarantine list (`sync.state`); the loop, its
# transports and the remote parser are `chapters sync`'s, and cost every question ~8 ms.
NEVER_FOR_LINKED_SEARCH = ("dsh_chapters_core.sync.run", "dsh_chapters_core.sync.copy",
                           "dsh_chapters_core.remote", "dsh_chapters_core.ports.transport")


def _search_modules(ws: Path, env: dict[str, str]) -> set[str]:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(ws)], capture_output=True,
                          text=True, env=env, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    return set(report["modules"])


@pytest.mark.slow
def test_a_search_process_imports_no_transport_mcp_or_http(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    env = dict(os.environ, DSH_HOME=str(tmp_path / "home"), DSH_CHAPTERS_HARNESS_ID="hostA")
    modules = {m.split(".")[0] for m in _search_modules(ws, env)}
    assert {"dsh_chapters", "dsh_chapters_core", "dsh_chapters_fs"} <= modules
    assert modules.isdisjoint(NEVER_FOR_SEARCH), sorted(modules & set(NEVER_FOR_SEARCH))


@pytest.mark.slow
def test_a_linked_search_reads_the_quarantine_list_without_the_sync_loop(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    env = dict(os.environ, DSH_HOME=str(tmp_path / "home"), DSH_CHAPTERS_HARNESS_ID="hostA")
    for argv in (["link", str(tmp_path / "pool")], ["sync"]):
        done = subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(ws), *argv],
                              capture_output=True, text=True, env=env, check=False, timeout=120)
        assert done.returncode == 0, done.stderr
    assert (ws / ".dsh-knowledge").is_dir()
    modules = _search_modules(ws, env)
    assert "dsh_chapters_core.sync.state" in modules  # the door did read the quarantine list
    assert modules.isdisjoint(NEVER_FOR_LINKED_SEARCH), sorted(
        modules & set(NEVER_FOR_LINKED_SEARCH))
