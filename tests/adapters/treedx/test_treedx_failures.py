"""Every failure leaves with its code (never prose), and the token appears nowhere."""

from __future__ import annotations

import json
import logging

import pytest
from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_treedx import provider as provider_module
from dsh_chapters_treedx.client import TreeDXClient
from dsh_chapters_treedx.mirror import STATE_FILE
from dsh_chapters_treedx.provider import BRANCH, TreeDXProvider
from dsh_chapters_treedx.testing import FakeTreeDX
from dsh_chapters_treedx.wire import OpenWorkspaceRequest

from tests.adapters.treedx.treedx_machines import TEST_CONFIG, Machines

CHAPTER = "chapters/pk/s1/001-work.md"


def staged(machines: Machines, machine: str = "a", data: bytes = b"chapter\n") -> TreeDXProvider:
    provider = machines.provider(machine)
    provider.open()
    provider.stage({CHAPTER: data})
    provider.commit("m", machine)
    return provider


def failure_of(call) -> TransportError:  # type: ignore[no-untyped-def]
    with pytest.raises(TransportError) as caught:
        call()
    return caught.value


def hold_lease(fake: FakeTreeDX, machines: Machines) -> tuple[TreeDXClient, str]:
    client = TreeDXClient(fake.base_url, machines.token, timeout_ms=5000)
    repo = client.create_repository(machines.repository, BRANCH)
    ws = client.open_workspace(repo.repo_id, OpenWorkspaceRequest(BRANCH, BRANCH, 60))
    return client, ws.workspace_id


# --- auth --------------------------------------------------------------------------------------


