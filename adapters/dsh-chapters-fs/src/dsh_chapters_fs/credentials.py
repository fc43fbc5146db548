"""Tokens under `<DSH_HOME>/dsh-chapters/credentials/<name>` (§2.1, §11.1).

Files are 0600 in 0700 directories, outside the project tree: the workspace is the agent's
reading room. Nothing here ever formats a secret into a message or a log line.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from dsh_chapters_core.errors import ChaptersError

from dsh_chapters_fs.atomic import fsync_dir, write_atomic

FILE_MODE = 0o600
DIR_MODE = 0o700
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class FileCredentialStore:
    """Satisfies ports.store.CredentialStore."""

    def __init__(self, dsh_home: str | os.PathLike[str]) -> None:
        self.root = Path(dsh_home) / "dsh-chapters" / "credentials"

    def _path(self, name: str) -> Path:
        if not _NAME.match(name):
            raise ChaptersError(
                f"credential name {name!r} is not a plain file name (letters, digits, . _ -)",
                hint="use the projectKey as the credential name",
            )
        return self.root / name

    def _ensure_root(self) -> None:
        os.makedirs(self.root, mode=DIR_MODE, exist_ok=True)
        for directory in (self.root.parent, self.root):
            os.chmod(directory, DIR_MODE)  # makedirs' mode passes through the umask

    def read(self, name: str) -> str | None:
        path = self._path(name)
        try:
            info = path.stat()
        except FileNotFoundError:
            return None
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            # ssh's rule: a secret others can read is refused, not silently used.
            mode = stat.S_IMODE(info.st_mode)
            raise ChaptersError(
                f"credential file {path} has mode {mode:04o}; it must be 0600",
                hint=f"run `chmod 600 {path}`",
            )
        return path.read_text(encoding="utf-8").rstrip("\n")

    def write(self, name: str, secret: str) -> None:
        path = self._path(name)
        self._ensure_root()
        write_atomic(path, (secret + "\n").encode("utf-8"), mode=FILE_MODE)

    def delete(self, name: str) -> None:
        path = self._path(name)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        fsync_dir(path.parent)
