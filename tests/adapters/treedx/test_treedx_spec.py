"""The fake's answers checked against TreeDX's `openapi.yaml`, wherever the spec and the server
agree: the envelope, the status codes per operation, the error codes, and the success bodies.
Every place the server (CONTRACT.md) differs from the spec is listed here with its reason, and
anything else that differs fails."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from dsh_chapters_treedx.testing import Exchange, FakeTreeDX

from tests.adapters.treedx.treedx_machines import Machines

SPEC_PATH = Path(__file__).parent / "spec" / "openapi.yaml"
WS_FILES = "/api/v1/workspaces/{workspace_id}/files"
READ = "/api/v1/repos/{repo_id}/files/read"
LIST = "/api/v1/repos/{repo_id}/paths/list"
COMMIT = "/api/v1/workspaces/{workspace_id}/commit"

# Status codes the server sends that the spec does not list for the operation.
TOLERATED_STATUS: dict[tuple[str, str, int], str] = {
    ("PUT", WS_FILES, 413): "CONTRACT.md: files over 1 MiB get 413",
    ("POST", COMMIT, 422): "CONTRACT.md: a commit with no changes gets 422",
    ("POST", READ, 415): "CONTRACT.md: non-UTF-8 content read as utf8 gets 415",
    ("POST", READ, 422): "CONTRACT.md: a path that tries to traverse out gets 422",
    ("PUT", WS_FILES, 422): "CONTRACT.md: 422 validation_error (a traversing path)",
    ("POST", LIST, 422): "CONTRACT.md: limit is 1..500; the server validates (422)",
    ("POST", LIST, 404): "CONTRACT.md: 404 not_found for an unknown repository",
    ("POST", "/api/v1/repos/{repo_id}/workspaces", 404): "CONTRACT.md: 404 for an unknown repo",
    ("PUT", WS_FILES, 404): "CONTRACT.md: 404 not_found for an unknown workspace",
    ("POST", COMMIT, 404): "CONTRACT.md: 404 not_found for an unknown workspace",
}
# Error codes the server sends that the spec's TreeDxErrorCode enum lacks.
TOLERATED_CODES = {"server_busy": "CONTRACT.md: 503 server_busy with details.retryAfterMs"}
# Success-body keys whose shape the server sends differently from the spec.
TOLERATED_KEYS = {
    ("POST", READ, "file"): "CONTRACT.md: the server adds objectId and size to the file",
    ("PUT", WS_FILES, "file"): "CONTRACT.md: {path, sha: blake3:<hex>, size, source}",
}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    with SPEC_PATH.open(encoding="utf-8") as handle:
        loaded = yaml.safe_load(handle)
    assert isinstance(loaded, dict)
    return loaded


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = spec
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


_TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool,
                          "null": type(None), "number": (int, float)}


def violations(spec: dict[str, Any], schema: dict[str, Any], value: Any, where: str,
               skip_keys: frozenset[str] = frozenset()) -> Iterator[str]:
    """The JSON-Schema subset the spec uses: $ref, type, const, enum, required, properties,
    additionalProperties, items, oneOf, pattern."""
    schema = resolve(spec, schema)
    if "oneOf" in schema:
        if not any(not list(violations(spec, option, value, where)) for option in schema["oneOf"]):
            yield f"{where}: matches none of oneOf"
        return
    kind = schema.get("type")
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            yield f"{where}: {value!r} is not an integer"
            return
    elif kind is not None and (not isinstance(value, _TYPES[kind])
                               or (kind != "boolean" and isinstance(value, bool))):
        yield f"{where}: {type(value).__name__} is not {kind}"
        return
    if "const" in schema and value != schema["const"]:
        yield f"{where}: {value!r} != const {schema['const']!r}"
    if "enum" in schema and value not in schema["enum"]:
        yield f"{where}: {value!r} not in enum"
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        yield f"{where}: {value!r} does not match {schema['pattern']}"
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                yield f"{where}: missing required {key!r}"
        for key, item in value.items():
            if key in skip_keys:
                continue
            if key in props:
                yield from violations(spec, props[key], item, f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                yield f"{where}: unexpected key {key!r}"
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from violations(spec, schema["items"], item, f"{where}[{i}]")


def provoke_everything(fake: FakeTreeDX, machines: Machines) -> None:
    """Drive the provider and raw requests through every status the adapter can meet."""
    a = machines.provider("a")
    a.open()
    a.stage({"chapters/pk/s1/001-x.md": b"one"})
    a.commit("m", "a")
    a.push()
    fake.seed(machines.repository, {"artifacts/pk/00/blob": b"\xff\xfe"})
    a.pull()  # 415, then base64
    auth = {"Authorization": f"Bearer {machines.token}"}
    with httpx.Client(base_url=fake.base_url + "/api/v1", timeout=5) as http:
        repo = http.post("/repos", json={"repositoryName": machines.repository}, headers=auth)
        repo_id = repo.json()["repo"]["repoId"]
        http.post("/repos", json={"repositoryName": "admin"}, headers=auth)  # 422
        http.post("/repos", json={"repositoryName": "x"})  # 401
        http.post(f"/repos/{repo_id}/paths/list", json={"limit": 501}, headers=auth)  # 422
        http.post("/repos/repo_missing/paths/list", json={}, headers=auth)  # 404
        read = f"/repos/{repo_id}/files/read"
        http.post(read, json={"paths": ["nope", "chapters/pk/s1/001-x.md"]},
                  headers=auth)  # 404, the whole batch
        http.post(read, json={"path": "../etc/passwd"}, headers=auth)  # 422
        http.post(f"/repos/{repo_id}/files/read", json={"path": "chapters/pk/s1/001-x.md"},
                  headers=auth)  # 200, single
        ws = http.post(f"/repos/{repo_id}/workspaces",
                       json={"baseRef": "refs/heads/main", "branchName": "refs/heads/main",
                             "mode": "writable", "ttlSeconds": 60}, headers=auth).json()
        ws_id = ws["workspaceId"]
        http.post(f"/repos/{repo_id}/workspaces", json={"mode": "writable"}, headers=auth)  # 409
        http.get(f"/workspaces/{ws_id}", headers=auth)
        http.get(f"/workspaces/{ws_id}/status", headers=auth)
        http.post(f"/workspaces/{ws_id}/commit", json={"message": "m", "author": {}},
                  headers=auth)  # 422 no changes
        http.put(f"/workspaces/{ws_id}/files", params={"path": "big"},
                 json={"content": "x" * ((1 << 20) + 1)}, headers=auth)  # 413
        http.put(f"/workspaces/{ws_id}/files", params={"path": "a/../b"}, json={"content": "x"},
                 headers=auth)  # 422
        http.put(f"/workspaces/{ws_id}/files", params={"path": "new.md"}, json={"content": "x"},
                 headers=auth)
        http.delete(f"/workspaces/{ws_id}/files", params={"path": "new.md"}, headers=auth)
        http.delete(f"/workspaces/{ws_id}/files", params={"path": "never.md"}, headers=auth)  # 404
        other = fake.issue_token(actor="someone-else")
        http.get(f"/workspaces/{ws_id}", headers={"Authorization": f"Bearer {other}"})  # 403
        http.post(f"/workspaces/{ws_id}/close", json={}, headers=auth)
        http.post(f"/workspaces/{ws_id}/commit", json={"message": "m"}, headers=auth)  # 409 closed
        fake.busy(1, 10)
        http.post(f"/repos/{repo_id}/paths/list", json={"limit": 1}, headers=auth)  # 503 busy
        fake.unavailable()
        http.post(f"/repos/{repo_id}/paths/list", json={"limit": 1}, headers=auth)  # 503
        fake.unavailable(False)
        http.get("/health")
        http.post("/auth/dev-token", json={"actorId": "actor_demo", "tenantId": "tenant_demo",
                                           "expiresInSeconds": 3600})


@pytest.fixture
def exchanges(fake: FakeTreeDX, machines: Machines) -> list[Exchange]:
    provoke_everything(fake, machines)
    return list(fake.exchanges)


def operation(spec: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
    op = spec["paths"].get(exchange.route, {}).get(exchange.method.lower())
    assert op is not None, f"{exchange.method} {exchange.route} is not a spec operation"
    return dict(op)


def test_every_route_the_fake_serves_is_a_spec_operation(
    spec: dict[str, Any], exchanges: list[Exchange]
) -> None:
    for exchange in exchanges:
        operation(spec, exchange)


def test_status_codes_are_the_operations_or_documented(
    spec: dict[str, Any], exchanges: list[Exchange]
) -> None:
    seen = set()
    for e in exchanges:
        listed = {int(code) for code in operation(spec, e)["responses"]}
        key = (e.method, e.route, e.status)
        seen.add(key)
        assert e.status in listed or key in TOLERATED_STATUS, (
            f"{e.method} {e.route} answered {e.status}; the spec lists {sorted(listed)}")
    statuses = {status for _m, _r, status in seen}
    assert {200, 401, 403, 404, 409, 413, 415, 422, 503} <= statuses
    for documented in [("PUT", WS_FILES, 413), ("POST", COMMIT, 422), ("POST", READ, 415)]:
        assert documented in seen, f"the contract's {documented} was not exercised"


def test_error_bodies_are_the_error_envelope(
    spec: dict[str, Any], exchanges: list[Exchange]
) -> None:
    envelope = spec["components"]["schemas"]["TreeDxErrorEnvelope"]
    enum = resolve(spec, spec["components"]["schemas"]["TreeDxErrorCode"])["enum"]
    errors = [e for e in exchanges if e.status >= 400]
    assert len(errors) >= 15
    for e in errors:
        code = e.body["error"]["code"]
        if code in TOLERATED_CODES:
            body = {**e.body, "error": {**e.body["error"], "code": enum[0]}}
        else:
            body = e.body
        problems = list(violations(spec, envelope, body, f"{e.method} {e.route} {e.status}"))
        assert problems == []
        # The operation's own error response is the same envelope.
        ref = operation(spec, e)["responses"].get(str(e.status), {}).get("$ref", "")
        assert ref in ("", "#/components/responses/Error")


def test_error_codes_match_their_statuses(exchanges: list[Exchange]) -> None:
    """CONTRACT.md's status → code table."""
    table = {401: {"authentication_required"}, 403: {"permission_denied"}, 404: {"not_found"},
             409: {"conflict", "workspace_revoked"}, 413: {"payload_too_large"},
             415: {"unsupported_media_type"}, 422: {"validation_error"},
             503: {"service_unavailable", "server_busy"}}
    for e in exchanges:
        if e.status >= 400:
            assert e.body["error"]["code"] in table[e.status], e
    busy = [e for e in exchanges if e.status == 503 and e.body["error"]["code"] == "server_busy"]
    assert busy and all(isinstance(e.body["error"]["details"]["retryAfterMs"], int) for e in busy)


