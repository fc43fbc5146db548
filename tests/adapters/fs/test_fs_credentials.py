"""Credentials: 0600 files in 0700 directories under DSH_HOME, never echoed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.ports.store import CredentialStore
from dsh_chapters_fs.credentials import FileCredentialStore

TOKEN = "ghp_" + "Zq7RkW2mXo9TfB4nLc8VyD1sHa6JpE3uGi5K"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_write_read_delete_with_tight_modes(tmp_path: Path) -> None:
    creds: CredentialStore = FileCredentialStore(tmp_path / "home")
    assert creds.read("pk-1") is None
    creds.write("pk-1", TOKEN)
    path = tmp_path / "home" / "dsh-chapters" / "credentials" / "pk-1"
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700 and _mode(path.parent.parent) == 0o700
    assert creds.read("pk-1") == TOKEN
    creds.write("pk-1", TOKEN + "x")  # replaced atomically, still 0600
    assert creds.read("pk-1") == TOKEN + "x" and _mode(path) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["pk-1"]  # no temp file left
    creds.delete("pk-1")
    creds.delete("pk-1")
    assert creds.read("pk-1") is None


def test_a_loose_mode_is_refused_without_echoing_the_token(tmp_path: Path) -> None:
    creds = FileCredentialStore(tmp_path)
    creds.write("pk-1", TOKEN)
    path = tmp_path / "dsh-chapters" / "credentials" / "pk-1"
    path.chmod(0o644)
    with pytest.raises(ChaptersError) as refused:
        creds.read("pk-1")
    assert "0644" in str(refused.value) and "chmod 600" in str(refused.value)
    assert TOKEN not in str(refused.value)


def test_names_cannot_leave_the_credentials_dir(tmp_path: Path) -> None:
    creds = FileCredentialStore(tmp_path)
    for bad in ("../escape", "a/b", "", ".hidden"):
        with pytest.raises(ChaptersError, match="not a plain file name"):
            creds.write(bad, TOKEN)
