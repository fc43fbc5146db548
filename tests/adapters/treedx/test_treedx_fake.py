"""The fake behaves like the real server (CONTRACT.md), quirks included. Raw HTTP, no adapter."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from dsh_chapters_treedx.mirror import git_blob_id
from dsh_chapters_treedx.testing import FakeTreeDX

MAIN = "refs/heads/main"


class Api:
    """Raw calls, answering (status, body)."""

    def __init__(self, fake: FakeTreeDX, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=fake.base_url + "/api/v1", headers=headers, timeout=5)

    def __call__(self, method: str, route: str, body: Any = None, **params: str) -> tuple[int, Any]:
        response = self.http.request(method, route, json=body, params=params or None)
        return response.status_code, response.json()

    def repo(self, name: str = "pool") -> str:
        status, body = self("POST", "/repos", {"repositoryName": name, "defaultRef": MAIN})
        assert status == 200, body
        return str(body["repo"]["repoId"])

    def writable(self, repo_id: str, ttl: int = 60) -> tuple[int, Any]:
        return self("POST", f"/repos/{repo_id}/workspaces",
                    {"baseRef": MAIN, "branchName": MAIN, "mode": "writable", "ttlSeconds": ttl})

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def api(fake: FakeTreeDX) -> Iterator[Api]:
    client = Api(fake, fake.issue_token())
    yield client
    client.close()


def test_a_new_repository_starts_with_treedxkeep_and_create_is_idempotent(
    fake: FakeTreeDX, api: Api
) -> None:
    status, body = api("POST", "/repos", {"repositoryName": "Team-Pool"})
    assert status == 200 and body["ok"] is True
    repo = body["repo"]
    assert repo["name"] == repo["repositoryName"] == "team-pool"
    assert repo["repoId"].startswith("repo_") and len(repo["repoId"]) == 5 + 16
    assert repo["storageKind"] == "managed" and repo["remoteUrl"] is None
    assert api.repo("team-pool") == repo["repoId"]
    assert fake.tree("team-pool") == {".treedxkeep": b""}
    assert len(fake.commit_log("team-pool")) == 1


@pytest.mark.parametrize("name", ["-bad", "Has Space", "a" * 129, "admin", ""])
def test_invalid_or_reserved_names_are_422(api: Api, name: str) -> None:
    status, body = api("POST", "/repos", {"repositoryName": name})
    assert status == 422 and body["error"]["code"] == "validation_error"


def test_missing_bad_and_revoked_tokens_are_401(fake: FakeTreeDX) -> None:
    token = fake.issue_token()
    for candidate in (None, "tdx_bad", token):
        if candidate == token:
            fake.revoke(token)
        client = Api(fake, candidate)
        try:
            status, body = client("POST", "/repos", {"repositoryName": "pool"})
        finally:
            client.close()
        assert status == 401
        assert body == {"ok": False, "error": {"code": "authentication_required",
                                               "message": "authentication required",
                                               "details": {}}}


def test_an_expired_token_is_401(fake: FakeTreeDX) -> None:
    client = Api(fake, fake.issue_token(expires_in_seconds=10))
    try:
        assert client("POST", "/repos", {"repositoryName": "pool"})[0] == 200
        fake.advance(11)
        assert client("POST", "/repos", {"repositoryName": "pool"})[0] == 401
    finally:
        client.close()


def test_public_routes_need_no_token(fake: FakeTreeDX) -> None:
    client = Api(fake, None)
    try:
        assert client("GET", "/health")[0] == 200
        status, body = client("POST", "/auth/dev-token", {"actorId": "actor_demo",
                                                          "tenantId": "tenant_demo",
                                                          "expiresInSeconds": 3600})
        assert status == 200 and body["tokenType"] == "Bearer"
        assert body["principal"] == {"actorId": "actor_demo", "tenantId": "tenant_demo"}
    finally:
        client.close()
    minted = Api(fake, body["accessToken"])
    try:
        assert minted("POST", "/repos", {"repositoryName": "pool"})[0] == 200
    finally:
        minted.close()


def test_paths_list_pages_with_opaque_offset_cursors(fake: FakeTreeDX, api: Api) -> None:
    repo_id = api.repo()
    files = {f"d/{i:02d}.md": f"{i}".encode() for i in range(7)}
    head = fake.seed("pool", files)
    seen: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        request: dict[str, Any] = {"ref": MAIN, "paths": ["**"], "kinds": ["blob"], "limit": 3}
        if cursor:
            request["cursor"] = cursor
        status, body = api("POST", f"/repos/{repo_id}/paths/list", request)
        assert status == 200 and body["resolvedRef"] == head and "query" not in body
        pages += 1
        seen.extend(body["entries"])
        if not body["page"]["hasMore"]:
            assert body["page"]["nextCursor"] is None
            break
        cursor = body["page"]["nextCursor"]
        assert not cursor.isdigit()  # opaque
    assert pages == 3
    assert [e["path"] for e in seen] == sorted([".treedxkeep", *files])
    entry = next(e for e in seen if e["path"] == "d/03.md")
    assert entry["objectId"] == git_blob_id(b"3") and entry["size"] == 1
    assert entry["kind"] == "blob" and entry["mode"] == "100644" and entry["extension"] == "md"


def test_limit_must_be_1_to_500(api: Api) -> None:
    repo_id = api.repo()
    for limit in (0, 501):
        assert api("POST", f"/repos/{repo_id}/paths/list", {"limit": limit})[0] == 422
    assert api("POST", f"/repos/{repo_id}/paths/list", {"limit": 500})[0] == 200


def test_protected_paths_are_hidden_unless_asked_for(fake: FakeTreeDX, api: Api) -> None:
    repo_id = api.repo()
    fake.seed("pool", {".env.local": b"x", "a/node_modules/b.js": b"x", "k.pem": b"x",
                       "uv.lock": b"x", "chapters/ok.md": b"x"})
    _s, hidden = api("POST", f"/repos/{repo_id}/paths/list", {"kinds": ["blob"], "limit": 50})
    assert [e["path"] for e in hidden["entries"]] == [".treedxkeep", "chapters/ok.md"]
    _s, shown = api("POST", f"/repos/{repo_id}/paths/list",
                    {"kinds": ["blob"], "limit": 50, "allowProtected": True})
    assert len(shown["entries"]) == 6


def test_batch_reads_fail_whole_on_one_missing_path(fake: FakeTreeDX, api: Api) -> None:
    repo_id = api.repo()
    fake.seed("pool", {"a.md": b"a", "b.md": b"b"})
    status, body = api("POST", f"/repos/{repo_id}/files/read",
                       {"ref": MAIN, "paths": ["a.md", "missing.md", "b.md"]})
    assert status == 404 and body["error"]["code"] == "not_found"
    status, body = api("POST", f"/repos/{repo_id}/files/read",
                       {"ref": MAIN, "paths": ["a.md", "b.md"]})
    assert status == 200 and [f["content"] for f in body["files"]] == ["a", "b"]
    assert body["files"][0]["objectId"] == git_blob_id(b"a")


def test_non_utf8_needs_base64_and_traversal_is_422(fake: FakeTreeDX, api: Api) -> None:
    repo_id = api.repo()
    fake.seed("pool", {"bin": b"\xff\x00"})
    status, body = api("POST", f"/repos/{repo_id}/files/read", {"ref": MAIN, "path": "bin"})
    assert status == 415 and body["error"]["code"] == "unsupported_media_type"
    status, body = api("POST", f"/repos/{repo_id}/files/read",
                       {"ref": MAIN, "path": "bin", "encoding": "base64"})
    assert status == 200 and base64.b64decode(body["file"]["content"]) == b"\xff\x00"
    status, body = api("POST", f"/repos/{repo_id}/files/read", {"ref": MAIN, "path": "../x"})
    assert status == 422


def test_one_writable_lease_per_branch_released_on_commit_close_or_expiry(
    fake: FakeTreeDX, api: Api
) -> None:
    repo_id = api.repo()
    status, first = api.writable(repo_id, ttl=30)
    assert status == 200 and "workspace" not in first and first["mode"] == "writable"
    status, body = api.writable(repo_id)
    assert status == 409 and body["error"] == {"code": "conflict",
                                               "message": "writable lease already exists",
                                               "details": {}}
    assert api("POST", f"/repos/{repo_id}/workspaces", {})[0] == 200  # read_only: no lease
    api("POST", f"/workspaces/{first['workspaceId']}/close", {})
    status, second = api.writable(repo_id, ttl=30)
    assert status == 200
    fake.advance(31)
    status, body = api("GET", f"/workspaces/{second['workspaceId']}")
    assert status == 409 and body["error"]["message"] == "Workspace has expired"
    status, third = api.writable(repo_id)
    assert status == 200
    api("PUT", f"/workspaces/{third['workspaceId']}/files", {"content": "x"}, path="x.md")
    assert api("POST", f"/workspaces/{third['workspaceId']}/commit",
               {"message": "m", "author": {"name": "n", "email": "e"}})[0] == 200
    assert api.writable(repo_id)[0] == 200


def test_the_default_mode_is_read_only(api: Api) -> None:
    repo_id = api.repo()
    _s, ws = api("POST", f"/repos/{repo_id}/workspaces", {"baseRef": MAIN})
    assert ws["mode"] == "read_only"
    status, body = api("PUT", f"/workspaces/{ws['workspaceId']}/files", {"content": "x"}, path="a")
    assert status == 403 and body["error"]["code"] == "permission_denied"


def test_commit_has_no_compare_and_swap(fake: FakeTreeDX, api: Api) -> None:
    repo_id = api.repo()
    _s, ws = api.writable(repo_id)
    moved = fake.move_head("pool", {"theirs.md": b"theirs"})
    api("PUT", f"/workspaces/{ws['workspaceId']}/files", {"content": "mine"}, path="mine.md")
    status, body = api("POST", f"/workspaces/{ws['workspaceId']}/commit",
                       {"message": "m", "author": {"name": "n", "email": "e"}})
    assert status == 200 and "commit" not in body and body["status"] == "committed"
    assert body["changedPaths"] == ["mine.md"]
    # The branch moved unconditionally; the out-of-band file dropped out of head.
    assert fake.head("pool") == body["commitSha"]
    assert "theirs.md" not in fake.tree("pool")
    assert fake.overwritten("pool") == [moved]


def test_commit_without_changes_is_422_and_puts_over_one_mib_are_413(api: Api) -> None:
    repo_id = api.repo()
    _s, ws = api.writable(repo_id)
    wid = ws["workspaceId"]
    status, body = api("POST", f"/workspaces/{wid}/commit", {"message": "m"})
    assert status == 422 and body["error"]["code"] == "validation_error"
    status, body = api("PUT", f"/workspaces/{wid}/files", {"content": "x" * ((1 << 20) + 1)},
                       path="big")
    assert status == 413 and body["error"]["details"]["size"] == (1 << 20) + 1
    status, body = api("PUT", f"/workspaces/{wid}/files", {"content": "ok"}, path="ok.md")
    assert status == 200 and body["file"]["sha"].startswith("blake3:")
    assert body["file"]["source"] == "overlay" and body["file"]["size"] == 2
    _s, st = api("GET", f"/workspaces/{wid}/status")
    assert st["changes"] == [{"path": "ok.md", "status": "added"}]


def test_another_actors_workspace_is_403(fake: FakeTreeDX, api: Api) -> None:
    repo_id = api.repo()
    _s, ws = api.writable(repo_id)
    other = Api(fake, fake.issue_token(actor="other"))
    try:
        status, body = other("GET", f"/workspaces/{ws['workspaceId']}")
    finally:
        other.close()
    assert status == 403 and body["error"]["code"] == "permission_denied"


def test_fault_switches(fake: FakeTreeDX, api: Api) -> None:
    repo_id = api.repo()
    fake.busy(1, 250)
    status, body = api("POST", f"/repos/{repo_id}/paths/list", {"limit": 1})
    assert status == 503 and body["error"]["code"] == "server_busy"
    assert body["error"]["details"] == {"retryAfterMs": 250}
    fake.unavailable()
    status, body = api("POST", f"/repos/{repo_id}/paths/list", {"limit": 1})
    assert status == 503 and body["error"]["code"] == "service_unavailable"
    fake.unavailable(False)
    fake.drop(1)
    with pytest.raises(httpx.RemoteProtocolError):
        api("POST", f"/repos/{repo_id}/paths/list", {"limit": 1})
    assert api("POST", f"/repos/{repo_id}/paths/list", {"limit": 1})[0] == 200


def test_stop_and_start_keep_the_port_and_the_data(fake: FakeTreeDX, api: Api) -> None:
    api.repo()
    port = fake.port
    fake.stop()
    with pytest.raises(httpx.ConnectError):
        api("POST", "/repos", {"repositoryName": "pool"})
    fake.start()
    assert fake.port == port
    assert api("POST", "/repos", {"repositoryName": "pool"})[0] == 200
    assert fake.tree("pool") == {".treedxkeep": b""}


def test_requests_are_counted_per_route(fake: FakeTreeDX, api: Api) -> None:
    repo_id = api.repo()
    api("POST", f"/repos/{repo_id}/paths/list", {"limit": 1})
    api("POST", f"/repos/{repo_id}/paths/list", {"limit": 1})
    api("GET", "/nowhere")
    assert fake.counts() == {"POST /api/v1/repos": 1,
                             "POST /api/v1/repos/{repo_id}/paths/list": 2,
                             "GET (unmatched)": 1}
    assert fake.count("/paths/list") == 2 and fake.count() == 4
