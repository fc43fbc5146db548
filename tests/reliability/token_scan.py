"""Looks for a live token wherever a networked run could have left it (§1, §2.1: a token is
never echoed into a chapter, log, error message, notice, mirror or test output).

A token counts as found in any of the forms a careless code path would write it: as it is,
URL-encoded, or base64 (standard and URL-safe alphabets) at any alignment, which covers an
HTTP Basic header (`base64(user:token)`) copied anywhere. Git objects are read decompressed,
loose and packed alike, through the real `git cat-file --batch-all-objects`, so a token
committed into a mirror or a pool is found even though its bytes on disk are zlib streams.
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

GIT_TIMEOUT_S = 120


def _base64_cores(raw: bytes) -> set[bytes]:
    """The base64 text that encodes `raw` whatever precedes it in the encoded stream: for each
    of the three alignments, the characters that depend on `raw`'s bytes alone."""
    cores: set[bytes] = set()
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * pad + raw)
            start = 4 if pad else 0  # the first group mixes the prefix with the token
            whole = (pad + len(raw)) // 3 * 4  # groups made only of real bytes
            core = text[start:whole]
            if len(core) >= 12:
                cores.add(core)
    return cores


def token_forms(token: str) -> tuple[bytes, ...]:
    """Every byte string whose presence proves `token` leaked."""
    raw = token.encode("utf-8")
    forms = {raw, urllib.parse.quote(token, safe="").encode(),
             urllib.parse.quote_plus(token).encode()}
    forms |= _base64_cores(raw)
    return tuple(sorted(forms))


@dataclass
class Finding:
    where: str
    form: bytes


@dataclass
class Scan:
    """What was scanned, and where a token was found."""

    tokens: tuple[str, ...]
    files: int = 0
    git_objects: int = 0
    texts: int = 0
    findings: list[Finding] = field(default_factory=list)
    _forms: tuple[tuple[str, tuple[bytes, ...]], ...] = ()

    def __post_init__(self) -> None:
        self._forms = tuple((t, token_forms(t)) for t in self.tokens)

    def _check(self, where: str, data: bytes) -> None:
        for _, forms in self._forms:
            for form in forms:
                if form in data:
                    self.findings.append(Finding(where, form))

    def text(self, where: str, value: str | bytes) -> None:
        """One captured output (a command's stdout or stderr, a server log line)."""
        self.texts += 1
        self._check(where, value.encode("utf-8") if isinstance(value, str) else value)

    def tree(self, root: Path, exclude: Iterable[Path] = ()) -> None:
        """Every regular file under `root` as it is on disk, except the `exclude`d paths."""
        skipped = {Path(p).resolve() for p in exclude}
        if not root.exists():
            return
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.resolve() in skipped:
                    continue
                mode = path.lstat().st_mode
                if not stat.S_ISREG(mode):
                    continue
                self.files += 1
                self._check(str(path), path.read_bytes())

    def git_objects_of(self, git_dir: Path) -> None:
        """Every object of a repository, decompressed (loose and packed)."""
        listed = _cat_file(git_dir, "--batch-check")
        self.git_objects += len(listed.splitlines())
        self._check(f"{git_dir} (objects, decompressed)", _cat_file(git_dir, "--batch"))

    def mapping(self, where: str, files: Mapping[str, bytes]) -> None:
        """A pool held in memory (the TreeDX fake's tree): every path and every file."""
        for path, data in files.items():
            self.files += 1
            self._check(f"{where}:{path}", path.encode("utf-8") + b"\n" + data)

    def leaks(self) -> list[str]:
        return [f"{f.where}: {f.form[:12]!r}…" for f in self.findings]


def _cat_file(git_dir: Path, batch: str) -> bytes:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch-all-objects", batch,
         "--unordered"],
        capture_output=True, timeout=GIT_TIMEOUT_S, check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(git_dir), "GIT_CONFIG_NOSYSTEM": "1"},
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return done.stdout


def credential_file(home: Path, project_key: str) -> Path:
    """§2.1: `<DSH_HOME>/dsh-chapters/credentials/<projectKey>`."""
    return home / "dsh-chapters" / "credentials" / project_key


def assert_credential_file(home: Path, project_key: str, token: str) -> Path:
    """The one place the token may be: a 0600 file under DSH_HOME holding exactly it."""
    path = credential_file(home, project_key)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    assert path.read_text(encoding="utf-8").strip() == token
    return path
