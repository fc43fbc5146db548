"""The composition root: workspace, config layers, identity, harness id, plugins, fakes."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from dsh_chapters.bootstrap import App, bootstrap, default_harness_id, find_workspace
from dsh_chapters.plugins import load_harness_readers
from dsh_chapters_core.errors import ConfigError
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_core.testing.fakes_store import FakeChapterStore, FakeWriterLock, FixedClock
from dsh_chapters_fs.configfile import HARNESS_ID_PATTERN
from dsh_chapters_fs.lock import FileWriterLock
from dsh_chapters_fs.store import FsChapterStore

from tests.app.archive_workspace import make_workspace


def test_the_workspace_is_the_git_root_above_cwd(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", remote="git@github.com:Acme/API.git")
    deep = ws / "src" / "pkg"
    deep.mkdir(parents=True)
    app = bootstrap(deep, {"DSH_HOME": str(tmp_path / "home")})
    assert app.workspace == ws and app.store_root == ws / ".dsh-chapters"
    assert app.identity.derivation == "remote"
    assert app.identity.canonical == "github.com/acme/api"
    assert isinstance(app.store, FsChapterStore) and isinstance(app.lock, FileWriterLock)
    assert app.store.root == str(ws / ".dsh-chapters")
    assert app.dsh_home == tmp_path / "home"


def test_without_git_the_workspace_is_cwd_and_the_key_path_derived(tmp_path: Path) -> None:
    plain = tmp_path / "notes"
    plain.mkdir()
    app = bootstrap(plain, {"DSH_HOME": str(tmp_path / "home")})
    assert find_workspace(plain) == plain and app.workspace == plain
    assert app.identity.derivation == "path-derived" and app.identity.canonical == str(plain)


def test_a_worktree_reads_the_common_config(tmp_path: Path) -> None:
    main = make_workspace(tmp_path / "main", remote="https://example.org/team/tool")
    gitdir = main / ".git" / "worktrees" / "feature"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    feature = tmp_path / "feature"
    feature.mkdir()
    (feature / ".git").write_text(f"gitdir: {gitdir}\n")
    app = bootstrap(feature, {"DSH_HOME": str(tmp_path / "home")})
    assert app.workspace == feature and app.identity.canonical == "example.org/team/tool"


def test_config_layers_and_the_project_key_override(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    home = tmp_path / "home"
    (home / "dsh-chapters").mkdir(parents=True)
    (home / "dsh-chapters" / "config.toml").write_text('harnessId = "desk"\nchapterLimit = 500\n')
    (ws / ".dsh-chapters").mkdir()
    (ws / ".dsh-chapters" / "config.toml").write_text(
        'projectKey = "monorepo/api"\nchapterLimit = 700\n')
    app = bootstrap(ws, {"DSH_HOME": str(home)})
    assert app.harness_id == "desk" and app.config.chapter_limit == 700
    assert app.identity.derivation == "override" and app.identity.canonical == "monorepo/api"
    assert app.config_origins["chapterLimit"] == str(ws / ".dsh-chapters" / "config.toml")
    env_app = bootstrap(ws, {"DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": "ci-runner-2"})
    assert env_app.harness_id == "ci-runner-2"


def test_a_bad_config_stops_bootstrap_with_the_file_named(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    (ws / ".dsh-chapters").mkdir()
    bad = ws / ".dsh-chapters" / "config.toml"
    bad.write_text("mergeThreshold = 3\n")
    with pytest.raises(ConfigError, match=r"config.toml: mergeThreshold = 3 is not allowed"):
        bootstrap(ws, {"DSH_HOME": str(tmp_path / "home")})


def test_the_default_harness_id_is_a_plain_hostname() -> None:
    assert HARNESS_ID_PATTERN.match(default_harness_id())


def test_tests_pass_fakes_through_the_keyword_defaults(tmp_path: Path) -> None:
    store, lock, clock = FakeChapterStore(), FakeWriterLock(), FixedClock()
    app = bootstrap(tmp_path, {"DSH_HOME": str(tmp_path / "home")}, store=store, lock=lock,
                    clock=clock, harnesses={}, provider_factories=())
    assert isinstance(app, App)
    assert app.store is store and app.lock is lock and app.clock is clock
    assert app.harnesses == {} and app.provider_factories == ()


def test_the_installed_readers_are_found() -> None:
    readers = load_harness_readers()
    assert {"dsh", "claude-code", "codex"} <= set(readers)
    assert all(isinstance(r, HarnessReader) and r.name == name for name, r in readers.items())


def test_plugins_skip_duplicates_and_log_broken_or_wrong_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    group = "dsh_chapters.harnesses"
    entries = [
        EntryPoint("dsh", "dsh_chapters_harness.dsh:DshReader", group),
        EntryPoint("dsh", "dsh_chapters_harness.codex:CodexReader", group),  # a second "dsh"
        EntryPoint("broken", "no_such_module_anywhere:Reader", group),
        EntryPoint("wrong", "pathlib:PurePosixPath", group),  # imports, but is no reader
    ]
    with caplog.at_level(logging.DEBUG, logger="dsh_chapters.plugins"):
        readers = load_harness_readers(entries=entries)
    assert list(readers) == ["dsh"] and type(readers["dsh"]).__name__ == "DshReader"
    log = caplog.text
    assert "'broken'" in log and "failed to import" in log
    assert "'wrong'" in log and "not a HarnessReader" in log
    assert "registered twice" in log


def test_the_configuration_doc_is_generated_from_settings() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    check = subprocess.run([sys.executable, str(root / "docs" / "gen_config_table.py"), "--check"],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
