"""projectKey (§2.3): canonical form, fallbacks, and the issue's test vectors."""

from __future__ import annotations

import uuid

import pytest
from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.projectkey import (
    ProjectIdentity,
    canonicalize_remote,
    derive_project_key,
    project_slug,
    remote_namespace,
)
from dsh_chapters_core.remote import key_namespace
from hypothesis import given, settings
from hypothesis import strategies as st

# The key namespace the TreeDX provider declares (§2.3 as amended 2026-09-21); the app passes
# `dsh_chapters.plugins.KEY_NAMESPACES`, which tests/app/test_app_remotes.py checks equals it.
NAMESPACES = ("treedx",)
SAME_PROJECT = (
    "https://GitHub.com/Org/Repo.git",
    "git@github.com:org/repo",
    "ssh://git@github.com/org/repo.git/",
    "https://user:tok@github.com/org/repo",
)


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("https://GitHub.com/Org/Repo.git", "github.com/org/repo"),
        ("git@github.com:org/repo", "github.com/org/repo"),
        ("ssh://git@github.com/org/repo.git/", "github.com/org/repo"),
        ("https://user:tok@github.com/org/repo", "github.com/org/repo"),
        ("http://github.com/org/repo/", "github.com/org/repo"),
        ("git://github.com/org/repo.git", "github.com/org/repo"),
        ("gitlab.com/org/repo", "gitlab.com/org/repo"),
        ("https://git.example.com:8443/team/app.git", "git.example.com:8443/team/app"),
        ("ssh://git@host.example:2222/org/repo.git", "host.example:2222/org/repo"),
        ("https://x-access-token:ghp_abcdef@github.com/org/repo.git", "github.com/org/repo"),
        ("  https://github.com/org/repo.git//  ", "github.com/org/repo"),
        ("treedx+https://TreeDX.local:8080/Corpus", "treedx/treedx.local:8080/corpus"),
        ("treedx+http://user:secret@127.0.0.1:9000/pool/", "treedx/127.0.0.1:9000/pool"),
        ("/srv/pools/knowledge.git", "/srv/pools/knowledge"),
        ("file:///srv/pools/knowledge.git", "/srv/pools/knowledge"),
    ],
)
def test_canonical_form(url: str, canonical: str) -> None:
    # The key namespaces are the providers' declaration (the app's KEY_NAMESPACES).
    assert canonicalize_remote(url, namespaces=NAMESPACES) == canonical


def test_issue_vectors_give_one_key_and_gitlab_another() -> None:
    keys = {derive_project_key(remote=url).project_key for url in SAME_PROJECT}
    assert len(keys) == 1
    (key,) = keys
    assert key == str(uuid.uuid5(uuid.NAMESPACE_OID, "github.com/org/repo"))
    assert derive_project_key(remote="gitlab.com/org/repo").project_key != key


def test_treedx_remote_is_its_own_namespace() -> None:
    git = derive_project_key(remote="https://host.example/repo", namespaces=NAMESPACES)
    treedx = derive_project_key(remote="treedx+https://host.example/repo",
                                namespaces=NAMESPACES)
    assert treedx.derivation == "treedx"
    assert git.derivation == "remote"
    assert treedx.canonical == "treedx/host.example/repo"
    assert treedx.project_key != git.project_key


def test_only_a_declared_namespace_is_kept_so_git_plus_ssh_stays_git() -> None:
    """The core knows no scheme: `treedx/` comes from the caller's declaration, and an
    undeclared compound scheme (`git+ssh://`, which git accepts) canonicalizes as plain git."""
    plain = derive_project_key(remote="ssh://git@github.com/org/repo.git")
    assert derive_project_key(remote="git+ssh://git@github.com/org/repo.git",
                              namespaces=NAMESPACES) == plain
    assert canonicalize_remote("treedx+https://h/r") == "h/r"  # nobody declared `treedx`
    other = derive_project_key(remote="acme+https://h/r", namespaces=("acme",))
    assert (other.canonical, other.derivation) == ("acme/h/r", "acme")


