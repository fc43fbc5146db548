"""`chapters install|uninstall claude-code|codex`: into settings that already hold other tools'
hooks and servers; install twice, then uninstall, and every file is byte-identical again. The
hook command install writes is the one that runs: Claude Code can execute it as written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.cli import main

OTHER_SETTINGS = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command",
                                                           "command": "echo hello"}]}],
        "PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "backup.sh"}]}],
    },
}
OTHER_MCP = {"mcpServers": {"github": {"command": "gh-mcp", "args": ["--stdio"]}}}
CODEX_TOML = 'model = "o4"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\nargs = []\n'


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "laptop")
    monkeypatch.setenv("CODEX_HOME", str(home / "codex"))
    return home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "acme-api"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/acme/api.git\n', encoding="utf-8")
    settings = root / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(OTHER_SETTINGS, indent=4) + "\n", encoding="utf-8")
    (root / ".mcp.json").write_text(json.dumps(OTHER_MCP, indent=2) + "\n", encoding="utf-8")
    return root


def chapters(capsys: pytest.CaptureFixture[str], workspace: Path, *argv: str) -> Any:
    capsys.readouterr()
    code = main(["-C", str(workspace), *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def files(*paths: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.exists() else None for p in paths}


def test_claude_code_project_install_twice_then_uninstall_is_byte_identical(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, servers = workspace / ".claude" / "settings.json", workspace / ".mcp.json"
    originals = files(settings, servers)

    first = chapters(capsys, workspace, "install", "claude-code")
    assert first["scope"] == "project" and first["changed"] == 2
    assert {Path(f["path"]) for f in first["files"]} == {settings, servers}
    assert all(f["backup"] for f in first["files"])  # a backup before the first write
    data = json.loads(settings.read_text())
    for event in ("SessionStart", "PreCompact", "SessionEnd"):
        commands = [h["command"] for g in data["hooks"][event] for h in g["hooks"]]
        assert any(c.endswith(" hook") for c in commands), event
    assert data["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "backup.sh"
    assert data["permissions"] == OTHER_SETTINGS["permissions"]
    mcp = json.loads(servers.read_text())["mcpServers"]
    assert mcp["github"] == OTHER_MCP["mcpServers"]["github"]
    assert mcp["dsh-chapters"]["args"][-1] == "mcp"
    ledger = json.loads((home.parent / "dsh-home" / "dsh-chapters" / "installs.json").read_text())
    assert set(ledger["files"]) == {str(settings), str(servers)}

    installed = files(settings, servers)
    second = chapters(capsys, workspace, "install", "claude-code")
    assert second["changed"] == 0 and files(settings, servers) == installed  # idempotent

    removed = chapters(capsys, workspace, "uninstall", "claude-code")
    assert removed["changed"] == 2
    assert files(settings, servers) == originals  # byte-identical
    assert not list(workspace.rglob("*.dsh-chapters.bak"))


def test_the_local_command_is_the_script_beside_python_and_runs_as_written(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """This machine's own files (--scope local, user) name this machine's `chapters` by its
    full path; the project scope's committed files name `chapters` (test_app_first_hour)."""
    chapters(capsys, workspace, "install", "claude-code", "--scope", "local")
    data = json.loads((workspace / ".claude" / "settings.local.json").read_text())
    [ours] = [h for g in data["hooks"]["SessionStart"] for h in g["hooks"]
              if h["command"] != "echo hello"]
    script = Path(sys.executable).parent / "chapters"
    expected = str(script.absolute()) if script.is_file() else f"{sys.executable} -m dsh_chapters"
    assert ours["command"].startswith(expected)
    assert ours["timeout"] > 20  # past hookTimeoutMs (20 s): our own watchdog speaks first
    payload = json.dumps({"session_id": "s-1", "transcript_path": "", "cwd": str(workspace),
                          "hook_event_name": "SessionStart", "source": "startup"})
    ran = subprocess.run(ours["command"], shell=True, input=payload, capture_output=True,
                         text=True, cwd=workspace, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    context = json.loads(ran.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Project: api · " in context
    projects = json.loads((home / ".claude.json").read_text())["projects"]
    server = projects[str(workspace)]["mcpServers"]["dsh-chapters"]
    assert [server["command"], *server["args"]] == [*expected.split(" "), "mcp"]


def test_user_scope_writes_the_users_files(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user_settings, user_servers = home / ".claude" / "settings.json", home / ".claude.json"
    user_servers.write_text(json.dumps({"numStartups": 3, **OTHER_MCP}) + "\n")
    originals = files(user_settings, user_servers)
    result = chapters(capsys, workspace, "install", "claude-code", "--scope", "user")
    assert result["scope"] == "user"
    actions = {Path(f["path"]): f["action"] for f in result["files"]}
    assert actions == {user_settings: "created", user_servers: "updated"}
    assert json.loads(user_servers.read_text())["numStartups"] == 3
    chapters(capsys, workspace, "uninstall", "claude-code", "--scope", "user")
    assert files(user_settings, user_servers) == originals  # created file removed again
    assert not (home / ".claude").exists()  # and the directory install made for it


def test_codex_install_into_a_fresh_codex_home_leaves_nothing_after_uninstall(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = chapters(capsys, workspace, "install", "codex")
    assert result["files"][0]["action"] == "created"
    assert (home / "codex" / "config.toml").is_file()
    chapters(capsys, workspace, "uninstall", "codex")
    assert not (home / "codex").exists()


def test_codex_install_merges_into_config_toml_and_uninstall_restores_it(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = home / "codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_TOML, encoding="utf-8")
    result = chapters(capsys, workspace, "install", "codex")
    assert result["changed"] == 1 and Path(result["files"][0]["path"]) == config
    text = config.read_text()
    assert text.startswith(CODEX_TOML) and "[mcp_servers.dsh-chapters]" in text
    assert chapters(capsys, workspace, "install", "codex")["changed"] == 0
    chapters(capsys, workspace, "uninstall", "codex")
    assert config.read_text() == CODEX_TOML


def test_install_refuses_what_it_cannot_do_and_changes_nothing(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = workspace / ".mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"dsh-chapters": {"command": "other"}}}))
    before = files(workspace / ".claude" / "settings.json", servers)
    capsys.readouterr()
    assert main(["-C", str(workspace), "install", "claude-code"]) == 1
    err = capsys.readouterr().err
    assert "already has an MCP server named 'dsh-chapters'" in err and "next:" in err
    assert files(workspace / ".claude" / "settings.json", servers) == before
    assert main(["-C", str(workspace), "install", "codex", "--scope", "project"]) == 2
    assert "Codex has one config.toml per user" in capsys.readouterr().err
