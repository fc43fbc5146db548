"""`chapters install` where the agents keep their files: CLAUDE_CONFIG_DIR for Claude Code's user
scope, CODEX_HOME for Codex (with its hooks, and the flag only with --enable-hooks)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.cli import main

USER_CODEX = '# mine\nmodel = "o4"\n\n[features]\nweb_search_request = true\n'


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "laptop")
    root = tmp_path / "acme-api"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/acme/api.git\n', encoding="utf-8")
    return root


def chapters(capsys: pytest.CaptureFixture[str], workspace: Path, *argv: str) -> Any:
    capsys.readouterr()
    code = main(["-C", str(workspace), *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_claude_user_scope_goes_into_claude_config_dir(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config_dir = tmp_path / "claude-work"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config_dir))
    result = chapters(capsys, workspace, "install", "claude-code", "--scope", "user")
    paths = {Path(f["path"]) for f in result["files"]}
    assert paths == {config_dir / "settings.json", config_dir / ".claude.json"}
    settings = json.loads((config_dir / "settings.json").read_text())
    assert set(settings["hooks"]) == {"SessionStart", "PreCompact", "SessionEnd"}
    assert "dsh-chapters" in json.loads((config_dir / ".claude.json").read_text())["mcpServers"]
    assert not (tmp_path / "home" / ".claude").exists()
    chapters(capsys, workspace, "uninstall", "claude-code", "--scope", "user")
    assert not config_dir.exists()


def test_codex_install_with_enable_hooks_in_codex_home_and_back(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    codex = tmp_path / "codex-alt"
    codex.mkdir()
    (codex / "config.toml").write_text(USER_CODEX, encoding="utf-8")
    monkeypatch.setenv("CODEX_HOME", str(codex))
    plain = chapters(capsys, workspace, "install", "codex")
    assert "--enable-hooks" in plain["files"][0]["detail"]  # says what it did not do
    assert tomllib.loads((codex / "config.toml").read_text())["features"] == {
        "web_search_request": True}
    enabled = chapters(capsys, workspace, "install", "codex", "--enable-hooks")
    assert "turned on [features]" in enabled["files"][0]["detail"]
    parsed = tomllib.loads((codex / "config.toml").read_text())
    assert parsed["features"]["hooks"] is True
    assert {"SessionStart", "Stop"} <= set(parsed["hooks"])
    assert parsed["hooks"]["Stop"][0]["hooks"][0]["command"].endswith("hook --agent codex")
    chapters(capsys, workspace, "uninstall", "codex")
    assert (codex / "config.toml").read_text(encoding="utf-8") == USER_CODEX


def test_enable_hooks_is_refused_for_claude_code(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-C", str(workspace), "install", "claude-code", "--enable-hooks"]) == 2
    assert "install codex --enable-hooks" in capsys.readouterr().err
