"""Install dsh-chapters into an agent's own configuration, and take it out again exactly.

Claude Code: three hooks (SessionStart, PreCompact, SessionEnd) merged into `settings.json`, and
the MCP server in `.mcp.json` (project scope) or `~/.claude.json` (user scope; with
CLAUDE_CONFIG_DIR set, `$CLAUDE_CONFIG_DIR/settings.json` and `$CLAUDE_CONFIG_DIR/.claude.json`).
The local scope is Claude Code's own: the hooks in `.claude/settings.local.json` (a file Claude
Code keeps out of git) and the server under this project's entry of `~/.claude.json`
(`projects.<path>.mcpServers`, where `claude mcp add --scope local` puts it). The project scope's
files are committed, so the caller gives them a command every teammate can run (`chapters` on
the PATH); the user and local scopes are this machine's, and may name an absolute path.
Codex: the MCP server as a `[mcp_servers.<name>]` table in `config.toml`, and next to it the
SessionStart and Stop hooks (`[[hooks.<Event>]]` tables). Codex runs hooks only behind a feature
flag (`[features] hooks = true`; `codex_hooks = true` before the rename): install turns it on
only when asked (`enable_hooks`, the CLI's `--enable-hooks`), and uninstall takes it out again.

Three promises: idempotent (a second install changes nothing), never clobber (another tool's
hooks and servers are left alone, and a same-named server we did not write is a refusal), and an
exact uninstall (the file returns to its original bytes). The original bytes are kept as a
backup next to the file before the first write, and a small record of what was added lives in
the install ledger under DSH_HOME, so uninstall removes exactly that.
"""

from __future__ import annotations

