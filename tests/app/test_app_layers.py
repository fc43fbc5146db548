"""The app's start-up pays only for the command it runs (ARCHITECTURE.md, "Services")."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("dulwich", "httpx", "mcp", "dsh_chapters_core.enrich", "dsh_chapters_harness")
# What a search over a current index must not load either: the YAML and attrs stacks (the
# config is TOML read by plain code; the core's frontmatter takes the JSON path), the other
# transports, the harness events, the rules use case (core rules come from the cache), the
# artifact reader and logging. Each was once on this path and cost milliseconds per query.
# Nor the index updater and the notice's words (a current index is only read), uuid and the
# `platform` it imports (a projectKey is a name-based UUID), or threading.
NOT_FOR_SEARCH = (
    "yaml", "attr", "attrs", "cattrs", "logging", "dsh_chapters_git", "dsh_chapters_treedx",
    "dsh_chapters_core.events", "dsh_chapters_core.ports.harness",
    "dsh_chapters_core.ports.transport", "dsh_chapters_core.ports.agents",
    "dsh_chapters_core.rules", "dsh_chapters.services.rules", "dsh_chapters_core.reading",
    "dsh_chapters_core.search.index.update", "dsh_chapters_core.notice_words",
    "uuid", "platform", "threading",
)
# With DSH_HOME set (hooks, the benchmarks), not the platform's data-dir lookup either, nor
# shutil and its compressors (platformdirs' tempfile, or argparse's formatter for the width).
NOT_WITH_DSH_HOME = ("platformdirs", "tempfile", "shutil", "bz2", "lzma")

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


def _modules_after(tmp_path: Path, *argv: str,
                   env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=tmp_path, check=True,
                          capture_output=True, text=True, timeout=60, env=env)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return int(data["code"] or 0), set(data["modules"])


def _heavy(modules: set[str], heavy: tuple[str, ...] = HEAVY) -> set[str]:
    return {m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy)}


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


def test_a_search_over_a_current_index_loads_only_search(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    # A writer run (it records a store generation), then a first search that resolves this
    # machine's core rules and caches them: the steady state every later query starts from.
    for argv in (("index",), ("search", "retry")):
        assert _modules_after(tmp_path, *argv)[0] == 0
    code, modules = _modules_after(tmp_path, "search", "retry", "backoff", "--json")
    assert code == 0
    assert _heavy(modules, HEAVY + NOT_FOR_SEARCH) == set()
    commands = {m for m in modules if m.startswith("dsh_chapters.commands.")}
    assert commands == {"dsh_chapters.commands.invocation", "dsh_chapters.commands.search"}


def test_a_search_with_dsh_home_set_looks_up_no_platform_dir(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    env = dict(os.environ, DSH_HOME=str(tmp_path / "home"))
    for argv in (("index",), ("search", "retry")):
        assert _modules_after(tmp_path, *argv, env=env)[0] == 0
    code, modules = _modules_after(tmp_path, "search", "retry", "backoff", "--json", env=env)
    assert code == 0
    assert _heavy(modules, HEAVY + NOT_FOR_SEARCH + NOT_WITH_DSH_HOME) == set()


# What reading the enrichment queue must not load: a sync and `chapters status` only read it
# (is a drain due?), and the drain brings the model door and the redaction engine, whose
# patterns cost tens of milliseconds to build in every process.
NOT_FOR_THE_QUEUE = (
    "dsh_chapters_core.redaction", "dsh_chapters_core.redact", "dsh_chapters_core.chokepoint",
    "dsh_chapters_core.enrich.ladder", "dsh_chapters_core.enrich.run",
    "dsh_chapters_core.ports.model",
)


def test_a_sync_with_nothing_to_do_and_status_load_neither_the_drain_nor_unused_providers(
        tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    env = dict(os.environ, DSH_HOME=str(tmp_path / "home"))
    for argv in (("link", str(tmp_path / "pool.git")), ("sync",)):
        assert _modules_after(tmp_path, *argv, env=env)[0] == 0
    for argv in (("sync",), ("status",)):
        code, modules = _modules_after(tmp_path, *argv, env=env)
        assert code == 0
        assert "dsh_chapters_core.enrich.queue" in modules  # it did read the queue
        assert _heavy(modules, NOT_FOR_THE_QUEUE) == set(), argv
        # Each provider's factory says which remotes it takes; only the one the link names
        # is imported, by a sync, and status imports none (httpx and dulwich are its stacks).
        unused = ("httpx", "dsh_chapters_treedx.provider", "dsh_chapters_treedx.client")
        if argv == ("status",):
            # nor filelock: status asks the OS whether another holds the lock, takes none
            unused += ("dulwich", "dsh_chapters_git.provider", "filelock")
        else:
            assert "dsh_chapters_git.provider" in modules
        assert _heavy(modules, unused) == set(), argv


# What reading the archive must not load: listing or printing chapters, and the notice every
# session starts with, never archive anything.
THE_ARCHIVE_PATH = (
    "dsh_chapters.services.archive", "dsh_chapters_core.archive", "dsh_chapters_core.render",
    "dsh_chapters_core.redaction", "dsh_chapters_core.chokepoint", "dsh_chapters_harness",
)


def test_list_and_the_notice_read_the_store_without_the_archive_path(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    env = dict(os.environ, DSH_HOME=str(tmp_path / "home"))
    for argv in (("list",), ("notice",), ("rule", "list")):
        code, modules = _modules_after(tmp_path, *argv, env=env)
        assert code == 0, argv
        assert _heavy(modules, THE_ARCHIVE_PATH) == set(), argv


def test_a_session_start_hook_tells_the_notice_without_the_archive_path(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    payload = json.dumps({"session_id": "0f0e0d0c-0000-4000-8000-000000000001",
                          "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(tmp_path),
                          "hook_event_name": "SessionStart", "source": "startup"})
    done = subprocess.run([sys.executable, "-c", _PROBE, "hook"], cwd=tmp_path, check=True,
                          input=payload, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, DSH_HOME=str(tmp_path / "home")))
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["code"] == 0 and "dsh_chapters_core.notice" in data["modules"]
    assert _heavy(set(data["modules"]), THE_ARCHIVE_PATH) == set()


def _commands_of(argv: list[str]) -> set[str]:
    from dsh_chapters.commands import build_parser

    parser = build_parser(argv)
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(subs[0].choices)


def test_a_run_that_cannot_list_commands_builds_only_its_family() -> None:
    from dsh_chapters.commands import COMMANDS

    every = {entry.name for entry in COMMANDS}
    search_family = {"search", "index", "topic", "artifact"}
    assert _commands_of(["search", "retry"]) == search_family
    assert _commands_of(["--json", "-C", ".", "index"]) == search_family
    # The top-level help and an unknown command's error list every command.
    for argv in (["--help", "search"], ["--he", "search"], ["-h"], ["frobnicate"], []):
        assert _commands_of(argv) == every
