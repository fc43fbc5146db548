"""Shared pieces of the `test_app_archive_*` tests: fixture paths, a CLI runner, snapshots."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from dsh_chapters.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUDE_DIR = FIXTURES / "claude-code"
CLAUDE_SESSION = "5f0c2a9e-8d3b-4e61-9a7c-2b1d4e6f8a10"
CLAUDE_MAIN = CLAUDE_DIR / "-home-dev-work-acme-api" / f"{CLAUDE_SESSION}.jsonl"
CLAUDE_SUBAGENT = (CLAUDE_DIR / "-home-dev-work-acme-api" / CLAUDE_SESSION / "subagents"
                   / "agent-a4c1e2f.jsonl")
CODEX_DIR = FIXTURES / "codex"
CODEX_FILE = next(CODEX_DIR.rglob("rollout-*.jsonl"))
DSH_FILE = next((FIXTURES / "dsh" / "sessions").glob("*/7c1e90b4-*/session.jsonl"))
DSH_SESSION = DSH_FILE.parent.name


@dataclass
class Result:
    code: int
    out: str
    err: str


Runner = Callable[..., Result]


def make_workspace(root: Path, remote: str = "https://github.com/acme/api.git") -> Path:
    """A git workspace (as far as the archive cares: `.git/config` with an origin)."""
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(
        f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {remote}\n'
        "\tfetch = +refs/heads/*:refs/remotes/origin/*\n")
    return root


def runner(workspace: Path, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> Runner:
    """`chapters -C <workspace> ...` in process, with its own DSH_HOME and harness id."""
    monkeypatch.setenv("DSH_HOME", str(workspace.parent / "dsh-home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "laptop")

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(["-C", str(workspace), *args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


# Derived, machine-local files a writer keeps current beside what it writes (the search
# index is written where chapters are written): rebuilt, never part of the archive's record.
DERIVED = ("cache/", "index/", "topics/")


def snapshot(directory: Path, *, derived: bool = True) -> dict[str, str]:
    """Every file under `directory` by relative path, as its sha256: byte-for-byte equality.
    `derived=False` leaves out the derived index files (`DERIVED`)."""
    if not directory.exists():
        return {}
    found = {}
    for dirpath, _dirs, files in os.walk(directory):
        for name in files:
            path = Path(dirpath) / name
            rel = path.relative_to(directory).as_posix()
            if derived or not rel.startswith(DERIVED):
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found
