"""`chapters install|uninstall cursor|copilot-cli|aider`: our MCP server in Cursor's mcp.json and
Copilot CLI's mcp-config.json beside other tools' servers; a second install changes nothing, and
uninstall gives every file back byte for byte (or removes what install created). Aider reads no
MCP configuration, and the CLI says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.cli import main

OTHER = {"mcpServers": {"github": {"command": "gh-mcp", "args": ["--stdio"]}}, "theme": "dark"}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "laptop")
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    return home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "acme-api"
    (root / ".git").mkdir(parents=True)
    return root


def chapters(capsys: pytest.CaptureFixture[str], workspace: Path, *argv: str) -> Any:
    capsys.readouterr()
    code = main(["-C", str(workspace), *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


@pytest.mark.parametrize(("agent", "scope", "where", "keys"), [
    ("cursor", "project", "workspace:.cursor/mcp.json", {"command", "args"}),
    ("cursor", "user", "home:.cursor/mcp.json", {"command", "args"}),
    ("copilot-cli", "user", "home:.copilot/mcp-config.json", {"type", "command", "args",
                                                               "tools"}),
    ("copilot-cli", "project", "workspace:.github/mcp.json", {"type", "command", "args",
                                                               "tools"}),
])
def test_install_beside_other_servers_twice_then_uninstall_is_byte_identical(
        home: Path, workspace: Path, capsys: pytest.CaptureFixture[str], agent: str, scope: str,
        where: str, keys: set[str]) -> None:
    base, relative = where.split(":")
    path = (workspace if base == "workspace" else home) / relative
    path.parent.mkdir(parents=True)
    original = (json.dumps(OTHER, indent=4) + "\n").encode()
    path.write_bytes(original)

    first = chapters(capsys, workspace, "install", agent, "--scope", scope)
    assert (first["scope"], first["changed"]) == (scope, 1)
    assert [Path(f["path"]) for f in first["files"]] == [path]
    assert first["files"][0]["backup"]
    data = json.loads(path.read_text())
    ours = data["mcpServers"]["dsh-chapters"]
    assert set(ours) == keys and ours["args"][-1] == "mcp"
    assert data["mcpServers"]["github"] == OTHER["mcpServers"]["github"]
    assert data["theme"] == "dark"
    assert path.read_text().startswith('{\n    "mcpServers"')  # the file's own indent kept
    if agent == "copilot-cli":
        assert (ours["type"], ours["tools"]) == ("local", ["*"])

    again = chapters(capsys, workspace, "install", agent, "--scope", scope)
    assert again["changed"] == 0 and again["files"][0]["action"] == "unchanged"

    gone = chapters(capsys, workspace, "uninstall", agent, "--scope", scope)
    assert gone["files"][0]["action"] == "restored"
    assert path.read_bytes() == original
    assert not path.with_name(path.name + ".dsh-chapters.bak").exists()


@pytest.mark.parametrize("agent", ["cursor", "copilot-cli"])
def test_a_file_install_created_is_removed_with_its_folders(
        home: Path, workspace: Path, capsys: pytest.CaptureFixture[str], agent: str) -> None:
    before = sorted(p.relative_to(home.parent) for p in home.parent.rglob("*")
                    if "dsh-home" not in p.parts)
    created = chapters(capsys, workspace, "install", agent)
    path = Path(created["files"][0]["path"])
    expected = (workspace / ".cursor" / "mcp.json" if agent == "cursor"
                else home / ".copilot" / "mcp-config.json")
    assert path == expected and created["files"][0]["action"] == "created"
    removed = chapters(capsys, workspace, "uninstall", agent)
    assert removed["files"][0]["action"] == "removed"
    after = sorted(p.relative_to(home.parent) for p in home.parent.rglob("*")
                   if "dsh-home" not in p.parts)
    assert after == before


def test_copilot_home_moves_the_user_file(home: Path, workspace: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "cp"))
    done = chapters(capsys, workspace, "install", "copilot-cli")
    assert done["files"][0]["path"] == str(tmp_path / "cp" / "mcp-config.json")


def test_an_edit_after_install_survives_uninstall(home: Path, workspace: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = workspace / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(json.dumps(OTHER) + "\n")
    chapters(capsys, workspace, "install", "cursor")
    data = json.loads(path.read_text())
    data["mcpServers"]["docs"] = {"command": "docs-mcp"}
    path.write_text(json.dumps(data, indent=2) + "\n")
    gone = chapters(capsys, workspace, "uninstall", "cursor")
    assert gone["files"][0]["action"] == "updated"
    assert json.loads(path.read_text())["mcpServers"] == {**OTHER["mcpServers"],
                                                          "docs": {"command": "docs-mcp"}}


def test_a_server_of_ours_name_we_did_not_write_is_refused(
        home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = workspace / ".cursor" / "mcp.json"
    path.parent.mkdir()
    theirs = json.dumps({"mcpServers": {"dsh-chapters": {"command": "elsewhere"}}}) + "\n"
    path.write_text(theirs)
    code = main(["-C", str(workspace), "install", "cursor"])
    err = capsys.readouterr().err
    assert code != 0 and "did not write" in err and "nothing was changed" in err
    assert path.read_text() == theirs
    path.write_text("{ not json")
    assert main(["-C", str(workspace), "install", "cursor"]) != 0
    assert "not valid JSON" in capsys.readouterr().err


def test_aider_has_no_mcp_configuration_and_the_cli_says_what_to_do_instead(
        home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for verb in ("install", "uninstall"):
        code = main(["-C", str(workspace), verb, "aider"])
        err = capsys.readouterr().err
        assert code != 0
        assert "aider reads no MCP configuration" in err and "chapters import aider" in err


def test_enable_hooks_is_refused_for_an_agent_without_hooks(
        home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(workspace), "install", "cursor", "--enable-hooks"]) != 0
    assert "--enable-hooks is for Codex" in capsys.readouterr().err
    assert not (workspace / ".cursor").exists()
