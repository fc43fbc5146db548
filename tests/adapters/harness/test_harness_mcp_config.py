"""Our MCP server in Gemini CLI's settings.json and OpenCode's opencode.json: beside other
tools' servers and settings, installed twice, then uninstalled to the original bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_harness.install import SERVER_NAME
from dsh_chapters_harness.mcp_config import McpConfigInstaller

COMMAND = ("/opt/venv/bin/chapters",)
GEMINI_SETTINGS = {
    "theme": "GitHub",
    "mcpServers": {"github": {"command": "gh-mcp", "args": ["--stdio"], "trust": False}},
    "general": {"vimMode": True},
}
OPENCODE_CONFIG = {
    "$schema": "https://opencode.ai/config.json",
    "theme": "opencode",
    "mcp": {"docs": {"type": "remote", "url": "https://docs.example.org/mcp"}},
}


def installer(tmp_path: Path) -> McpConfigInstaller:
    return McpConfigInstaller(command=COMMAND, ledger_path=tmp_path / "dsh" / "installs.json")


@pytest.mark.parametrize(("agent", "relative", "original", "key", "entry"), [
    ("gemini-cli", ".gemini/settings.json", GEMINI_SETTINGS, "mcpServers",
     {"command": COMMAND[0], "args": ["mcp"]}),
    ("opencode", "opencode.json", OPENCODE_CONFIG, "mcp",
     {"type": "local", "command": [COMMAND[0], "mcp"], "enabled": True}),
])
def test_install_twice_then_uninstall_gives_back_the_original_bytes(
        tmp_path: Path, agent: str, relative: str, original: dict[str, object], key: str,
        entry: dict[str, object]) -> None:
    workspace = tmp_path / "ws"
    path = workspace / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(original, indent=4) + "\n")  # the user's own indent
    before = path.read_bytes()
    inst = installer(tmp_path)
    [first] = inst.install(agent, "project", workspace, tmp_path / "home", {})
    assert first.action == "updated" and first.backup
    written = json.loads(path.read_text())
    assert written[key][SERVER_NAME] == entry
    assert {k: v for k, v in written[key].items() if k != SERVER_NAME} == original[key]
    assert path.read_text().startswith('{\n    "')  # four spaces kept
    [second] = inst.install(agent, "project", workspace, tmp_path / "home", {})
    assert second.action == "unchanged"
    [gone] = inst.uninstall(agent, "project", workspace, tmp_path / "home", {})
    assert gone.action == "restored" and path.read_bytes() == before
    assert not Path(first.backup).exists()
    [again] = inst.uninstall(agent, "project", workspace, tmp_path / "home", {})
    assert again.action == "unchanged"


@pytest.mark.parametrize(("agent", "env_name", "relative"), [
    ("gemini-cli", "GEMINI_CLI_HOME", ".gemini/settings.json"),
    ("opencode", "XDG_CONFIG_HOME", "opencode/opencode.json"),
])
def test_a_user_install_creates_the_file_and_uninstall_removes_it_and_its_folders(
        tmp_path: Path, agent: str, env_name: str, relative: str) -> None:
    base = tmp_path / "base"
    inst = installer(tmp_path)
    [made] = inst.install(agent, "user", tmp_path / "ws", tmp_path / "home",
                          {env_name: str(base)})
    path = base / relative
    assert made.action == "created" and made.path == str(path) and path.is_file()
    [gone] = inst.uninstall(agent, "user", tmp_path / "ws", tmp_path / "home",
                            {env_name: str(base)})
    assert gone.action == "removed" and not path.exists() and not path.parent.exists()


def test_the_default_user_files(tmp_path: Path) -> None:
    inst = installer(tmp_path)
    home = tmp_path / "home"
    assert inst.target("gemini-cli", "user", tmp_path, home, {}).path == \
        home / ".gemini" / "settings.json"
    assert inst.target("opencode", "user", tmp_path, home, {}).path == \
        home / ".config" / "opencode" / "opencode.json"
    assert inst.target("opencode", "project", tmp_path, home, {}).path == \
        tmp_path / "opencode.json"


def test_other_changes_since_install_are_kept_by_uninstall(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    path = workspace / "opencode.json"
    workspace.mkdir()
    path.write_text(json.dumps(OPENCODE_CONFIG, indent=2) + "\n")
    inst = installer(tmp_path)
    inst.install("opencode", "project", workspace, tmp_path, {})
    data = json.loads(path.read_text())
    data["theme"] = "tokyonight"
    path.write_text(json.dumps(data, indent=2) + "\n")
    [change] = inst.uninstall("opencode", "project", workspace, tmp_path, {})
    assert change.action == "updated"
    assert json.loads(path.read_text()) == dict(OPENCODE_CONFIG, theme="tokyonight")


def test_refusals_change_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    settings = workspace / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    inst = installer(tmp_path)
    settings.write_text('{\n  // comments: Gemini reads them, we do not edit them\n}\n')
    with pytest.raises(ChaptersError, match="not valid JSON"):
        inst.install("gemini-cli", "project", workspace, tmp_path, {})
    settings.write_text(json.dumps({"mcpServers": {SERVER_NAME: {"command": "x"}}}))
    before = settings.read_bytes()
    with pytest.raises(ChaptersError, match="did not write"):
        inst.install("gemini-cli", "project", workspace, tmp_path, {})
    assert settings.read_bytes() == before
    settings.write_text(json.dumps({"mcpServers": []}))
    with pytest.raises(ChaptersError, match="not an object"):
        inst.install("gemini-cli", "project", workspace, tmp_path, {})
    assert not (tmp_path / "dsh" / "installs.json").exists()


def test_pi_reads_no_mcp_configuration(tmp_path: Path) -> None:
    with pytest.raises(ChaptersError, match="pi reads no MCP configuration") as caught:
        installer(tmp_path).install("pi", "project", tmp_path, tmp_path, {})
    assert "chapters watch" in caught.value.hint
