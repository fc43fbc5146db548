"""Install into settings that already hold other tools' hooks and servers; install twice, then
uninstall: every file is byte-identical to the original."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_harness.install import CLAUDE_HOOK_EVENTS, SERVER_NAME, Installer

OTHER_SETTINGS = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "backup.sh"}]}],
        "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}],
    },
}
OTHER_MCP = {"mcpServers": {"github": {"command": "gh-mcp", "args": ["--stdio"]}}}
CODEX_TOML = 'model = "o4"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\nargs = []\n'


def installer(tmp_path: Path) -> Installer:
    return Installer(
        command=("/opt/venv/bin/chapters",), ledger_path=tmp_path / "home" / "installs.json"
    )


def seed(workspace: Path) -> dict[Path, bytes]:
    settings = workspace / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    # Four-space indent and a key order of the user's choosing: the bytes must come back.
    settings.write_text(json.dumps(OTHER_SETTINGS, indent=4) + "\n")
    mcp = workspace / ".mcp.json"
    mcp.write_text(json.dumps(OTHER_MCP, indent=2) + "\n")
    return {settings: settings.read_bytes(), mcp: mcp.read_bytes()}


def test_install_twice_then_uninstall_restores_the_original_bytes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    originals = seed(ws)
    inst = installer(tmp_path)

    first = inst.install_claude("project", ws, tmp_path / "home")
    assert [c.action for c in first] == ["updated", "updated"]
    settings = json.loads((ws / ".claude" / "settings.json").read_text())
    for event in CLAUDE_HOOK_EVENTS:
        commands = [h["command"] for g in settings["hooks"][event] for h in g["hooks"]]
        assert "/opt/venv/bin/chapters hook" in commands
    assert settings["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "backup.sh"
    assert settings["hooks"]["PostToolUse"] == OTHER_SETTINGS["hooks"]["PostToolUse"]
    servers = json.loads((ws / ".mcp.json").read_text())["mcpServers"]
    assert servers["github"] == OTHER_MCP["mcpServers"]["github"]
    assert servers[SERVER_NAME] == {"command": "/opt/venv/bin/chapters", "args": ["mcp"]}
    after_first = {p: p.read_bytes() for p in originals}

    second = inst.install_claude("project", ws, tmp_path / "home")
    assert [c.action for c in second] == ["unchanged", "unchanged"]
    assert {p: p.read_bytes() for p in originals} == after_first

    removed = inst.uninstall_claude("project", ws, tmp_path / "home")
    assert [c.action for c in removed] == ["restored", "restored"]
    for path, raw in originals.items():
        assert path.read_bytes() == raw
    assert not list(ws.rglob("*.dsh-chapters.bak"))


def test_install_into_no_files_and_uninstall_leaves_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    inst = installer(tmp_path)
    assert [c.action for c in inst.install_claude("project", ws, tmp_path)] == [
        "created",
        "created",
    ]
    assert [c.action for c in inst.uninstall_claude("project", ws, tmp_path)] == [
        "removed",
        "removed",
    ]
    assert not (ws / ".mcp.json").exists()
    assert not (ws / ".claude" / "settings.json").exists()


def test_a_foreign_server_with_our_name_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    originals = seed(ws)
    mcp = ws / ".mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {SERVER_NAME: {"command": "someone-else"}}}))
    originals[mcp] = mcp.read_bytes()
    with pytest.raises(ChaptersError, match="did not write"):
        installer(tmp_path).install_claude("project", ws, tmp_path)
    for path, raw in originals.items():
        assert path.read_bytes() == raw


def test_invalid_json_is_refused_with_its_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".claude").mkdir(parents=True)
    (ws / ".claude" / "settings.json").write_text('{\n  "hooks": {,\n}\n')
    with pytest.raises(ChaptersError, match="line 2"):
        installer(tmp_path).install_claude("project", ws, tmp_path)


def test_user_scope_targets_the_user_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    inst = installer(tmp_path)
    inst.install_claude("user", tmp_path / "ws", home)
    assert (home / ".claude" / "settings.json").exists()
    assert SERVER_NAME in json.loads((home / ".claude.json").read_text())["mcpServers"]


def test_codex_install_twice_then_uninstall_is_byte_identical(tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.mkdir()
    config = codex / "config.toml"
    config.write_text(CODEX_TOML)
    inst = installer(tmp_path)
    assert inst.install_codex(codex)[0].action == "updated"
    parsed = tomllib.loads(config.read_text())
    assert parsed["mcp_servers"][SERVER_NAME] == {
        "command": "/opt/venv/bin/chapters",
        "args": ["mcp"],
    }
    assert parsed["mcp_servers"]["docs"]["command"] == "docs-mcp"
    assert inst.install_codex(codex)[0].action == "unchanged"
    assert inst.uninstall_codex(codex)[0].action == "restored"
    assert config.read_text() == CODEX_TOML


def test_codex_foreign_table_with_our_name_is_refused(tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.mkdir()
    (codex / "config.toml").write_text(f'[mcp_servers.{SERVER_NAME}]\ncommand = "x"\n')
    with pytest.raises(ChaptersError, match="did not write"):
        installer(tmp_path).install_codex(codex)
