"""`chapters install dsh` / `uninstall dsh`: one row in `$DSH_HOME/cordis.patch.yml`.

DSH composes its plugins from cordis YAML; the home-level user layer `$DSH_HOME/cordis.patch.yml`
is a list of patch operations applied over every profile (apps/cli/src/profile-boot.ts). We add
one `- insert:` operation holding one `@deepseek-ai/dsh-mcp-client` row that runs
`chapters -C <project> mcp` over stdio. DSH scrubs a stdio server's environment, so the row
passes `DSH_HOME` (where chapters keeps its own state) in its `env`.

The same three promises as the other installs (install.py): idempotent, never clobber (a row of
ours that we did not write is a refusal), and an exact uninstall: the operation is appended as
one text block and removed as that block, so the file returns to its original bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from dsh_chapters_core.errors import ChaptersError

from dsh_chapters_harness.install import (
    SERVER_NAME,
    Change,
    Ledger,
    _atomic_write,
    _missing_dirs,
    _remove_created_dirs,
)

PATCH_FILE = "cordis.patch.yml"
MCP_CLIENT = "@deepseek-ai/dsh-mcp-client"
ROW_ID = SERVER_NAME  # the cordis row id; serverName too (tools: mcp__dsh-chapters__…)
_KIND = "dsh-mcp"


def _scalar(value: str) -> str:
    """A YAML double-quoted scalar: JSON's string syntax is valid YAML (YAML 1.2 §7.3.1)."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class DshInstaller:
    """Where the patch lives, what runs us, and which project and state home the row names."""

    command: tuple[str, ...]  # argv that runs `chapters`
    ledger_path: Path
    workspace: Path  # given to `chapters -C`: the project whose archive the tools read
    chapters_home: Path  # passed as DSH_HOME in the row's env: chapters' own state

    def patch_path(self, dsh_home: Path) -> Path:
        return dsh_home / PATCH_FILE

    def block(self) -> str:
        args = ", ".join(_scalar(a) for a in [*self.command[1:], "-C", str(self.workspace),
                                               "mcp"])
        return (
            "# added by `chapters install dsh`; `chapters uninstall dsh` removes it\n"
            "- insert:\n"
            f"    - id: {ROW_ID}\n"
            f"      name: {_scalar(MCP_CLIENT)}\n"
            "      config:\n"
            f"        serverName: {SERVER_NAME}\n"
            "        transport: stdio\n"
            f"        command: {_scalar(self.command[0])}\n"
            f"        args: [{args}]\n"
            "        env:\n"
            f"          DSH_HOME: {_scalar(str(self.chapters_home))}\n"
        )

    def install(self, dsh_home: Path) -> list[Change]:
        path = self.patch_path(dsh_home)
        raw = path.read_bytes() if path.exists() else None
        text = raw.decode("utf-8") if raw is not None else ""
        operations = _operations(path, text)
        block = self.block()
        if _has_our_row(operations):
            if block in text:
                return [Change(str(path), "unchanged", f"MCP row {ROW_ID} already present")]
            raise ChaptersError(
                f"{path} already has a cordis row or MCP server named {ROW_ID!r} that this "
                "install did not write (another project, or edited by hand); nothing was changed",
                hint="remove that row (or run `chapters uninstall dsh` from the project that "
                     "added it), then run install again",
            )
        ledger = Ledger.load(self.ledger_path)
        sep = "" if not text or text.endswith("\n") else "\n"
        ledger.entries[str(path)] = {"kind": _KIND, "existed": raw is not None,
                                     "block": sep + block, "createdDirs": _missing_dirs(path)}
        _atomic_write(path, (text + sep + block).encode("utf-8"))
        ledger.save()
        return [Change(str(path), "updated" if raw is not None else "created",
                       f"added MCP row {ROW_ID} ({MCP_CLIENT}, stdio)")]

    def uninstall(self, dsh_home: Path) -> list[Change]:
        path = self.patch_path(dsh_home)
        ledger = Ledger.load(self.ledger_path)
        record = ledger.entries.pop(str(path), None)
        if not path.exists():
            ledger.save()
            return [Change(str(path), "unchanged", "file absent")]
        text = path.read_text(encoding="utf-8")
        block = record["block"] if record else self.block()
        if block not in text:
            if record:  # the block was edited since: keep the record for a careful look
                ledger.entries[str(path)] = record
            ledger.save()
            return [Change(str(path), "unchanged",
                           f"the MCP row {ROW_ID} install added is not in it as written")]
        rest = text.replace(block, "", 1)
        ledger.save()
        if record and not record.get("existed") and not rest:
            path.unlink()
            _remove_created_dirs(record)
            return [Change(str(path), "removed", "install created it; nothing else is in it")]
        _atomic_write(path, rest.encode("utf-8"))
        return [Change(str(path), "restored", f"removed MCP row {ROW_ID}")]


class _PatchLoader(yaml.SafeLoader):
    """Safe YAML that reads DSH's own tags (`!!js process.cwd()`) as opaque plain values."""


def _opaque(loader: _PatchLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_PatchLoader.add_constructor(None, _opaque)


def load_patch(text: str) -> Any:
    """A cordis patch file's YAML, DSH's tags kept as plain values (never evaluated)."""
    return yaml.load(text, Loader=_PatchLoader)  # a SafeLoader subclass: no object tags


def _operations(path: Path, text: str) -> list[Any]:
    """The patch file's operations; a file we cannot read as a YAML list is a refusal."""
    try:
        data = load_patch(text) if text.strip() else []
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ChaptersError(f"{path} is not valid YAML{where}; nothing was changed",
                            hint="fix the file by hand, then run install again") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise ChaptersError(f"{path} holds a YAML {type(data).__name__}, not a list of patch "
                            "operations; nothing was changed",
                            hint="fix the file by hand, then run install again")
    return data


def _has_our_row(operations: list[Any]) -> bool:
    for operation in operations:
        rows = operation.get("insert") if isinstance(operation, dict) else None
        for row in rows if isinstance(rows, list) else ():
            if not isinstance(row, dict):
                continue
            config = row.get("config")
            server = config.get("serverName") if isinstance(config, dict) else None
            if row.get("id") == ROW_ID or server == SERVER_NAME:
                return True
    return False