def test_revoked_token_is_auth_with_a_relink_hint_and_never_echoed(
    fake: FakeTreeDX, machines: Machines, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    a = staged(machines)
    fake.revoke(machines.token)
    failure = failure_of(a.push)
    assert failure.code is FailureCode.AUTH
    assert "chapters link" in failure.hint and machines.remote in failure.hint
    assert "401" in failure.message
    state = (machines.mirror("a") / STATE_FILE).read_text(encoding="utf-8")
    assert json.loads(state)["offline"]["code"] == "auth"
    out = capsys.readouterr()
    for text in (str(failure), failure.hint, state, caplog.text, out.out, out.err):
        assert machines.token not in text


def test_a_missing_token_is_auth_before_any_request(fake: FakeTreeDX, machines: Machines) -> None:
    provider = machines.provider("a", token="")
    failure = failure_of(provider.open)
    assert failure.code is FailureCode.AUTH
    assert "chapters link" in failure.hint
    assert fake.count() == 0


def test_a_bad_token_is_auth(fake: FakeTreeDX, machines: Machines) -> None:
    provider = machines.provider("a", token="tdx_not-a-token")
    failure = failure_of(provider.open)
    assert failure.code is FailureCode.AUTH
    assert "tdx_not-a-token" not in str(failure)


def test_a_workspace_of_another_actor_is_auth(fake: FakeTreeDX, machines: Machines) -> None:
    client = TreeDXClient(fake.base_url, fake.issue_token(actor="someone"), timeout_ms=5000)
    try:
        repo = client.create_repository(machines.repository, BRANCH)
        ws = client.open_workspace(repo.repo_id, OpenWorkspaceRequest(BRANCH, BRANCH, 60))
    finally:
        client.close()
    mine = TreeDXClient(fake.base_url, machines.token, timeout_ms=5000)
    try:
        with pytest.raises(Exception) as caught:
            mine.close_workspace(ws.workspace_id)
        assert getattr(caught.value, "status", None) == 403
    finally:
        mine.close()


# --- service down, busy, slow, dropped ----------------------------------------------------------


def test_busy_is_retried_after_retry_after_ms(fake: FakeTreeDX, machines: Machines) -> None:
    a = staged(machines)
    fake.busy(times=2, retry_after_ms=150)
    assert a.push().pushed
    assert machines.sleeps == [0.15, 0.15]


def test_busy_past_the_request_budget_is_timeout(fake: FakeTreeDX, machines: Machines) -> None:
    a = staged(machines)
    fake.busy(times=100, retry_after_ms=2000)  # 5000 ms budget: two waits, then give up
    failure = failure_of(a.push)
    assert failure.code is FailureCode.TIMEOUT
    assert "2 retries over 4000 ms" in failure.message
    assert machines.sleeps == [2.0, 2.0]


def test_unavailable_is_network(fake: FakeTreeDX, machines: Machines) -> None:
    a = staged(machines)
    fake.unavailable()
    failure = failure_of(a.pull)
    assert failure.code is FailureCode.NETWORK
    assert "503" in failure.message
    fake.unavailable(False)
    assert a.push().pushed


def test_a_stopped_server_is_network_then_recovery(fake: FakeTreeDX, machines: Machines) -> None:
    a = staged(machines)
    fake.stop()
    failure = failure_of(a.push)
    assert failure.code is FailureCode.NETWORK
    state = json.loads((machines.mirror("a") / STATE_FILE).read_text())
    assert state["offline"]["code"] == "network"
    assert state["staged"]["committed"] == [CHAPTER]  # kept for the next sync
    fake.start()
    again = machines.provider("a")
    again.open()
    assert again.pull().changed_paths == ()
    assert again.push().pushed
    state = json.loads((machines.mirror("a") / STATE_FILE).read_text())
    assert state["offline"] is None and state["staged"]["committed"] == []


def test_a_dropped_connection_is_network(fake: FakeTreeDX, machines: Machines) -> None:
    a = machines.provider("a")
    a.open()
    fake.drop(1)
    assert failure_of(a.pull).code is FailureCode.NETWORK


def test_a_slow_server_is_timeout(fake: FakeTreeDX, machines: Machines) -> None:
    config = TEST_CONFIG.replace(treedx_fetch_timeout_ms=200)
    a = machines.provider("a", config=config)
    a.open()
    fake.slow(1.0)
    failure = failure_of(a.pull)
    assert failure.code is FailureCode.TIMEOUT
    assert "200 ms" in failure.message
    fake.slow(0)


# --- the lease -----------------------------------------------------------------------------------


def test_a_taken_lease_retries_then_is_timeout(fake: FakeTreeDX, machines: Machines) -> None:
    a = staged(machines)
    holder, _ws = hold_lease(fake, machines)
    try:
        failure = failure_of(a.push)
    finally:
        holder.close()
    assert failure.code is FailureCode.TIMEOUT
    retries = TEST_CONFIG.treedx_lease_retries
    assert fake.count("/workspaces") - 1 == retries + 1  # one by the holder
    assert machines.sleeps == [TEST_CONFIG.treedx_lease_retry_delay_ms / 1000] * retries
    assert f"{retries + 1} attempts" in failure.message


def test_a_lease_freed_during_the_retries_is_taken(fake: FakeTreeDX, machines: Machines) -> None:
    a = staged(machines)
    holder, ws = hold_lease(fake, machines)
    # freed right after our first attempt was refused
    fake.after("/repos/{repo_id}/workspaces", 1, lambda: holder.close_workspace(ws))
    try:
        assert a.push().pushed
    finally:
        holder.close()
    assert len(machines.sleeps) == 1


def test_diverged_push_closes_its_workspace(fake: FakeTreeDX, machines: Machines) -> None:
    a = staged(machines)
    fake.move_head(machines.repository, {"chapters/pk/x/001-y.md": b"theirs"})
    assert failure_of(a.push).code is FailureCode.DIVERGED
    assert fake.lease_holders(machines.repository) == 0
    assert fake.count("/close") == 1


def test_a_lease_expired_mid_push_is_timeout_and_not_committed(
    fake: FakeTreeDX, machines: Machines
) -> None:
    a = staged(machines)
    before = fake.head(machines.repository)
    fake.after("/workspaces/{workspace_id}/files", 1,
               lambda: fake.advance(TEST_CONFIG.treedx_workspace_ttl_seconds + 1))
    a.stage({"chapters/pk/s1/002-work.md": b"second"})
    a.commit("m", "a")
    failure = failure_of(a.push)
    assert failure.code is FailureCode.TIMEOUT
    assert fake.head(machines.repository) == before


def test_a_quarantined_workspace_is_refused(fake: FakeTreeDX, machines: Machines) -> None:
    a = staged(machines)
    fake.after("/workspaces/{workspace_id}/files", 1, lambda: fake.quarantine(machines.repository))
    a.stage({"chapters/pk/s1/002-work.md": b"second"})
    a.commit("m", "a")
    failure = failure_of(a.push)
    assert failure.code is FailureCode.REFUSED
    assert "workspace_revoked" in failure.message


# --- content -----------------------------------------------------------------------------------


def test_a_server_413_refuses_that_file_and_the_rest_goes_on(
    fake: FakeTreeDX, machines: Machines, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provider_module, "FILE_LIMIT_BYTES", 4 << 20)  # let the server judge
    a = machines.provider("a")
    a.open()
    big = "artifacts/pk/ab/" + "b" * 64
    a.stage({CHAPTER: b"small", big: b"y" * ((1 << 20) + 1)})
    a.commit("m", "a")
    assert a.push().pushed
    assert a.last_refused == ((big, (1 << 20) + 1),)
    assert fake.tree(machines.repository).keys() == {".treedxkeep", CHAPTER}


def test_non_utf8_pool_files_are_read_as_base64(fake: FakeTreeDX, machines: Machines) -> None:
    binary = bytes(range(256))
    fake.seed(machines.repository, {"artifacts/pk/00/blob": binary, CHAPTER: b"text"})
    fake.reset_counts()
    machines.provider("a").open()
    assert (machines.mirror("a") / "artifacts/pk/00/blob").read_bytes() == binary
    assert [e.status for e in fake.exchanges if e.route.endswith("/files/read")] == [415, 200]


def test_a_commit_the_pool_already_holds_is_not_a_push(
    fake: FakeTreeDX, machines: Machines
) -> None:
    a = staged(machines)
    head = a.push().head
    (machines.mirror("a") / CHAPTER).unlink()  # the mirror lost it; the store re-stages it
    a.stage({CHAPTER: b"chapter\n"})
    a.commit("m", "a")
    result = a.push()
    assert result.pushed is False and result.head == head
    assert fake.count("/status") == 1  # 422 confirmed as "no changes", not matched on prose
    assert fake.lease_holders(machines.repository) == 0


def test_remote_with_credentials_is_refused_without_echoing_them(
    fake: FakeTreeDX, machines: Machines
) -> None:
    remote = f"treedx+http://user:sekrit-token@127.0.0.1:{fake.port}/{machines.repository}"
    failure = failure_of(machines.provider("a", remote=remote).open)
    assert failure.code is FailureCode.REFUSED
    assert "sekrit-token" not in str(failure)
    assert fake.count() == 0


def test_an_invalid_repository_name_is_refused(fake: FakeTreeDX, machines: Machines) -> None:
    remote = f"treedx+{fake.base_url}/-starts-with-a-dash"
    failure = failure_of(machines.provider("a", remote=remote).open)
    assert failure.code is FailureCode.REFUSED
    assert fake.count() == 0


def test_a_reserved_repository_name_is_refused_by_the_server(
    fake: FakeTreeDX, machines: Machines
) -> None:
    failure = failure_of(machines.provider("a", remote=f"treedx+{fake.base_url}/admin").open)
    assert failure.code is FailureCode.REFUSED
    assert "422" in failure.message


def test_a_non_treedx_answer_is_corrupt(machines: Machines, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Proxy(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b"<html>login</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = HTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,))
    thread.start()
    try:
        remote = f"treedx+http://127.0.0.1:{server.server_address[1]}/pool"
        failure = failure_of(machines.provider("a", remote=remote).open)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert failure.code is FailureCode.CORRUPT
