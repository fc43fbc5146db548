"""Pick-and-mix installs: a remote or a reader whose package is absent names the package to
install (`pip install dsh-chapters-git`), through the composition root and the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dsh_chapters.bootstrap import bootstrap, open_model_door
from dsh_chapters.plugins import load_provider_factories, missing_provider_error
from dsh_chapters.services.pool import choose_factory, normalize_remote
from dsh_chapters_core.enrich.queue import ModelRoute
from dsh_chapters_core.errors import ChaptersError, UsageError

from tests.app.test_app_pool_cli import machine


@pytest.mark.parametrize(
    ("remote", "package"),
    [
        ("/srv/pools/widgets.git", "dsh-chapters-git"),
        ("https://git.example.com/acme/k.git", "dsh-chapters-git"),
        ("treedx+https://treedx.example.com/acme/k", "dsh-chapters-treedx"),
        ("folder+/srv/sync/widgets", "dsh-chapters-folder"),
    ],
)
def test_a_remote_whose_provider_is_absent_names_its_package(
    tmp_path: Path, remote: str, package: str
) -> None:
    ws = machine(tmp_path, "box-a")
    app = bootstrap(ws.workspace, ws.env, provider_factories=())
    with pytest.raises(UsageError) as refused:
        choose_factory(app, remote)
    assert refused.value.hint == f"pip install {package}"
    assert package in refused.value.message and "0 found" in refused.value.message


def test_an_installed_provider_is_chosen_and_an_unknown_scheme_keeps_its_refusal() -> None:
    installed = load_provider_factories()
    assert missing_provider_error("/srv/pools/widgets.git", installed) is None
    assert missing_provider_error("ftp://example.com/k.git", ()) is None


def test_link_through_the_cli_names_the_folder_package(tmp_path: Path) -> None:
    box = machine(tmp_path, "box-a")
    refused = box.run("link", f"folder+{tmp_path / 'Sync' / 'pool'}")
    assert refused.code == 2
    assert "dsh-chapters-folder" in refused.err and "pip install dsh-chapters-folder" in refused.err


def test_import_of_an_absent_reader_names_its_package(tmp_path: Path) -> None:
    box = machine(tmp_path, "box-a")
    refused = box.run("import", "specstory")
    assert refused.code == 2 and "no such reader" in refused.err
    assert "pip install dsh-chapters-specstory" in refused.err


def test_a_schemed_path_remote_keeps_its_scheme_and_becomes_absolute(tmp_path: Path) -> None:
    assert normalize_remote("folder+./pool", tmp_path) == f"folder+{(tmp_path / 'pool')}"
    assert normalize_remote("folder+/srv/x", tmp_path) == "folder+/srv/x"
    assert normalize_remote("treedx+https://h/r", tmp_path) == "treedx+https://h/r"


def test_the_model_door_without_httpx_names_the_enrich_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = machine(tmp_path, "box-a")
    app = bootstrap(box.workspace, box.env)
    monkeypatch.setitem(sys.modules, "httpx", None)  # a pick-and-mix install without the extra
    with pytest.raises(ChaptersError) as refused:
        open_model_door(app, ModelRoute("ollama/qwen3", "http://127.0.0.1:9/v1"))
    assert "httpx" in refused.value.message and "0 found" in refused.value.message
    assert refused.value.hint == "pip install 'dsh-chapters[enrich]'"