def test_override_wins_over_remote_and_path() -> None:
    key = "1C3F0000-0000-5000-8000-000000000001"
    got = derive_project_key(remote="github.com/org/repo", path="/w", override=key)
    assert got == ProjectIdentity(project_key=key.lower(), canonical=key, derivation="override")
    named = derive_project_key(remote="github.com/org/repo", override="monorepo/sub")
    assert named.derivation == "override"
    assert named.project_key == str(uuid.uuid5(uuid.NAMESPACE_OID, "monorepo/sub"))


def test_no_remote_is_path_derived() -> None:
    got = derive_project_key(remote=None, path="/home/adrian/Projects/repo/")
    assert got.derivation == "path-derived"
    assert got.canonical == "/home/adrian/Projects/repo"
    assert got.project_key == str(uuid.uuid5(uuid.NAMESPACE_OID, "/home/adrian/Projects/repo"))
    assert derive_project_key(remote="  ", path="/w").derivation == "path-derived"


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"path": "relative/dir"}, {"remote": "", "path": ""}],
)
def test_nothing_to_derive_from_is_usage_error(kwargs: dict[str, str]) -> None:
    with pytest.raises(UsageError):
        derive_project_key(**kwargs)


@pytest.mark.parametrize("url", ["", "   ", "https://", "ssh://git@/"])
def test_empty_remote_is_usage_error(url: str) -> None:
    with pytest.raises(UsageError):
        canonicalize_remote(url)


@pytest.mark.parametrize(
    ("identity", "slug"),
    [
        (derive_project_key(remote="git@github.com:org/my-repo.git"), "my-repo"),
        (derive_project_key(path="/home/a/Projects/notes"), "notes"),
        (derive_project_key(remote="treedx+https://h:1/corpus", namespaces=NAMESPACES),
         "corpus"),
    ],
)
def test_project_slug(identity: ProjectIdentity, slug: str) -> None:
    assert project_slug(identity) == slug


_segment = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)


@given(host=_segment, org=_segment, repo=_segment, user=_segment, token=_segment)
def test_every_spelling_of_a_remote_gives_one_key(
    host: str, org: str, repo: str, user: str, token: str
) -> None:
    host = f"{host}.example"
    spellings = [
        f"https://{host}/{org}/{repo}.git",
        f"HTTPS://{host.upper()}/{org}/{repo}/",
        f"git@{host}:{org}/{repo}.git",
        f"ssh://git@{host}/{org}/{repo}.git/",
        f"https://{user}:{token}@{host}/{org}/{repo}",
    ]
    canonicals = {canonicalize_remote(s) for s in spellings}
    assert len(canonicals) == 1
    assert canonicals == {canonicalize_remote(f"{host}/{org}/{repo}")}


@given(token=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=12, max_size=40))
def test_credentials_never_reach_the_canonical_form(token: str) -> None:
    canonical = canonicalize_remote(f"https://oauth2:{token}@gitlab.example/org/repo.git")
    assert canonical == "gitlab.example/org/repo"
    assert token.lower() not in canonical


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(["", " ", "\t"]),
       st.sampled_from(["treedx+https", "git+ssh", "https", "TreeDX+HTTP", "x+y", "+a", "9+a",
                        "tree dx+https", "treedx", "a.b-c+d"]),
       st.sampled_from(["://", ":", ":/", "", "+://"]),
       st.text(alphabet="treedx+gith:/.-@ 0A", max_size=12),
       st.sampled_from([(), ("treedx",), ("treedx", "git"), ("x", "a.b-c")]))
def test_a_plain_remote_names_no_namespace_without_the_remote_grammar(
        pad: str, scheme: str, joint: str, rest: str, namespaces: tuple[str, ...]) -> None:
    url = f"{pad}{scheme}{joint}{rest}"
    assert remote_namespace(url, namespaces) == key_namespace(url, frozenset(namespaces))
    lowered = url.lower()
    assert remote_namespace(lowered, namespaces) == key_namespace(lowered, frozenset(namespaces))
