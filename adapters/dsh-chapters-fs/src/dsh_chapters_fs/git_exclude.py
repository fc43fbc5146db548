"""Keep the archive out of `git status`: `.git/info/exclude`, never a committed file.

The store (`.dsh-chapters/`) and the pool's copy (`.dsh-knowledge/`) are this machine's own:
the store holds verbatim sessions (committing it would publish them with the code, past the
pool's access control), and the pool already shares what is meant to be shared. An entry in
`.gitignore` would be a change to the user's project that every teammate sees; git reads
`$GIT_COMMON_DIR/info/exclude` on this clone only, so that is where the entries go.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

MARK = "# dsh-chapters: this machine's archive and its copy of the pool (docs/store.md)"


def git_common_dir(workspace: Path) -> Path | None:
    """The repository's common git directory (a worktree's `.git` file points into it)."""
    dot_git = workspace / ".git"
    if dot_git.is_dir():
        return dot_git
    if not dot_git.is_file():
        return None
    try:
        first = dot_git.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    gitdir = Path(first.removeprefix("gitdir:").strip())
    gitdir = gitdir if gitdir.is_absolute() else (workspace / gitdir)
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return gitdir if gitdir.is_dir() else None
    found = Path(common) if Path(common).is_absolute() else gitdir / common
    return found if found.is_dir() else None


def _excluded(lines: Sequence[str], entry: str) -> bool:
    bare = entry.strip("/")
    return any(line.strip().strip("/") == bare for line in lines)


def exclude_from_git(workspace: Path, entries: Sequence[str]) -> list[str]:
    """Add each of `entries` (workspace-relative directories) that `info/exclude` lacks, and
    return the ones added; nothing when the workspace is no git repository."""
    common = git_common_dir(workspace)
    if common is None:
        return []
    path = common / "info" / "exclude"
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError):
        return []  # an unreadable exclude file is the user's to fix; the archive goes on
    lines = text.splitlines()
    missing = [e for e in entries if not _excluded(lines, e)]
    if not missing:
        return []
    block = "" if not text or text.endswith("\n") else "\n"
    if MARK not in lines:
        block += MARK + "\n"
    block += "".join(f"/{e.strip('/')}/\n" for e in missing)
    # Not the store's write_atomic: this file is git's, outside the store and its writer lock.
    tmp = path.with_name(f".exclude.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text + block, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        return []
    return missing
