"""Where a workspace is and what it is called: the git root, its remotes, its config.toml.

§2.3 step 1 reads the git remote from `.git/config` itself (§3.2: no git binary). The project
config writer keeps every line it does not own, so a user's own comments survive a `link`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

PROJECT_CONFIG = "config.toml"  # under `.dsh-chapters/`

_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$')
_ENTRY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$")


def find_workspace(cwd: Path) -> Path:
    """The nearest directory at or above `cwd` holding `.git` (a dir, or a worktree's file)."""
    start = cwd.absolute()
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def git_config_path(workspace: Path) -> Path | None:
    dotgit = workspace / ".git"
    if dotgit.is_dir():
        return dotgit / "config"
    if dotgit.is_file():  # a worktree or submodule: `gitdir: <path>`, maybe with a commondir
        pointer = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        if pointer.startswith("gitdir:"):
            gitdir = (workspace / pointer.removeprefix("gitdir:").strip()).resolve()
            common = gitdir / "commondir"
            if common.is_file():
                gitdir = (gitdir / common.read_text(encoding="utf-8").strip()).resolve()
            return gitdir / "config"
    return None


def project_remote(workspace: Path) -> str | None:
    """§2.3 step 1: the `origin` remote, else the first one; None without git or remotes."""
    config = git_config_path(workspace)
    if config is None or not config.is_file():
        return None
    remotes = dict(remotes_in_config(config.read_text(encoding="utf-8", errors="replace")))
    return remotes.get("origin") or next(iter(remotes.values()), None)




def _unquote(raw: str) -> str:
    """A git config value: comments dropped, quotes and escapes resolved."""
    out: list[str] = []
    quoted = False
    index = 0
    while index < len(raw):
        ch = raw[index]
        if ch == "\\" and index + 1 < len(raw):
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(raw[index + 1], raw[index + 1]))
            index += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif ch in "#;" and not quoted:
            break
        else:
            out.append(ch)
        index += 1
    return "".join(out).strip()


def remotes_in_config(text: str) -> list[tuple[str, str]]:
    """(name, url) of every `[remote "name"]` with a url, in file order."""
    found: dict[str, str] = {}
    section: tuple[str, str] | None = None
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section = (header.group(1).lower(), header.group(2) or "")
            line = header.group(3)
            if not line.strip():
                continue
        entry = _ENTRY.match(line)
        if entry and section and section[0] == "remote" and entry.group(1).lower() == "url":
            url = _unquote(entry.group(2) or "")
            if url and section[1] not in found:
                found[section[1]] = url
    return list(found.items())




def _toml_string(value: str) -> str:
    # A JSON string is a TOML basic string, once DEL (legal in JSON, not in TOML) is escaped.
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def set_project_setting(store_root: Path, key: str, value: str) -> Path:
    """Set `key = "value"` in the project config, keeping every other line as it was."""
    path = store_root / PROJECT_CONFIG
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    new_line = f"{key} = {_toml_string(value)}"
    out: list[str] = []
    replaced = False
    for line in lines:
        bare = line.split("=", 1)[0].strip().strip('"')
        if (
            not replaced
            and "=" in line
            and not line.lstrip().startswith(("#", "["))
            and bare == key
        ):
            out.append(new_line)
            replaced = True
        else:
            out.append(line)
    if not replaced:
        # Before any [table], so the key stays top-level.
        at = next((i for i, line in enumerate(out) if line.lstrip().startswith("[")), len(out))
        out.insert(at, new_line)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(out) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