import json
import os
import re
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
# Codex: SessionStart prints the notice, Stop archives the completed turns (no session end).
CODEX_HOOK_EVENTS = ("SessionStart", "Stop")
# The flag's name in current releases, then in older ones (Codex reads whichever it knows).
CODEX_FEATURE_KEYS = ("hooks", "codex_hooks")
CODEX_MARK = "# added by `chapters install codex`; `chapters uninstall codex` removes it"
FEATURE_MARK = "# added by `chapters install codex --enable-hooks`"
_FEATURES_HEADER = re.compile(r"^[ \t]*\[[ \t]*features[ \t]*\][ \t]*(?:#[^\n]*)?\n", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Change:
    """What install or uninstall did to one configuration file, and where its backup is."""

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
    def claude_targets(self, scope: str, workspace: Path, home: Path,
                       config_dir: Path | None = None) -> tuple[Path, Path, tuple[str, ...]]:
        """(settings file, MCP file, keys down to the servers map) for a scope. `config_dir`
        is CLAUDE_CONFIG_DIR: Claude Code then keeps both user files inside it."""
        servers = ("mcpServers",)
        user_mcp = (config_dir if config_dir is not None else home) / ".claude.json"
        if scope == "project":
            return workspace / ".claude" / "settings.json", workspace / ".mcp.json", servers
        if scope == "local":
            return (workspace / ".claude" / "settings.local.json", user_mcp,
                    ("projects", str(workspace), *servers))
        if scope == "user" and config_dir is not None:
            return config_dir / "settings.json", user_mcp, servers
        if scope == "user":
            return home / ".claude" / "settings.json", user_mcp, servers
        raise ChaptersError(f"unknown scope {scope!r}",
                            hint="use --scope project, --scope local or --scope user")

    def hook_entry(self) -> dict[str, Any]:
        return {"type": "command", "command": " ".join([*map(_shell_quote, self.command), "hook"]),
                "timeout": self.hook_timeout_s}

    def server_entry(self) -> dict[str, Any]:
        return {"command": self.command[0], "args": [*self.command[1:], "mcp"]}

    def install_claude(self, scope: str, workspace: Path, home: Path,
                       config_dir: Path | None = None) -> list[Change]:
        settings_path, mcp_path, servers_key = self.claude_targets(scope, workspace, home,
                                                                   config_dir)
        # Refuse before touching anything: both files are checked first.
        settings_raw, settings = _read_json(settings_path)
        mcp_raw, mcp = _read_json(mcp_path)
        servers = _dig(mcp, servers_key)
        if servers is None:
            raise ChaptersError(f"{mcp_path}: {'.'.join(servers_key)} is not an object; nothing "
                                "was changed", hint="fix the file by hand, then run install again")
        ledger = Ledger.load(self.ledger_path)
        # An earlier install's entries (another command: an absolute path before this release
        # wrote `chapters` at project scope) are ours to replace, not a stranger's to refuse.
        earlier_hook = _earlier_hook(ledger.entries.get(str(settings_path)), settings)
        existing = servers.get(SERVER_NAME)
        mcp_record = ledger.entries.get(str(mcp_path))
        # a ledger from before it recorded the entry: the file's entry is the one install wrote
        earlier_server = mcp_record.get("server", existing) if mcp_record else None
        if existing is not None and existing not in (self.server_entry(), earlier_server):
            raise ChaptersError(
                f"{mcp_path} already has an MCP server named {SERVER_NAME!r} that install did not "
                "write; nothing was changed",
                hint="rename or remove that server, then run install again",
            )
        changes = [
            self._merge_hooks(settings_path, settings_raw, settings, ledger, earlier_hook),
            self._merge_server(mcp_path, mcp_raw, mcp, servers_key, ledger),
        ]
        ledger.save()
        return changes

    def _merge_hooks(self, path: Path, raw: bytes | None, data: dict[str, Any],
                     ledger: Ledger, earlier: str = "") -> Change:
        if not isinstance(data.setdefault("hooks", {}), dict):
            raise ChaptersError(f"{path}: hooks is not an object; nothing was changed",
                                hint="fix the file by hand, then run install again")
        ours = self.hook_entry()
        replaced = bool(earlier) and earlier != ours["command"] and self._strip_hooks(data, earlier)
        hooks = data.setdefault("hooks", {})
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
        record = ledger.entries.get(str(path))
        if record is not None:
            record["hook"] = ours["command"]
        verb = "replaced the earlier hooks with" if replaced else "added hooks"
        return self._write(path, raw, data, ledger, kind="claude-hooks",
                           detail=f"{verb} " + ", ".join(added))

    def _merge_server(self, path: Path, raw: bytes | None, data: dict[str, Any],
                      key: tuple[str, ...], ledger: Ledger) -> Change:
        servers = _dig(data, key, create=True)
        assert servers is not None  # install_claude refused a non-object before any write
        if servers.get(SERVER_NAME) == self.server_entry():
            return Change(str(path), "unchanged", f"MCP server {SERVER_NAME} already registered")
        servers[SERVER_NAME] = self.server_entry()
        record = ledger.entries.get(str(path))
        if record is not None:
            record["server"] = self.server_entry()
        return self._write(path, raw, data, ledger, kind="claude-mcp",
                           detail=f"registered MCP server {SERVER_NAME}")

    def _write(self, path: Path, raw: bytes | None, data: dict[str, Any], ledger: Ledger, *,
               kind: str, detail: str) -> Change:
        backup = ""
        record = ledger.entries.get(str(path))
        if record is None:
            record = {"kind": kind, "existed": raw is not None, "createdDirs": _missing_dirs(path),
                      # what this install wrote, so an uninstall by a later `chapters` (another
                      # command, another path) still knows its own entries
                      "hook": self.hook_entry()["command"], "server": self.server_entry()}
            if raw is not None:
                backup_path = path.with_name(path.name + ".dsh-chapters.bak")
                _atomic_write(backup_path, raw)
                record["backup"] = str(backup_path)
                backup = str(backup_path)
            ledger.entries[str(path)] = record
        _atomic_write(path, _dump_json(data, _indent_of(raw)))
        return Change(str(path), "updated" if raw is not None else "created", detail, backup)

    def uninstall_claude(self, scope: str, workspace: Path, home: Path,
                         config_dir: Path | None = None) -> list[Change]:
        settings_path, mcp_path, servers_key = self.claude_targets(scope, workspace, home,
                                                                   config_dir)
        ledger = Ledger.load(self.ledger_path)
        records = [ledger.entries.get(str(p)) for p in (settings_path, mcp_path)]
        hook, server = ((records[0] or {}).get("hook", ""), (records[1] or {}).get("server"))
        changes = [
            self._remove(settings_path, ledger, lambda d: self._strip_hooks(d, hook)),
            self._remove(mcp_path, ledger, lambda d: self._strip_server(d, servers_key, server)),
        ]
        for record, change in zip(records, changes, strict=True):
            if record is not None and change.action == "removed":
                # Both files may live in one directory install made (CLAUDE_CONFIG_DIR): it
                # is empty only once the second is gone.
                _remove_created_dirs(record)
        ledger.save()
        return changes

    def _is_ours(self, hook: Any, also: str = "") -> bool:
        """Our hook is known by its command: a changed hookTimeoutMs must not make a second
        install add it twice, nor hide it from uninstall. `also`: the command an earlier
        install recorded in the ledger."""
        commands = {self.hook_entry()["command"], *([also] if also else [])}
        return isinstance(hook, dict) and hook.get("command") in commands

    def _strip_hooks(self, data: dict[str, Any], also: str = "") -> int:
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
                if (isinstance(entries, list) and len(entries) == 1
                        and self._is_ours(entries[0], also)):
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

    def _strip_server(self, data: dict[str, Any], key: tuple[str, ...],
                      also: Any = None) -> int:
        servers = _dig(data, key)
        if servers is None or servers.get(SERVER_NAME) not in (self.server_entry(), also):
            return 0
        del servers[SERVER_NAME]
        _prune(data, key)
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

    def codex_mcp_block(self) -> str:
        """The block an install before the Codex hooks wrote (uninstall still knows it)."""
        args = ", ".join(json.dumps(a) for a in [*self.command[1:], "mcp"])
        return (f"\n{CODEX_MARK}\n"
                f"[mcp_servers.{SERVER_NAME}]\n"
                f"command = {json.dumps(self.command[0])}\n"
                f"args = [{args}]\n")

    def codex_hook_command(self) -> str:
        return " ".join([*map(_shell_quote, self.command), "hook", "--agent", "codex"])

    def codex_block(self) -> str:
        """The MCP server, then one `[[hooks.<Event>]]` group per hook (codex-rs/config
        hook_config.rs: a matcher group holds `hooks`, each `{type, command, timeout}`)."""
        hooks = "".join(
            f"\n[[hooks.{event}]]\n"
            f"[[hooks.{event}.hooks]]\n"
            f'type = "command"\n'
            f"command = {json.dumps(self.codex_hook_command())}\n"
            f"timeout = {self.hook_timeout_s}\n"
            for event in CODEX_HOOK_EVENTS
        )
        return self.codex_mcp_block() + hooks

    def install_codex(self, codex_home: Path, *, enable_hooks: bool = False) -> list[Change]:
        path = self.codex_config(codex_home)
        raw = path.read_bytes() if path.exists() else None
        text = raw.decode("utf-8") if raw is not None else ""
        parsed = _toml(path, text)
        ledger = Ledger.load(self.ledger_path)
        record = ledger.entries.get(str(path))
        existing = parsed.get("mcp_servers", {}).get(SERVER_NAME)
        block = self.codex_block()
        ours = block in text or (record is not None and record.get("block", "\0") in text)
        if existing is not None and not ours:
            raise ChaptersError(
                f"{path} already has [mcp_servers.{SERVER_NAME}] that install did not write; "
                "nothing was changed",
                hint="rename or remove that table, then run install again",
            )
        flag = _feature_state(parsed)
        if enable_hooks and flag is False:
            raise ChaptersError(
                f"{path} turns Codex hooks off ([features] "
                f"{' / '.join(CODEX_FEATURE_KEYS)} = false); nothing was changed",
                hint="set it to true by hand (your own setting is not overwritten), or run "
                     "install without --enable-hooks",
            )
        features = ""
        new = text
        if enable_hooks and flag is None:
            new, features = _with_feature_flag(text)
        block_sep = "" if not new or new.endswith("\n") else "\n"
        if not ours:
            new = new + block_sep + block
        if new == text:
            state = "on" if flag else "off: `chapters install codex --enable-hooks` turns it on"
            return [Change(str(path), "unchanged", f"MCP server {SERVER_NAME} and hooks already "
                           f"installed; Codex hooks flag {state}")]
        _toml(path, new, after_install=True)  # refuse a result Codex could not read
        if record is None:
            backup = ""
            if raw is not None:
                backup_path = path.with_name(path.name + ".dsh-chapters.bak")
                _atomic_write(backup_path, raw)
                backup = str(backup_path)
            record = {"kind": "codex-mcp", "existed": raw is not None, "backup": backup,
                      "block": block_sep + block, "createdDirs": _missing_dirs(path)}
            ledger.entries[str(path)] = record
        if features:
            record["features"] = features
        _atomic_write(path, new.encode("utf-8"))
        ledger.save()
        added = [] if ours else [f"registered MCP server {SERVER_NAME}",
                                 f"added hooks {', '.join(CODEX_HOOK_EVENTS)}"]
        if features:
            added.append(f"turned on [features] {', '.join(CODEX_FEATURE_KEYS)} (--enable-hooks)")
        elif not flag:
            added.append("[features] is left as it was: Codex runs the hooks only with its "
                         "hooks flag on (the newest releases turn it on by default); rerun "
                         "with --enable-hooks to set it")
        return [Change(str(path), "updated" if raw is not None else "created", "; ".join(added),
                       record.get("backup", "") if not ours else "")]

    def uninstall_codex(self, codex_home: Path) -> list[Change]:
        path = self.codex_config(codex_home)
        ledger = Ledger.load(self.ledger_path)
        record = ledger.entries.pop(str(path), None)
        if not path.exists():
            ledger.save()
            return [Change(str(path), "unchanged", "file absent")]
        text = path.read_text(encoding="utf-8")
        blocks = [record["block"]] if record else [self.codex_block(), self.codex_mcp_block()]
        block = next((b for b in blocks if b in text), None)
        features = record.get("features", "") if record else ""
        if block is None and not (features and features in text):
            ledger.save()
            return [Change(str(path), "unchanged", "nothing of dsh-chapters found")]
        rest = text.replace(block, "", 1) if block is not None else text
        if features:
            rest = rest.replace(features, "", 1)
        if record and record.get("backup"):
            Path(record["backup"]).unlink(missing_ok=True)
        ledger.save()
        if record and not record.get("existed") and not rest:
            path.unlink()
            _remove_created_dirs(record)
            return [Change(str(path), "removed", "install created it; nothing else is in it")]
        _atomic_write(path, rest.encode("utf-8"))
        removed = f"removed [mcp_servers.{SERVER_NAME}] and its hooks"
        if features:
            removed += " and the [features] lines install added"
        return [Change(str(path), "restored", removed)]


# The hook command releases before the ledger recorded it wrote: the `chapters` script's
# absolute path, or `<python> -m dsh_chapters`, then `hook`.
_EARLIER_HOOK = re.compile(r"(?:^|/)chapters(?:\.exe)?'? hook$|^\S+ -m dsh_chapters hook$")


def _earlier_hook(record: Mapping[str, Any] | None, settings: Mapping[str, Any]) -> str:
    """The hook command an earlier install of this file wrote: the ledger says, or (for a
    ledger from before it said) the one command of that form among the file's hooks."""
    if record is None:
        return ""
    if record.get("hook"):
        return str(record["hook"])
    hooks = settings.get("hooks")
    found = {h.get("command") for groups in (hooks.values() if isinstance(hooks, dict) else ())
             if isinstance(groups, list) for g in groups if isinstance(g, dict)
             for h in (g.get("hooks") or []) if isinstance(h, dict)
             and _EARLIER_HOOK.search(str(h.get("command", "")))}
    return str(found.pop()) if len(found) == 1 else ""


def _dig(data: dict[str, Any], keys: Sequence[str], *,
         create: bool = False) -> dict[str, Any] | None:
    """The object at `keys` inside `data` ({} when absent), or None when something on the way
    is not an object; with `create`, missing objects are added on the way."""
    here = data
    for key in keys:
        below = here.get(key)
        if below is None:
            below = {}
            if create:
                here[key] = below
        if not isinstance(below, dict):
            return None
        here = below
    return here


def _prune(data: dict[str, Any], keys: Sequence[str]) -> None:
    """Drop the objects at `keys` that are left empty, deepest first (what install added)."""
    for depth in range(len(keys), 0, -1):
        parent = _dig(data, keys[:depth - 1])
        if parent is None or parent.get(keys[depth - 1]) != {}:
            return
        del parent[keys[depth - 1]]


def _toml(path: Path, text: str, *, after_install: bool = False) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        if after_install:
            raise ChaptersError(
                f"{path}: adding the dsh-chapters tables would make it invalid TOML ({exc}), "
                "probably because it defines hooks or features inline; nothing was changed",
                hint="add the tables by hand as docs/agents.md shows",
            ) from None
        raise ChaptersError(f"{path} is not valid TOML ({exc}); nothing was changed",
                            hint="fix the file by hand, then run install again") from None


def _feature_state(parsed: Mapping[str, Any]) -> bool | None:
    """True if a hooks flag is on, False if one is set off (and none on), None if unset."""
    features = parsed.get("features")
    if not isinstance(features, Mapping):
        return None
    values = [features[k] for k in CODEX_FEATURE_KEYS if k in features]
    if any(v is True for v in values):
        return True
    return False if values else None


def _with_feature_flag(text: str) -> tuple[str, str]:
    """`text` with the hooks flags on, and the exact text added (uninstall removes it): lines
    right under an existing `[features]` header, else a new `[features]` table at the end."""
    lines = "".join(f"{key} = true  {FEATURE_MARK}\n" for key in CODEX_FEATURE_KEYS)
    header = _FEATURES_HEADER.search(text)
    if header is not None:
        return text[: header.end()] + lines + text[header.end():], lines
    sep = "" if not text or text.endswith("\n") else "\n"
    added = f"{sep}\n[features]\n{lines}"
    return text + added, added


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