def test_success_bodies_match_the_spec_where_the_server_agrees(
    spec: dict[str, Any], exchanges: list[Exchange]
) -> None:
    ok = [e for e in exchanges if e.status == 200]
    assert {e.route for e in ok} >= {"/api/v1/repos", LIST, READ, WS_FILES, COMMIT,
                                     "/api/v1/repos/{repo_id}/workspaces",
                                     "/api/v1/workspaces/{workspace_id}/close"}
    for e in ok:
        schema = operation(spec, e)["responses"]["200"]["content"]["application/json"]["schema"]
        skip = frozenset(k for (m, r, k) in TOLERATED_KEYS if (m, r) == (e.method, e.route))
        problems = list(violations(spec, schema, e.body, f"{e.method} {e.route}", skip))
        assert problems == []
        assert e.body["ok"] is True


def test_flat_shapes_are_what_the_server_sends(exchanges: list[Exchange]) -> None:
    """CONTRACT.md's table: flat where the spec shows a wrapper key."""
    by_route = {(e.method, e.route): e.body for e in exchanges if e.status == 200}
    created = by_route[("POST", "/api/v1/repos/{repo_id}/workspaces")]
    assert "workspace" not in created and len(created["baseCommitSha"]) == 40
    committed = by_route[("POST", COMMIT)]
    assert "commit" not in committed and re.fullmatch(r"[0-9a-f]{40}", committed["commitSha"])
    listed = by_route[("POST", LIST)]
    assert "query" not in listed and {"entries", "page", "resolvedRef"} <= set(listed)
    deleted = by_route[("DELETE", WS_FILES)]
    assert "file" not in deleted and deleted["path"] == "new.md"


def test_the_check_is_not_vacuous(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    bad_error = {"ok": False, "error": {"code": "nope", "message": 3, "extra": True}}
    assert len(list(violations(spec, schemas["TreeDxErrorEnvelope"], bad_error, "e"))) == 3
    wrapped = {"ok": True, "workspace": {"workspaceId": "w"}}
    assert list(violations(spec, schemas["TreeDxCreateWorkspaceResponse"], wrapped, "w"))
    assert list(violations(spec, schemas["TreeDxCreateRepositoryResponse"],
                           {"ok": True, "repo": {"repoId": "r", "name": "Bad Name",
                                                 "defaultRef": "m", "status": "ready",
                                                 "repositoryName": "Bad Name"}}, "r"))
