"""Our MCP server in the JSON files Cursor and GitHub Copilot CLI read, and out again exactly.

- Cursor: `mcpServers.dsh-chapters` = `{command, args}` in `.cursor/mcp.json` of the project
  (`--scope project`, the default) or `~/.cursor/mcp.json` (`--scope user`).
- Copilot CLI: `mcpServers.dsh-chapters` = `{type: "local", command, args, tools: ["*"]}` in
  `$COPILOT_HOME/mcp-config.json` (default ~/.copilot; `--scope user`, the default) or the
  project's `.github/mcp.json` (`--scope project`), the files its `/mcp` reads.

Aider reads no MCP configuration, so it has nothing to install (the CLI says so).

The promises of install.py hold here too: idempotent, another tool's servers kept, a same-named
server we did not write refused, the original bytes kept as a backup before the first change and
given back by uninstall when nothing else changed since, and a file install created removed
(with the folders it made) once it holds nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import ChaptersError, UsageError

from dsh_chapters_harness.copilot_cli import copilot_home
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

SERVERS_KEY = "mcpServers"
# agent -> (its scopes, the default scope)
SCOPES: dict[str, tuple[tuple[str, ...], str]] = {
    "cursor": (("project", "user"), "project"),
    "copilot-cli": (("user", "project"), "user"),
}


@dataclass(frozen=True, slots=True)
class McpJsonFile:
    """One agent's MCP server file, and the entry that is ours in it."""

    agent: str
    path: Path
    entry: dict[str, Any] = field(hash=False)


def mcp_file(agent: str, scope: str, command: tuple[str, ...], workspace: Path, home: Path,
             env: Mapping[str, str]) -> McpJsonFile:
    """Where `agent` reads MCP servers for `scope`, and the entry that starts `chapters mcp`."""
    scopes, _ = SCOPES[agent]
    if scope not in scopes:
        raise UsageError(f"--scope {scope}: {agent} has no such scope",
                         hint=f"use --scope {' or --scope '.join(scopes)}")
    args = [*command[1:], "mcp"]
    if agent == "cursor":
        folder = workspace if scope == "project" else home
        return McpJsonFile(agent, folder / ".cursor" / "mcp.json",
                           {"command": command[0], "args": args})
    path = (workspace / ".github" / "mcp.json" if scope == "project"
            else copilot_home({"HOME": str(home), **env}) / "mcp-config.json")
    return McpJsonFile(agent, path, {"type": "local", "command": command[0], "args": args,
                                     "tools": ["*"]})


@dataclass(frozen=True, slots=True)
class McpJsonInstaller:
    """Adds and removes our entry; what it added is recorded in the install ledger."""

    ledger_path: Path

    def install(self, target: McpJsonFile) -> list[Change]:
        path = target.path
        raw, data = _read_json(path)  # refuses a file that is not a JSON object
        servers = data.setdefault(SERVERS_KEY, {})
        if not isinstance(servers, dict):
            raise ChaptersError(f"{path}: {SERVERS_KEY} is not an object; nothing was changed",
                                hint="fix the file by hand, then run install again")
        existing = servers.get(SERVER_NAME)
        if existing == target.entry:
            return [Change(str(path), "unchanged",
                           f"MCP server {SERVER_NAME} already registered")]
        if existing is not None:
            raise ChaptersError(
                f"{path} already has an MCP server named {SERVER_NAME!r} that install did not "
                "write; nothing was changed",
                hint="rename or remove that server, then run install again")
        servers[SERVER_NAME] = target.entry
        ledger = Ledger.load(self.ledger_path)
        backup = ""
        if str(path) not in ledger.entries:
            record: dict[str, Any] = {"kind": f"{target.agent}-mcp", "existed": raw is not None,
                                      "createdDirs": _missing_dirs(path)}
            if raw is not None:
                backup_path = path.with_name(path.name + ".dsh-chapters.bak")
                _atomic_write(backup_path, raw)
                record["backup"] = backup = str(backup_path)
            ledger.entries[str(path)] = record
        _atomic_write(path, _dump_json(data, _indent_of(raw)))
        ledger.save()
        return [Change(str(path), "updated" if raw is not None else "created",
                       f"registered MCP server {SERVER_NAME}", backup)]

    def uninstall(self, target: McpJsonFile) -> list[Change]:
        path = target.path
        ledger = Ledger.load(self.ledger_path)
        record = ledger.entries.get(str(path))
        raw, data = _read_json(path)
        if raw is None:
            ledger.entries.pop(str(path), None)
            ledger.save()
            return [Change(str(path), "unchanged", "file absent")]
        servers = data.get(SERVERS_KEY)
        if not isinstance(servers, dict) or servers.get(SERVER_NAME) != target.entry:
            return [Change(str(path), "unchanged", "nothing of dsh-chapters found")]
        del servers[SERVER_NAME]
        if not servers:
            del data[SERVERS_KEY]
        ledger.entries.pop(str(path), None)
        ledger.save()
        if record is not None and not record.get("existed") and not data:
            path.unlink()
            _remove_created_dirs(record)
            return [Change(str(path), "removed", "install created it; nothing else is in it")]
        backup = Path(record.get("backup", "")) if record is not None else None
        if backup is not None and backup.is_file():
            _, original = _read_json(backup)
            if original == data:  # nothing else changed since install: the original bytes
                _atomic_write(path, backup.read_bytes())
                backup.unlink()
                return [Change(str(path), "restored",
                               f"removed MCP server {SERVER_NAME}; original bytes back")]
        _atomic_write(path, _dump_json(data, _indent_of(raw)))
        return [Change(str(path), "updated", f"removed MCP server {SERVER_NAME}")]
