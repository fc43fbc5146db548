"""Remotes are one core value, and providers declare the schemes they own (fsspec's registry is
the model): the app's table of provider packages and its projectKey namespaces agree with what
the installed providers declare, and the core names no scheme of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import dsh_chapters_core
import pytest
from dsh_chapters.plugins import KEY_NAMESPACES, PROVIDER_PACKAGES, load_provider_factories
from dsh_chapters.present import error_text
from dsh_chapters.services.pool import check_token_rules, normalize_remote
from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.ports.transport import ProviderFactory
from dsh_chapters_core.projectkey import derive_project_key
from dsh_chapters_core.remote import parse_remote
from dsh_chapters_core.sync.run import select_provider

CORE = Path(dsh_chapters_core.__file__).parent


def test_the_installed_providers_declare_what_the_package_table_says() -> None:
    installed = {f.name: f for f in load_provider_factories()}
    assert {"git", "treedx"} <= set(installed)
    for name, schemes, _package in PROVIDER_PACKAGES:
        if name in installed:
            assert isinstance(installed[name], ProviderFactory)
            assert tuple(installed[name].schemes) == schemes, name
    compound = {s.split("+", 1)[0] for f in installed.values() for s in f.schemes if "+" in s}
    assert compound <= KEY_NAMESPACES == frozenset({"treedx"})


@pytest.mark.parametrize(("remote", "provider"), [
    ("/srv/pools/widgets.git", "git"),
    ("file:///srv/pools/widgets.git", "git"),
    ("https://git.example.com/acme/k.git", "git"),
    ("http://127.0.0.1:8080/k.git", "git"),
    ("treedx+https://tree.example.com/widgets", "treedx"),
    ("treedx+http://127.0.0.1:4000/widgets", "treedx"),
])
def test_each_remote_resolves_to_the_provider_declaring_its_scheme(remote: str,
                                                                   provider: str) -> None:
    factories = load_provider_factories()
    chosen = select_provider(factories, remote, "auto")
    assert chosen.name == provider and parse_remote(remote).scheme in chosen.schemes


def test_a_scheme_nobody_declares_is_refused_with_the_cli_next_step() -> None:
    with pytest.raises(UsageError) as refused:
        select_provider(load_provider_factories(), "ssh://git@example.com/k.git", "auto")
    assert error_text(refused.value).endswith(
        "next: use a local path, an https:// URL or treedx+<url>/<repo>")


def test_the_app_derives_a_treedx_key_in_its_namespace() -> None:
    identity = derive_project_key(remote="treedx+https://h.example/widgets",
                                  namespaces=KEY_NAMESPACES)
    assert (identity.canonical, identity.derivation) == ("treedx/h.example/widgets", "treedx")


def test_local_and_network_remotes_follow_the_one_value(tmp_path: Path) -> None:
    assert parse_remote("folder+~/Sync/pool").is_local and parse_remote("/srv/p").is_local
    assert not parse_remote("treedx+https://h/r").is_local
    assert normalize_remote("file:///srv/p", tmp_path) == "/srv/p"
    assert normalize_remote("pool", tmp_path) == str((tmp_path / "pool").resolve())
    with pytest.raises(UsageError, match="clear text"):
        check_token_rules("treedx+http://tree.example.com/w", "tok")
    with pytest.raises(UsageError, match="carries credentials"):
        check_token_rules("https://me:tok@h.example/p.git", None)
    check_token_rules("treedx+http://127.0.0.1:4000/w", "tok")  # loopback may be http


def test_the_core_names_no_provider_scheme_in_its_code() -> None:
    """Comments and docstrings may give a provider as an example; no string the code uses
    may name one (the settings table, §12, is the one exception, and says so)."""
    found = []
    for path in sorted(CORE.rglob("*.py")):
        if path.name == "config.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr)}
        found += [f"{path.name}:{n.lineno}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and id(n) not in docs and any(
                      name in n.value.lower() for name in ("treedx", "folder+", "git+"))]
    assert found == []
