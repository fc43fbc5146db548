"""`chapters install dsh`: one dsh-mcp-client row in $DSH_HOME/cordis.patch.yml, removed exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_harness.dsh_install import MCP_CLIENT, DshInstaller, load_patch

# A user layer as DSH's own examples write them (examples/mcp-memory/*.cordis.yml): comments,
# single quotes, a !!js tag, in the user's own layout; install must give these bytes back.
USER_PATCH = """\
# my DSH preferences
- insert:
    - id: memory-engram
      name: '@deepseek-ai/dsh-mcp-client'
      config:
        serverName: engram
        transport: stdio
        command: engram
        args: [mcp]
        cwd: !!js process.cwd()
"""


def installer(tmp_path: Path, workspace: str = "/work/acme api") -> DshInstaller:
    return DshInstaller(command=("/opt/venv/bin/chapters",),
                        ledger_path=tmp_path / "state" / "installs.json",
                        workspace=Path(workspace), chapters_home=tmp_path / "state")


def rows(path: Path) -> list[dict[str, object]]:
    return [row for op in load_patch(path.read_text()) for row in op["insert"]]


def test_install_twice_adds_one_row_and_uninstall_restores_the_bytes(tmp_path: Path) -> None:
    home = tmp_path / "dsh"
    home.mkdir()
    patch = home / "cordis.patch.yml"
    patch.write_text(USER_PATCH)
    original = patch.read_bytes()
    inst = installer(tmp_path)

    (first,) = inst.install(home)
    assert first.action == "updated"
    ours = rows(patch)[-1]
    assert [r["id"] for r in rows(patch)] == ["memory-engram", "dsh-chapters"]
    assert ours == {"id": "dsh-chapters", "name": MCP_CLIENT, "config": {
        "serverName": "dsh-chapters", "transport": "stdio", "command": "/opt/venv/bin/chapters",
        "args": ["-C", "/work/acme api", "mcp"], "env": {"DSH_HOME": str(tmp_path / "state")}}}
    after_first = patch.read_bytes()

    (second,) = inst.install(home)
    assert second.action == "unchanged" and patch.read_bytes() == after_first
    assert len(rows(patch)) == 2

    (removed,) = inst.uninstall(home)
    assert removed.action == "restored"
    assert patch.read_bytes() == original
    assert not (tmp_path / "state" / "installs.json").exists()


def test_install_into_no_file_creates_it_and_uninstall_removes_it_and_its_dirs(
    tmp_path: Path,
) -> None:
    home = tmp_path / "fresh" / ".dsh"
    inst = installer(tmp_path)
    (made,) = inst.install(home)
    assert made.action == "created" and len(rows(home / "cordis.patch.yml")) == 1
    (gone,) = inst.uninstall(home)
    assert gone.action == "removed"
    assert not home.exists() and (tmp_path / "fresh").exists() is False


def test_a_row_of_our_name_we_did_not_write_is_a_refusal(tmp_path: Path) -> None:
    home = tmp_path / "dsh"
    home.mkdir()
    patch = home / "cordis.patch.yml"
    installer(tmp_path, "/other/project").install(home)  # another project's row
    before = patch.read_bytes()
    with pytest.raises(ChaptersError, match="did not write") as caught:
        installer(tmp_path, "/work/acme").install(home)
    assert caught.value.hint and patch.read_bytes() == before


@pytest.mark.parametrize("text", ["- insert: [\n", "id: not-a-list\n"])
def test_a_patch_file_that_is_not_a_list_of_operations_is_left_alone(
    tmp_path: Path, text: str,
) -> None:
    home = tmp_path / "dsh"
    home.mkdir()
    (home / "cordis.patch.yml").write_text(text)
    with pytest.raises(ChaptersError, match="nothing was changed"):
        installer(tmp_path).install(home)
    assert (home / "cordis.patch.yml").read_text() == text


def test_uninstall_without_install_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "dsh"
    home.mkdir()
    (home / "cordis.patch.yml").write_text(USER_PATCH)
    (unchanged,) = installer(tmp_path).uninstall(home)
    assert unchanged.action == "unchanged"
    assert (home / "cordis.patch.yml").read_text() == USER_PATCH
