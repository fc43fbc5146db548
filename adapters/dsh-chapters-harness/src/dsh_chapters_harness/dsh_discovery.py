"""Where DSH keeps a workspace's session logs (docs/formats.md, "DSH": on-disk layout).

`$DSH_HOME/sessions/--<normalized-cwd>--/<encoded-id>/session.jsonl.zstd` (or `session.jsonl`
when compression is off); `$DSH_HOME` defaults to `~/.dsh`. Later DSH releases number the log's
generation in its name, `session.v<N>.jsonl[.zstd]`: a session directory's log is the one of
the highest generation (an unnumbered name is generation 0). The project directory name is DSH's
own `projectKey(cwd)`, reproduced here code unit for code unit; it is lossy (two cwds can share a
directory), so a log belongs to a workspace only when its header's `cwd` is that workspace too.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dsh_chapters_harness.discovery import same_directory
from dsh_chapters_harness.dsh_log import decompressed_head

HOME_ENV = "DSH_HOME"
_LOG_NAME = re.compile(r"session(?:\.v(\d+))?\.jsonl(\.zstd)?")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS = frozenset("/\\:")
_KEY_MAX = 251  # DSH bounds the readable slug for filesystem component limits
_HEADER_BYTES = 1 << 16  # a header line is a few hundred bytes; this bounds a damaged one


def dsh_home(env: Mapping[str, str] | None = None) -> Path:
    """DSH's home: `$DSH_HOME`, else `~/.dsh` (an empty value counts as unset)."""
    explicit = (env if env is not None else os.environ).get(HOME_ENV, "")
    return Path(explicit).expanduser() if explicit else Path.home() / ".dsh"


def _code_units(text: str) -> Iterable[int]:
    """The UTF-16 code units of `text`: DSH escapes per code unit, not per code point."""
    raw = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(raw), 2):
        yield raw[i] | raw[i + 1] << 8


def project_key(cwd: str) -> str:
    """DSH's readable directory name for a project path (`--<slug>--`)."""
    readable: list[str] = []
    separator_run = False
    for unit in _code_units(cwd):
        ch = chr(unit)
        if ch in _SEPARATORS:
            if not separator_run:
                readable.append("-")
            separator_run = True
            continue
        readable.append(ch if ch in _SAFE else f"~{unit:04X}")
        separator_run = False
    slug = "".join(readable).lstrip("-") or "root"
    return f"--{slug[:_KEY_MAX]}--"


def encode_segment(raw: str) -> str:
    """DSH's injective encoding of a session id as one path segment."""
    if raw == ".":
        return "~002E"
    if raw == "..":
        return "~002E~002E"
    return "".join(chr(u) if chr(u) in _SAFE else f"~{u:04X}" for u in _code_units(raw))


def read_header(path: str | Path) -> dict[str, Any] | None:
    """A log's first line when it is a DSH session header (`type: "session"`), else None."""
    head = decompressed_head(path, _HEADER_BYTES)
    first, newline, _ = head.partition(b"\n")
    if not newline:
        return None
    try:
        value = json.loads(first.decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("type") != "session":
        return None
    return value if isinstance(value.get("id"), str) else None


def is_log_name(name: str) -> bool:
    """`session.jsonl[.zstd]` or `session.v<N>.jsonl[.zstd]`: a DSH session log's own name."""
    return _LOG_NAME.fullmatch(name) is not None


def _generation(path: Path) -> tuple[int, int]:
    """A log name's (generation, compressed): the newest generation wins, then zstd (DSH's
    default encoding) over a plain copy of the same generation."""
    match = _LOG_NAME.fullmatch(path.name)
    assert match is not None
    return int(match.group(1) or 0), 1 if match.group(2) else 0


def newest_logs(paths: Iterable[Path]) -> list[Path]:
    """Of the session logs given, the highest generation's in each session directory."""
    best: dict[Path, Path] = {}
    for path in paths:
        kept = best.get(path.parent)
        if kept is None or _generation(path) > _generation(kept):
            best[path.parent] = path
    return sorted(best.values())


def _logs_under(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    candidates = {p for p in root.rglob("*.jsonl") if p.is_file()}
    candidates |= {p for p in root.rglob("*.jsonl.zstd") if p.is_file()}
    named = [p for p in candidates if is_log_name(p.name)]
    # `--source DIR` may hold flat copies too: any .jsonl / .jsonl.zstd whose header is DSH's.
    return sorted(set(newest_logs(named)) | (candidates - set(named)))


def discover_logs(source: str | None, cwd: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The DSH logs under `source`, or this workspace's logs under `$DSH_HOME/sessions`."""
    if source is not None:
        return [str(p) for p in _logs_under(Path(source)) if read_header(p) is not None]
    sessions = dsh_home(env) / "sessions"
    keys = {project_key(cwd), project_key(os.path.realpath(cwd))}
    found: list[str] = []
    for key in sorted(keys):
        project = sessions / key
        if not project.is_dir():
            continue
        logs = (p for p in project.glob("*/session*.jsonl*") if is_log_name(p.name))
        for path in newest_logs(logs):
            header = read_header(path)
            if header is not None and same_directory(str(header.get("cwd", "")), cwd):
                found.append(str(path))
    return found
