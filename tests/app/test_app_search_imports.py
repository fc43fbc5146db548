"""`chapters search` pays only for itself (STYLE.md "Import lazily what a command needs"): a
whole search process, run in a fresh interpreter, imports no transport, no MCP server and
no HTTP client."""

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
print("\\n" + json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


@pytest.mark.slow
def test_a_search_process_imports_no_transport_mcp_or_http(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    env = dict(os.environ, DSH_HOME=str(tmp_path / "home"), DSH_CHAPTERS_HARNESS_ID="hostA")
    done = subprocess.run([sys.executable, "-c", _PROBE, str(ws)], capture_output=True,
                          text=True, env=env, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    modules = set(report["modules"])
    assert {"dsh_chapters", "dsh_chapters_core", "dsh_chapters_fs"} <= modules
    assert modules.isdisjoint(NEVER_FOR_SEARCH), sorted(modules & set(NEVER_FOR_SEARCH))
