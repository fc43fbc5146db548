"""The git provider over smart-HTTP: `git http-backend` behind a token check on loopback."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.config import Config
from dsh_chapters_core.errors import FailureCode, TransportError

from tests.adapters.git.conftest import GitCli, GitHttpServer, MakeMachine, files_under, grep_tree

pytestmark = pytest.mark.slow

RELINK = "run `chapters link <url> < token-file` (or with DSH_CHAPTERS_TOKEN set)"


def publish(provider: object, files: dict[str, bytes], who: str) -> str:
    provider.stage(files)  # type: ignore[attr-defined]
    sha = provider.commit(f"publish {len(files)}", who)  # type: ignore[attr-defined]
    assert sha
    assert provider.push().pushed  # type: ignore[attr-defined]
    return str(sha)


def code_of(action: object) -> TransportError:
    with pytest.raises(TransportError) as caught:
        action()  # type: ignore[operator]
    return caught.value


def test_round_trip_with_a_token_checked_by_the_git_cli(
    http_server: GitHttpServer, machines: MakeMachine, git: GitCli, pool_token: str, tmp_path: Path
) -> None:
    repo = http_server.create_repo("pool.git", git)
    url = http_server.url("pool.git")
    a = machines("mach-a", url, token=pool_token)
    b = machines("mach-b", url, token=pool_token)
    pa, pb = a.provider(), b.provider()
    assert pa.open().cloned
    first = {"project.yml": b"projectKey: pk-test\n", "chapters/pk-test/s-a/001-a.md": b"a\n"}
    head = publish(pa, first, "mach-a")
    state = pb.open()
    assert state.head == head and files_under(b.mirror) == first
    second = {"chapters/pk-test/s-b/001-b.md": b"b\n"}
    publish(pb, second, "mach-b")
    pulled = pa.pull()
    assert pulled.changed_paths == ("chapters/pk-test/s-b/001-b.md",) and pulled.requests >= 1
    quiet = pa.pull()
    assert quiet.changed_paths == () and 1 <= quiet.requests <= 2

    git("-C", repo, "fsck", "--strict")
    assert git("-C", repo, "log", "--format=%an <%ae>", "main").splitlines() == [
        "mach-b <mach-b@dsh-chapters.invalid>",
        "mach-a <mach-a@dsh-chapters.invalid>",
    ]
    assert git("-C", repo, "rev-list", "--merges", "main") == ""
    clone = tmp_path / "cli-clone"
    git("clone", "--quiet", repo, clone)
    assert files_under(clone) == {**first, **second} == files_under(a.mirror)
    assert all(" 401 " not in line for line in http_server.log)


def test_a_wrong_token_is_auth_and_the_token_appears_nowhere(
    http_server: GitHttpServer,
    machines: MakeMachine,
    git: GitCli,
    pool_token: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    http_server.create_repo("pool.git", git)
    url = http_server.url("pool.git")
    good = machines("mach-good", url, token=pool_token)
    publish(good.provider(), {"x.md": b"x\n"}, "mach-good")
    wrong_token = "tok-wrong-" + pool_token[::-1]
    bad = machines("mach-bad", url, token=wrong_token)
    error = code_of(bad.provider().open)
    assert error.code is FailureCode.AUTH
    assert error.hint == RELINK
    assert "401" in error.message

    captured = capsys.readouterr()
    text = "\n".join(
        [
            str(error),
            repr(error),
            error.message,
            error.hint,
            "".join(traceback.format_exception(error)),
            captured.out,
            captured.err,
            caplog.text,
            *http_server.log,
        ]
    )
    for secret in (pool_token, wrong_token):
        assert secret not in text
        assert grep_tree(tmp_path / "machines", secret.encode()) == []
    config = (good.mirror / ".git" / "config").read_text()
    assert url in config and "@" not in config


def test_a_token_typed_into_the_url_is_never_stored(
    http_server: GitHttpServer, machines: MakeMachine, git: GitCli, pool_token: str
) -> None:
    http_server.create_repo("pool.git", git)
    url = http_server.url("pool.git").replace("http://", "http://someone:typed-secret@")
    m = machines("mach-a", url, token=pool_token)
    publish(m.provider(), {"x.md": b"x\n"}, "mach-a")
    assert grep_tree(m.workspace, b"typed-secret") == []


def test_a_network_host_without_a_token_is_auth_with_a_relink_hint(machines: MakeMachine) -> None:
    m = machines("mach-a", "https://pool.example.invalid/org/knowledge.git")
    error = code_of(m.provider().open)
    assert error.code is FailureCode.AUTH and error.hint == RELINK
    assert not m.mirror.exists()


def test_plain_http_to_a_network_host_is_refused(machines: MakeMachine) -> None:
    m = machines("mach-a", "http://pool.example.invalid/knowledge.git", token="tok-x")
    error = code_of(m.provider().open)
    assert error.code is FailureCode.REFUSED and "https" in error.hint


def test_loopback_pools_need_no_token(
    open_server: GitHttpServer, machines: MakeMachine, git: GitCli
) -> None:
    open_server.create_repo("pool.git", git)
    m = machines("mach-a", open_server.url("pool.git"))
    publish(m.provider(), {"x.md": b"x\n"}, "mach-a")
    assert git("-C", open_server.root / "pool.git", "log", "--format=%an", "main").split() == [
        "mach-a"
    ]


def test_a_server_that_is_down_is_network(machines: MakeMachine, refused_port: int) -> None:
    m = machines("mach-a", f"http://127.0.0.1:{refused_port}/pool.git")
    error = code_of(m.provider().open)
    assert error.code is FailureCode.NETWORK and "refused" in error.message
    assert not [p for p in m.workspace.iterdir()], "a failed clone left something behind"


def test_a_silent_server_is_timeout_within_the_budget(
    machines: MakeMachine, silent_port: int
) -> None:
    m = machines(
        "mach-a", f"http://127.0.0.1:{silent_port}/pool.git", config=Config(sync_timeout_ms=300)
    )
    started = time.monotonic()
    error = code_of(m.provider().open)
    assert error.code is FailureCode.TIMEOUT
    assert time.monotonic() - started < 5


def test_a_missing_repository_is_not_found(
    http_server: GitHttpServer, machines: MakeMachine, pool_token: str
) -> None:
    m = machines("mach-a", http_server.url("nothing-here.git"), token=pool_token)
    assert code_of(m.provider().open).code is FailureCode.NOT_FOUND


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (403, FailureCode.AUTH),
        (418, FailureCode.REFUSED),
        (500, FailureCode.NETWORK),
        (501, FailureCode.REFUSED),
        (503, FailureCode.NETWORK),
        (504, FailureCode.TIMEOUT),
    ],
)
def test_server_statuses_map_to_codes(
    http_server: GitHttpServer,
    machines: MakeMachine,
    pool_token: str,
    status: int,
    code: FailureCode,
) -> None:
    http_server.force_status = status
    m = machines("mach-a", http_server.url("pool.git"), token=pool_token)
    error = code_of(m.provider().open)
    assert error.code is code and str(status) in error.message


def _unpushed_commit(http_server: GitHttpServer, machines: MakeMachine, git: GitCli,
                     pool_token: str, text: str) -> tuple[Any, str]:
    """One machine on a fresh HTTP pool, with one commit staged and not yet pushed."""
    http_server.create_repo("pool.git", git)
    provider = machines("mach-a", http_server.url("pool.git"), token=pool_token).provider()
    provider.open()
    provider.stage({"unpushed.md": f"{text}\n".encode()})
    return provider, provider.commit("unpushed", "mach-a")


def test_an_answer_cut_short_is_a_network_failure_the_next_sync_retries(
    http_server: GitHttpServer, machines: MakeMachine, git: GitCli, pool_token: str
) -> None:
    """A body that simply ends (a proxy or a server dying mid-answer, its length agreeing)
    is the connection's failure, not a pool that is no git server: `chapters link` would not
    help, the next sync does."""
    provider, sha = _unpushed_commit(http_server, machines, git, pool_token,
                                     "written while the answers were cut")
    http_server.cut_bodies = True
    for action in (provider.pull, provider.push):
        error = code_of(action)
        assert error.code is FailureCode.NETWORK, error.message
        assert "ended before it was whole" in error.message and "next sync" in error.hint
    http_server.cut_bodies = False
    result = provider.push()
    assert result.pushed and result.head == sha


def test_a_server_outage_between_syncs_degrades_then_recovers(
    http_server: GitHttpServer, machines: MakeMachine, git: GitCli, pool_token: str
) -> None:
    provider, sha = _unpushed_commit(http_server, machines, git, pool_token,
                                     "written while the pool was down")
    http_server.force_status = 503
    assert code_of(provider.push).code is FailureCode.NETWORK
    http_server.force_status = None
    result = provider.push()
    assert result.pushed and result.head == sha


def test_concurrent_pushes_over_http_converge_after_rebuild(
    http_server: GitHttpServer, machines: MakeMachine, git: GitCli, pool_token: str
) -> None:
    repo = http_server.create_repo("pool.git", git)
    url = http_server.url("pool.git")
    a = machines("mach-a", url, token=pool_token)
    b = machines("mach-b", url, token=pool_token)
    providers = {"a": a.provider(), "b": b.provider()}
    files = {
        "a": {"chapters/pk-test/s-a/001.md": b"a\n"},
        "b": {"chapters/pk-test/s-b/001.md": b"b\n"},
    }
    for name, provider in providers.items():
        provider.open()
        provider.stage(files[name])
        provider.commit(name, f"mach-{name}")
    barrier = threading.Barrier(2)
    outcome: dict[str, object] = {}

    def push(name: str) -> None:
        barrier.wait(timeout=30)
        try:
            outcome[name] = providers[name].push().pushed
        except TransportError as exc:
            outcome[name] = exc.code

    threads = [threading.Thread(target=push, args=(n,)) for n in providers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(map(str, outcome.values())) == ["True", "diverged"]
    (loser,) = [n for n, v in outcome.items() if v is FailureCode.DIVERGED]
    providers[loser].rebuild()
    publish(providers[loser], files[loser], f"mach-{loser}")
    for provider in providers.values():
        provider.pull()
    both = {**files["a"], **files["b"]}
    assert files_under(a.mirror) == files_under(b.mirror) == both
    git("-C", repo, "fsck", "--strict")
    assert git("-C", repo, "rev-list", "--merges", "main") == ""
    assert len(git("-C", repo, "rev-list", "main").split()) == 2


def test_no_credential_helper_askpass_or_prompt_is_ever_consulted(
    http_server: GitHttpServer,
    machines: MakeMachine,
    git: GitCli,
    pool_token: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user's git credential store holds the right token, and askpass programs are set:
    the provider still uses only the credential store it was given (here: none)."""
    http_server.create_repo("pool.git", git)
    url = http_server.url("pool.git")
    home = tmp_path / "user-home"
    home.mkdir()
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    (home / ".git-credentials").write_text(
        url.replace("http://", f"http://x-access-token:{pool_token}@") + "\n"
    )
    marker = tmp_path / "askpass-was-called"
    askpass = tmp_path / "askpass.sh"
    askpass.write_text(f"#!/bin/sh\ntouch {marker}\necho {pool_token}\n")
    askpass.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_ASKPASS", str(askpass))
    monkeypatch.setenv("SSH_ASKPASS", str(askpass))
    m = machines("mach-a", url)  # loopback: no token required, and none stored
    error = code_of(m.provider().open)
    assert error.code is FailureCode.AUTH
    assert not marker.exists()


def test_a_mirror_that_fetched_a_pack_is_reopened_as_it_is(
        http_server: GitHttpServer, machines: MakeMachine, git: GitCli, pool_token: str) -> None:
    """A pack brought by a fetch is checked where it lies (objects/pack/), whatever the current
    directory: a sound mirror is never mistaken for a damaged one and cloned again."""
    http_server.create_repo("pool.git", git)
    url = http_server.url("pool.git")
    a_machine = machines("mach-a", url, token=pool_token)
    b_machine = machines("mach-b", url, token=pool_token)
    a = a_machine.provider()
    publish(a, {"x.md": b"x\n"}, "mach-a")
    b_machine.provider().open()  # B clones
    head = publish(a, {"y.md": b"y\n" * 2000}, "mach-a")
    b = b_machine.provider()
    b.open()
    b.pull()  # B fetches a pack
    b.close()
    again = b_machine.provider().open()
    assert (again.cloned, again.moved_aside, again.head) == (False, "", head)
    assert not [p for p in b_machine.workspace.iterdir() if ".stale-" in p.name]
