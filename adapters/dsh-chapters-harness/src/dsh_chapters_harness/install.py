"""Install dsh-chapters into an agent's own configuration, and take it out again exactly.

Claude Code: three hooks (SessionStart, PreCompact, SessionEnd) merged into `settings.json`, and
the MCP server in `.mcp.json` (project scope) or `~/.claude.json` (user scope).
Codex: the MCP server as a `[mcp_servers.<name>]` table in `config.toml`.

Three promises: idempotent (a second install changes nothing), never clobber (another tool's
hooks and servers are left alone, and a same-named server we did not write is a refusal), and an
exact uninstall (the file returns to its original bytes). The original bytes are kept as a
backup next to the file before the first write, and a small record of what was added lives in
the install ledger under DSH_HOME, so uninstall removes exactly that.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import ChaptersError

SERVER_NAME = "dsh-chapters"
CLAUDE_HOOK_EVENTS = ("SessionStart", "PreCompact", "SessionEnd")


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    action: str  # "created" | "updated" | "unchanged" | "restored" | "removed"
    detail: str
    backup: str = ""


@dataclass
class Ledger:
    """What install added, per target file: the original bytes (or absence) and our entries."""

    path: Path
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Ledger:
        if not path.exists():
            return cls(path=path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ChaptersError(
                f"install ledger {path} is unreadable ({type(exc).__name__})",
                hint="move it aside; install and uninstall rebuild it",
            ) from None
        return cls(path=path, entries=dict(data.get("files", {})))

    def save(self) -> None:
        if not self.entries:
            if self.path.exists():
                self.path.unlink()
            return
        body = json.dumps({"files": self.entries}, indent=2, sort_keys=True) + "\n"
        _atomic_write(self.path, body.encode("utf-8"))


def _atomic_write(path: Path, data: bytes) -> None:
    # temp file, fsync, rename: a crash leaves the old file or the new one, never half of one
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_json(path: Path) -> tuple[bytes | None, dict[str, Any]]:
    if not path.exists():
        return None, {}
    raw = path.read_bytes()
    if not raw.strip():
        return raw, {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ChaptersError(
            f"{path} is not valid JSON (line {getattr(exc, 'lineno', '?')}): nothing was changed",
            hint="fix the file by hand, then run install again",
        ) from None
    if not isinstance(data, dict):
        raise ChaptersError(f"{path} holds a JSON {type(data).__name__}, not an object",
                            hint="fix the file by hand, then run install again")
    return raw, data


def _indent_of(raw: bytes | None) -> int:
    if not raw:
        return 2
    for line in raw.decode("utf-8", "replace").splitlines()[1:]:
        stripped = line.lstrip(" ")
        if stripped and len(stripped) != len(line):
            return len(line) - len(stripped)
    return 2


def _dump_json(data: Mapping[str, Any], indent: int) -> bytes:
    return (json.dumps(data, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")


@dataclass(frozen=True, slots=True)
class Installer:
    """Where the agent's files live and what command runs us. Tests point these at tmp dirs."""

    command: tuple[str, ...]  # argv that runs `chapters`, e.g. ("/venv/bin/chapters",)
    ledger_path: Path
    hook_timeout_s: int = 30

    # ----------------------------------------------------------------- Claude Code
    def claude_targets(self, scope: str, workspace: Path, home: Path) -> tuple[Path, Path, str]:
        """(settings.json, MCP file, key of the servers map) for a scope."""
        if scope == "project":
            return workspace / ".claude" / "settings.json", workspace / ".mcp.json", "mcpServers"
        if scope == "user":
            return home / ".claude" / "settings.json", home / ".claude.json", "mcpServers"
        raise ChaptersError(f"unknown scope {scope!r}", hint="use --scope project or --scope user")

    def hook_entry(self) -> dict[str, Any]:
        return {"type": "command", "command": " ".join([*map(_shell_quote, self.command), "hook"]),
                "timeout": self.hook_timeout_s}

    def server_entry(self) -> dict[str, Any]:
        return {"command": self.command[0], "args": [*self.command[1:], "mcp"]}

    def install_claude(self, scope: str, workspace: Path, home: Path) -> list[Change]:
        settings_path, mcp_path, servers_key = self.claude_targets(scope, workspace, home)
        # Refuse before touching anything: both files are checked first.
        settings_raw, settings = _read_json(settings_path)
        mcp_raw, mcp = _read_json(mcp_path)
        servers = mcp.get(servers_key, {})
        if not isinstance(servers, dict):
            raise ChaptersError(f"{mcp_path}: {servers_key} is not an object; nothing was changed",
                                hint="fix the file by hand, then run install again")
        existing = servers.get(SERVER_NAME)
        if existing is not None and existing != self.server_entry():
            raise ChaptersError(
                f"{mcp_path} already has an MCP server named {SERVER_NAME!r} that install did not "
                "write; nothing was changed",
                hint="rename or remove that server, then run install again",
            )
        ledger = Ledger.load(self.ledger_path)
        changes = [
            self._merge_hooks(settings_path, settings_raw, settings, ledger),
            self._merge_server(mcp_path, mcp_raw, mcp, servers_key, ledger),
        ]
        ledger.save()
        return changes

    def _merge_hooks(self, path: Path, raw: bytes | None, data: dict[str, Any],
                     ledger: Ledger) -> Change:
        hooks = data.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise ChaptersError(f"{path}: hooks is not an object; nothing was changed",
                                hint="fix the file by hand, then run install again")
        ours = self.hook_entry()
        added: list[str] = []
        for event in CLAUDE_HOOK_EVENTS:
            groups = hooks.setdefault(event, [])
            if any(self._is_ours(h) for g in groups if isinstance(g, dict)
                   for h in (g.get("hooks") or [])):
                continue
            groups.append({"hooks": [ours]})
            added.append(event)
        if not added:
            return Change(str(path), "unchanged", "hooks already installed")
        return self._write(path, raw, data, ledger, kind="claude-hooks",
                           detail="added hooks " + ", ".join(added))

    def _merge_server(self, path: Path, raw: bytes | None, data: dict[str, Any], key: str,
                      ledger: Ledger) -> Change:
        servers = data.setdefault(key, {})
        if servers.get(SERVER_NAME) == self.server_entry():
            return Change(str(path), "unchanged", f"MCP server {SERVER_NAME} already registered")
        servers[SERVER_NAME] = self.server_entry()
        return self._write(path, raw, data, ledger, kind="claude-mcp",
                           detail=f"registered MCP server {SERVER_NAME}")

    def _write(self, path: Path, raw: bytes | None, data: dict[str, Any], ledger: Ledger, *,
               kind: str, detail: str) -> Change:
        backup = ""
        record = ledger.entries.get(str(path))
        if record is None:
            record = {"kind": kind, "existed": raw is not None, "createdDirs": _missing_dirs(path)}
            if raw is not None:
                backup_path = path.with_name(path.name + ".dsh-chapters.bak")
                _atomic_write(backup_path, raw)
                record["backup"] = str(backup_path)
                backup = str(backup_path)
            ledger.entries[str(path)] = record
        _atomic_write(path, _dump_json(data, _indent_of(raw)))
        return Change(str(path), "updated" if raw is not None else "created", detail, backup)

    def uninstall_claude(self, scope: str, workspace: Path, home: Path) -> list[Change]:
        settings_path, mcp_path, servers_key = self.claude_targets(scope, workspace, home)
        ledger = Ledger.load(self.ledger_path)
        changes = [
            self._remove(settings_path, ledger, lambda d: self._strip_hooks(d)),
            self._remove(mcp_path, ledger, lambda d: self._strip_server(d, servers_key)),
        ]
        ledger.save()
        return changes

    def _is_ours(self, hook: Any) -> bool:
        """Our hook is known by its command: a changed hookTimeoutMs must not make a second
        install add it twice, nor hide it from uninstall."""
        return isinstance(hook, dict) and hook.get("command") == self.hook_entry()["command"]

    def _strip_hooks(self, data: dict[str, Any]) -> int:
        removed = 0
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            return 0
        for event in CLAUDE_HOOK_EVENTS:
            groups = hooks.get(event)
            if not isinstance(groups, list):
                continue
            kept = []
            for group in groups:
                entries = group.get("hooks") if isinstance(group, dict) else None
                if isinstance(entries, list) and len(entries) == 1 and self._is_ours(entries[0]):
                    removed += 1
                    continue
                kept.append(group)
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
        if not hooks:
            del data["hooks"]
        return removed

    def _strip_server(self, data: dict[str, Any], key: str) -> int:
        servers = data.get(key)
        if not isinstance(servers, dict) or servers.get(SERVER_NAME) != self.server_entry():
            return 0
        del servers[SERVER_NAME]
        if not servers:
            del data[key]
        return 1

    def _remove(self, path: Path, ledger: Ledger, strip: Any) -> Change:
        record = ledger.entries.get(str(path))
        raw, data = _read_json(path)
        if raw is None:
            ledger.entries.pop(str(path), None)
            return Change(str(path), "unchanged", "file absent")
        removed = strip(data)
        if not removed:
            return Change(str(path), "unchanged", "nothing of dsh-chapters found")
        if record is not None:
            ledger.entries.pop(str(path))
            if not record.get("existed"):
                if not data:
                    path.unlink()
                    _remove_created_dirs(record)
                    return Change(str(path), "removed", "install created it; nothing else is in it")
            else:
                backup = Path(record.get("backup", ""))
                if backup.is_file():
                    _, original = _read_json(backup)
                    if original == data:
                        # Nothing else changed since install: give back the original bytes.
                        _atomic_write(path, backup.read_bytes())
                        backup.unlink()
                        return Change(str(path), "restored",
                                      f"removed {removed} entries; original bytes back")
        _atomic_write(path, _dump_json(data, _indent_of(raw)))
        return Change(str(path), "updated", f"removed {removed} entries")

    # ----------------------------------------------------------------------- Codex
    def codex_config(self, codex_home: Path) -> Path:
        return codex_home / "config.toml"

    def codex_block(self) -> str:
        args = ", ".join(json.dumps(a) for a in [*self.command[1:], "mcp"])
        return (f"\n# added by `chapters install codex`; `chapters uninstall codex` removes it\n"
                f"[mcp_servers.{SERVER_NAME}]\n"
                f"command = {json.dumps(self.command[0])}\n"
                f"args = [{args}]\n")

    def install_codex(self, codex_home: Path) -> list[Change]:
        path = self.codex_config(codex_home)
        raw = path.read_bytes() if path.exists() else None
        text = raw.decode("utf-8") if raw is not None else ""
        try:
            parsed = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ChaptersError(f"{path} is not valid TOML ({exc}); nothing was changed",
                                hint="fix the file by hand, then run install again") from None
        existing = parsed.get("mcp_servers", {}).get(SERVER_NAME)
        block = self.codex_block()
        if existing is not None:
            if block in text:
                return [Change(str(path), "unchanged",
                               f"MCP server {SERVER_NAME} already registered")]
            raise ChaptersError(
                f"{path} already has [mcp_servers.{SERVER_NAME}] that install did not write; "
                "nothing was changed",
                hint="rename or remove that table, then run install again",
            )
        ledger = Ledger.load(self.ledger_path)
        backup = ""
        if raw is not None:
            backup_path = path.with_name(path.name + ".dsh-chapters.bak")
            _atomic_write(backup_path, raw)
            backup = str(backup_path)
        sep = "" if not text or text.endswith("\n") else "\n"
        ledger.entries[str(path)] = {"kind": "codex-mcp", "existed": raw is not None,
                                     "backup": backup, "block": sep + block,
                                     "createdDirs": _missing_dirs(path)}
        _atomic_write(path, (text + sep + block).encode("utf-8"))
        ledger.save()
        return [Change(str(path), "updated" if raw is not None else "created",
                       f"registered MCP server {SERVER_NAME}", backup)]

    def uninstall_codex(self, codex_home: Path) -> list[Change]:
        path = self.codex_config(codex_home)
        ledger = Ledger.load(self.ledger_path)
        record = ledger.entries.pop(str(path), None)
        if not path.exists():
            ledger.save()
            return [Change(str(path), "unchanged", "file absent")]
        text = path.read_text(encoding="utf-8")
        block = record["block"] if record else self.codex_block()
        if block not in text:
            ledger.save()
            return [Change(str(path), "unchanged", "nothing of dsh-chapters found")]
        rest = text.replace(block, "", 1)
        if record and record.get("backup"):
            Path(record["backup"]).unlink(missing_ok=True)
        ledger.save()
        if record and not record.get("existed") and not rest:
            path.unlink()
            _remove_created_dirs(record)
            return [Change(str(path), "removed", "install created it; nothing else is in it")]
        _atomic_write(path, rest.encode("utf-8"))
        return [Change(str(path), "restored", f"removed [mcp_servers.{SERVER_NAME}]")]


def _missing_dirs(path: Path) -> list[str]:
    """The parent directories a first write will create (`.claude/`, `~/.codex/`), deepest
    first, so an exact uninstall removes them again."""
    missing: list[str] = []
    for parent in path.parents:
        if parent.exists():
            break
        missing.append(str(parent))
    return missing


def _remove_created_dirs(record: Mapping[str, Any]) -> None:
    for directory in record.get("createdDirs", ()):
        try:
            Path(directory).rmdir()  # only while empty: anything added since stays
        except OSError:
            return


def _shell_quote(part: str) -> str:
    return shlex.quote(part)


def describe(changes: Sequence[Change]) -> str:
    lines = []
    for c in changes:
        line = f"{c.action:9} {c.path}: {c.detail}"
        if c.backup:
            line += f" (backup: {c.backup})"
        lines.append(line)
    return "\n".join(lines)
