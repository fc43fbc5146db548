"""Our MCP server in the JSON configuration of agents that read one: Gemini CLI, OpenCode,
Cursor and GitHub Copilot CLI.

- Gemini CLI: `mcpServers.<name> = {command, args}` in `settings.json`, the project's
  `.gemini/settings.json` or the user's `~/.gemini/settings.json` (`$GEMINI_CLI_HOME/.gemini`
  when set) (Gemini's `MCPServerConfig`, packages/core/src/config/config.ts).
- OpenCode: `mcp.<name> = {type: "local", command: [argv…], enabled: true}` in
  `opencode.json`, the project's or the user's `~/.config/opencode/opencode.json`
  (`$XDG_CONFIG_HOME/opencode`) (OpenCode's `McpLocal`, packages/opencode/src/config).
- Cursor: `mcpServers.<name> = {command, args}` in the project's `.cursor/mcp.json` or the
  user's `~/.cursor/mcp.json` (both the IDE and `cursor-agent` read them).
- Copilot CLI: `mcpServers.<name> = {type: "local", command, args, tools: ["*"]}` in the user's
  `$COPILOT_HOME/mcp-config.json` (default ~/.copilot) or the project's `.github/mcp.json`.
- pi reads no MCP configuration (its README: "No MCP"), nor does Aider, so there is nothing to
  wire: `NO_MCP` says so and what to do instead.

The same three promises as the Claude Code and Codex installs (install.py): idempotent, never
clobbering (a same-named server we did not write is a refusal; a file that is not plain JSON,
such as one with comments, is left alone), and an exact uninstall (the original bytes come back
when nothing else changed). The install ledger under DSH_HOME records what was added.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import ChaptersError

from dsh_chapters_harness.install import (
    SERVER_NAME,
    Change,
    Ledger,
    _atomic_write,
    _dump_json,
    _indent_of,
    _missing_dirs,
    _read_json,
    _remove_created_dirs,
)

NO_MCP = {
    "pi": ("pi reads no MCP configuration (pi has no MCP client, by design), so there is "
           "nothing to install; its sessions are archived all the same",
           "run `chapters watch` to archive pi's sessions as they are written, or `chapters "
           "import pi` at once; pi's agent can run `chapters search` with its bash tool"),
    "aider": ("aider reads no MCP configuration, so there is nothing to install; its chat "
              "history is archived all the same",
              "`chapters import aider` archives its .aider.chat.history.md, `chapters watch` "
              "keeps doing so as you work"),
}


@dataclass(frozen=True, slots=True)
class Target:
    """Where one agent keeps its MCP servers, and the entry that starts ours."""

    path: Path
    key: str  # the servers map: "mcpServers" (Gemini CLI), "mcp" (OpenCode)
    entry: dict[str, Any]
    kind: str  # the ledger's name for it


def _env_dir(env: Mapping[str, str], name: str, home: Path, default: tuple[str, ...]) -> Path:
    value = env.get(name, "")
    return Path(value).expanduser() if value else home.joinpath(*default)


def gemini_target(command: tuple[str, ...], scope: str, workspace: Path, home: Path,
                  env: Mapping[str, str]) -> Target:
    if scope == "project":
        path = workspace / ".gemini" / "settings.json"
    else:
        base = Path(env["GEMINI_CLI_HOME"]).expanduser() if env.get("GEMINI_CLI_HOME") else home
        path = base / ".gemini" / "settings.json"
    return Target(path, "mcpServers", {"command": command[0], "args": [*command[1:], "mcp"]},
                  "gemini-cli-mcp")


def opencode_target(command: tuple[str, ...], scope: str, workspace: Path, home: Path,
                    env: Mapping[str, str]) -> Target:
    if scope == "project":
        path = workspace / "opencode.json"
    else:
        path = _env_dir(env, "XDG_CONFIG_HOME", home, (".config",)) / "opencode" / \
            "opencode.json"
    return Target(path, "mcp", {"type": "local", "command": [*command, "mcp"], "enabled": True},
                  "opencode-mcp")


def cursor_target(command: tuple[str, ...], scope: str, workspace: Path, home: Path,
                  env: Mapping[str, str]) -> Target:
    folder = workspace if scope == "project" else home
    return Target(folder / ".cursor" / "mcp.json", "mcpServers",
                  {"command": command[0], "args": [*command[1:], "mcp"]}, "cursor-mcp")


def copilot_target(command: tuple[str, ...], scope: str, workspace: Path, home: Path,
                   env: Mapping[str, str]) -> Target:
    if scope == "project":
        path = workspace / ".github" / "mcp.json"
    else:
        path = _env_dir(env, "COPILOT_HOME", home, (".copilot",)) / "mcp-config.json"
    return Target(path, "mcpServers", {"type": "local", "command": command[0],
                                       "args": [*command[1:], "mcp"], "tools": ["*"]},
                  "copilot-cli-mcp")


TARGETS: dict[str, Callable[[tuple[str, ...], str, Path, Path, Mapping[str, str]], Target]] = {
    "gemini-cli": gemini_target,
    "opencode": opencode_target,
    "cursor": cursor_target,
    "copilot-cli": copilot_target,
}


@dataclass(frozen=True, slots=True)
class McpConfigInstaller:
    """Adds and removes our server in a JSON MCP configuration. Tests point these at tmp."""

    command: tuple[str, ...]
    ledger_path: Path

    def target(self, agent: str, scope: str, workspace: Path, home: Path,
               env: Mapping[str, str] | None = None) -> Target:
        if agent in NO_MCP:
            what, hint = NO_MCP[agent]
            raise ChaptersError(what, hint=hint)
        if agent not in TARGETS:
            raise ChaptersError(f"no MCP configuration is known for {agent!r}",
                                hint=f"pick one of {', '.join(TARGETS)}")
        if scope not in ("project", "user"):
            raise ChaptersError(f"unknown scope {scope!r}",
                                hint="use --scope project or --scope user")
        return TARGETS[agent](self.command, scope, workspace, home,
                              os.environ if env is None else env)

    def install(self, agent: str, scope: str, workspace: Path, home: Path,
                env: Mapping[str, str] | None = None) -> list[Change]:
        target = self.target(agent, scope, workspace, home, env)
        raw, data = _read_json(target.path)  # refuses a file that is not plain JSON
        servers = data.get(target.key, {})
        if not isinstance(servers, dict):
            raise ChaptersError(f"{target.path}: {target.key} is not an object; nothing was "
                                "changed", hint="fix the file by hand, then run install again")
        existing = servers.get(SERVER_NAME)
        if existing == target.entry:
            return [Change(str(target.path), "unchanged",
                           f"MCP server {SERVER_NAME} already registered")]
        if existing is not None:
            raise ChaptersError(
                f"{target.path} already has an MCP server named {SERVER_NAME!r} that install "
                "did not write; nothing was changed",
                hint="rename or remove that server, then run install again")
        ledger = Ledger.load(self.ledger_path)
        record = ledger.entries.get(str(target.path))
        backup = ""
        if record is None:
            record = {"kind": target.kind, "existed": raw is not None,
                      "createdDirs": _missing_dirs(target.path)}
            if raw is not None:
                backup_path = target.path.with_name(target.path.name + ".dsh-chapters.bak")
                _atomic_write(backup_path, raw)
                record["backup"] = backup = str(backup_path)
            ledger.entries[str(target.path)] = record
        data.setdefault(target.key, {})[SERVER_NAME] = target.entry
        _atomic_write(target.path, _dump_json(data, _indent_of(raw)))
        ledger.save()
        return [Change(str(target.path), "updated" if raw is not None else "created",
                       f"registered MCP server {SERVER_NAME}", backup)]

    def uninstall(self, agent: str, scope: str, workspace: Path, home: Path,
                  env: Mapping[str, str] | None = None) -> list[Change]:
        target = self.target(agent, scope, workspace, home, env)
        path = target.path
        ledger = Ledger.load(self.ledger_path)
        record = ledger.entries.get(str(path))
        raw, data = _read_json(path)
        if raw is None:
            if ledger.entries.pop(str(path), None) is not None:
                ledger.save()
            return [Change(str(path), "unchanged", "file absent")]
        servers = data.get(target.key)
        if not isinstance(servers, dict) or servers.get(SERVER_NAME) != target.entry:
            return [Change(str(path), "unchanged", "nothing of dsh-chapters found")]
        del servers[SERVER_NAME]
        if not servers:
            del data[target.key]
        if record is not None:
            ledger.entries.pop(str(path))
            ledger.save()
            if not record.get("existed") and not data:
                path.unlink()
                _remove_created_dirs(record)
                return [Change(str(path), "removed", "install created it; nothing else is in it")]
            backup = Path(record.get("backup", "")) if record.get("backup") else None
            if backup is not None and backup.is_file():
                _, original = _read_json(backup)
                if original == data:  # nothing else changed since install: the original bytes
                    _atomic_write(path, backup.read_bytes())
                    backup.unlink()
                    return [Change(str(path), "restored",
                                   f"removed MCP server {SERVER_NAME}; original bytes back")]
        _atomic_write(path, _dump_json(data, _indent_of(raw)))
        return [Change(str(path), "updated", f"removed MCP server {SERVER_NAME}")]
