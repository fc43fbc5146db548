"""`chapters install|uninstall dsh`: the dsh-mcp-client row lands in $DSH_HOME/cordis.patch.yml,
twice is once, and uninstall gives the file its bytes back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dsh_chapters.cli import main
from dsh_chapters_harness.dsh_install import load_patch

USER_PATCH = "# mine\n- insert:\n    - id: notes\n      name: '@acme/notes'\n"


@pytest.fixture
def dsh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "dsh-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "laptop")
    return home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "acme-api"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/acme/api.git\n', encoding="utf-8")
    return root


def run(capsys: pytest.CaptureFixture[str], workspace: Path, *args: str) -> dict[str, object]:
    capsys.readouterr()
    assert main(["-C", str(workspace), *args, "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_install_dsh_twice_then_uninstall(dsh_home: Path, workspace: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    patch = dsh_home / "cordis.patch.yml"
    patch.write_text(USER_PATCH, encoding="utf-8")
    first = run(capsys, workspace, "install", "dsh")
    assert first["changed"] == 1 and first["scope"] == "user"
    ops = load_patch(patch.read_text(encoding="utf-8"))
    (ours,) = [row for op in ops for row in op["insert"] if row["id"] == "dsh-chapters"]
    args = ours["config"]["args"]
    assert args[-3:] == ["-C", str(workspace), "mcp"]
    assert ours["config"]["env"] == {"DSH_HOME": str(dsh_home)}
    once = patch.read_bytes()
    assert run(capsys, workspace, "install", "dsh")["changed"] == 0
    assert patch.read_bytes() == once
    assert run(capsys, workspace, "uninstall", "dsh")["changed"] == 1
    assert patch.read_text(encoding="utf-8") == USER_PATCH


def test_install_dsh_refuses_a_scope(dsh_home: Path, workspace: Path) -> None:
    assert main(["-C", str(workspace), "install", "dsh", "--scope", "project"]) != 0
    assert not (dsh_home / "cordis.patch.yml").exists()
