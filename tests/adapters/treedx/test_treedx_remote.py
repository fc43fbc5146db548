"""The `treedx+http(s)://host[:port]/<repo>` scheme, and the `treedx` entry point."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
from dsh_chapters_core.ports.transport import ProviderFactory
from dsh_chapters_core.projectkey import derive_project_key
from dsh_chapters_treedx.provider import TreeDXProviderFactory
from dsh_chapters_treedx.remote import parse_remote


@pytest.mark.parametrize(
    ("remote", "base_url", "repository"),
    [
        ("treedx+https://tdx.example.com/pool", "https://tdx.example.com", "pool"),
        ("treedx+http://127.0.0.1:4000/pool", "http://127.0.0.1:4000", "pool"),
        ("TREEDX+HTTPS://TDX.example.com:8443/Team-Pool/", "https://tdx.example.com:8443",
         "team-pool"),
        ("treedx+https://host/prefix/api/pool", "https://host/prefix/api", "pool"),
        ("treedx+http://[::1]:4000/pool", "http://[::1]:4000", "pool"),
    ],
)
def test_treedx_remotes_parse(remote: str, base_url: str, repository: str) -> None:
    parsed = parse_remote(remote)
    assert parsed is not None
    assert (parsed.base_url, parsed.repository) == (base_url, repository)
    assert TreeDXProviderFactory.matches(remote)


@pytest.mark.parametrize(
    "remote",
    ["https://github.com/org/repo.git", "/srv/pools/team", "treedx+ftp://host/pool",
     "treedx+https://host", "treedx+https://host/", "treedx://host/pool", "",
     "treedx+https://host/pool?x=1"],
)
def test_other_remotes_are_not_treedx(remote: str) -> None:
    assert parse_remote(remote) is None
    assert not TreeDXProviderFactory.matches(remote)


def test_credentials_in_the_url_are_noticed_and_left_out_of_the_origin() -> None:
    parsed = parse_remote("treedx+https://me:tok@host/pool")
    assert parsed is not None and parsed.has_userinfo
    assert "tok" not in parsed.origin


def test_the_entry_point_is_a_provider_factory() -> None:
    (entry,) = [e for e in entry_points(group="dsh_chapters.providers") if e.name == "treedx"]
    loaded = entry.load()
    assert loaded is TreeDXProviderFactory
    factory = loaded()
    assert isinstance(factory, ProviderFactory)
    assert factory.name == "treedx"
    assert factory.matches("treedx+https://host/pool")


def test_the_project_key_never_collides_with_a_git_pool_at_the_same_url() -> None:
    # The namespace is the provider's declaration: its compound schemes' `treedx+`.
    namespaces = {s.split("+", 1)[0] for s in TreeDXProviderFactory.schemes}
    treedx = derive_project_key(remote="treedx+https://host.example/pool", namespaces=namespaces)
    git = derive_project_key(remote="https://host.example/pool", namespaces=namespaces)
    assert treedx.canonical == "treedx/host.example/pool"
    assert treedx.project_key != git.project_key
