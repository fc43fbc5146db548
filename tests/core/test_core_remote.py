"""A remote is one core value (§2.1): its scheme, URL, host and path, parsed once; the core
names no provider's scheme, and providers are chosen by the schemes they declare."""

from __future__ import annotations

import pytest
from dsh_chapters_core.errors import NextStep, UsageError
from dsh_chapters_core.remote import Remote, is_loopback_host, parse_remote
from dsh_chapters_core.sync.run import select_provider
from dsh_chapters_core.testing.fakes_transport import FakeProviderFactory


@pytest.mark.parametrize(
    ("text", "scheme", "url", "host", "path", "local"),
    [
        ("/srv/pool.git", "file", "", "", "/srv/pool.git", True),
        ("~/pool", "file", "", "", "~/pool", True),
        ("./pool", "file", "", "", "./pool", True),
        ("..", "file", "", "", "..", True),
        ("file:///srv/my%20pool", "file", "", "", "/srv/my pool", True),
        ("https://Git.Example.com:8443/org/pool.git", "https", "https://Git.Example.com:8443/org/pool.git",
         "git.example.com", "/org/pool.git", False),
        ("treedx+https://tree.example/widgets", "treedx+https", "https://tree.example/widgets",
         "tree.example", "/widgets", False),
        ("acme+http://[::1]:9/p", "acme+http", "http://[::1]:9/p", "::1", "/p", False),
        ("folder+~/Sync/pool", "folder", "", "", "~/Sync/pool", True),
        ("fake:pool-a", "fake", "", "", "pool-a", False),
        ("pool", "", "", "", "", False),
        ("git@github.com:org/repo", "", "", "", "", False),
        ("c:\\pools\\a", "", "", "", "", False),
        ("", "", "", "", "", False),
    ],
)
def test_one_value_per_remote(text: str, scheme: str, url: str, host: str, path: str,
                              local: bool) -> None:
    remote = parse_remote(text)
    assert (remote.scheme, remote.url, remote.host, remote.path, remote.is_local) == (
        scheme, url, host, path, local)
    assert remote.text == text.strip()


def test_credentials_in_a_url_are_noticed_and_the_inner_scheme_is_kept() -> None:
    remote = parse_remote("treedx+http://me:tok@127.0.0.1:4000/pool")
    assert remote.has_credentials and remote.url_scheme == "http" and remote.is_loopback
    assert not parse_remote("https://h/p").has_credentials
    assert parse_remote("/srv/p").url_scheme == ""


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.9.9.9", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True), ("10.0.0.1", False), ("example.com", False),
    ("", False),
])
def test_the_loopback_check(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_a_provider_is_chosen_by_the_schemes_it_declares() -> None:
    git = FakeProviderFactory("git", "/", schemes=("file", "http", "https"))
    acme = FakeProviderFactory("acme", "acme+", schemes=("acme+https",))
    assert select_provider((git, acme), "acme+https://h/r", "auto") is acme
    assert select_provider((git, acme), "/srv/p", "auto") is git
    # A scheme is owned by its declaration, not by a prefix that happens to match.
    assert Remote("x", "x").scheme not in git.schemes + acme.schemes
    with pytest.raises(UsageError, match="no installed provider takes") as info:
        select_provider((git,), "acme+https://h/r", "auto")
    assert info.value.step is NextStep.USE_PROVIDER_SCHEME
    assert info.value.data == {"schemes": "file, http, https"}


def test_a_fake_factory_declares_the_scheme_of_its_prefix() -> None:
    assert FakeProviderFactory().schemes == ("fake",)
    assert FakeProviderFactory("git", "/").schemes == ("file",)
    assert FakeProviderFactory("t", "treedx+").schemes == ("treedx+https",)
