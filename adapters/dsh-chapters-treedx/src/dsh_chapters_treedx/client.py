"""One `httpx.Client` per sync (issue #7): connection reuse, explicit timeouts, a request count.

Transport-level failures become `TransportError` here (network, timeout, corrupt envelope). An
`ok: false` envelope becomes `CallError`, carrying the status and the server's code, because
what a 409 or a 413 means depends on the call: the provider decides. A 503 `server_busy`
is retried here, honouring `details.retryAfterMs`, within one request-timeout budget.

No message built here contains the token: messages are routes, statuses, codes and numbers.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from dsh_chapters_core.errors import FailureCode, TransportError

from dsh_chapters_treedx.wire import (
    ApiError,
    CommitOutcome,
    CommitRequest,
    CreatedRepository,
    CreateRepositoryRequest,
    FileBatch,
    ListPathsRequest,
    OpenWorkspaceRequest,
    PathsPage,
    ReadFilesRequest,
    Repository,
    WireShapeError,
    Workspace,
    WorkspaceChange,
    WorkspaceStatus,
    WriteFileRequest,
    from_wire,
    to_wire,
)

T = TypeVar("T")
log = logging.getLogger("dsh_chapters_treedx")

API = "/api/v1"
SERVER_BUSY = "server_busy"  # CONTRACT.md: 503 with details.retryAfterMs
_MESSAGE_CAP = 200  # characters of a server message quoted in ours


class CallError(Exception):
    """The server answered with an error envelope. `route` is a template, never a full URL."""

    def __init__(self, status: int, error: ApiError, route: str) -> None:
        super().__init__(f"{route}: HTTP {status} {error.code}")
        self.status = status
        self.error = error
        self.route = route


class TreeDXClient:
    """The TreeDX calls the provider uses. `requests` counts HTTP round trips (busy retries too)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_ms: int,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.timeout_ms = timeout_ms
        self.requests = 0
        self._token = token
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=base_url,
            timeout=httpx.Timeout(timeout_ms / 1000),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            follow_redirects=False,  # a redirect would carry the bearer token to another host
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def scrub(self, text: str) -> str:
        """Server text quoted in our messages, capped, with the token cut out should it appear."""
        if self._token:
            text = text.replace(self._token, "[token]")
        return text[:_MESSAGE_CAP]

    # --- the calls -------------------------------------------------------------------------

    def create_repository(self, name: str, default_ref: str) -> Repository:
        body = self._call("POST", "/repos", "POST /repos",
                          json_body=to_wire(CreateRepositoryRequest(name, default_ref)))
        return self._shape(body, CreatedRepository, "POST /repos").repo

    def list_paths(self, repo_id: str, request: ListPathsRequest) -> PathsPage:
        route = "POST /repos/{repo_id}/paths/list"
        body = self._call("POST", f"/repos/{_seg(repo_id)}/paths/list", route,
                          json_body=to_wire(request))
        return self._shape(body, PathsPage, route)

    def read_files(self, repo_id: str, request: ReadFilesRequest) -> FileBatch:
        route = "POST /repos/{repo_id}/files/read"
        body = self._call("POST", f"/repos/{_seg(repo_id)}/files/read", route,
                          json_body=to_wire(request))
        return self._shape(body, FileBatch, route)

    def open_workspace(self, repo_id: str, request: OpenWorkspaceRequest) -> Workspace:
        route = "POST /repos/{repo_id}/workspaces"
        body = self._call("POST", f"/repos/{_seg(repo_id)}/workspaces", route,
                          json_body=to_wire(request))
        return self._shape(body, Workspace, route)

    def write_file(self, workspace_id: str, path: str, content: str) -> None:
        self._call("PUT", f"/workspaces/{_seg(workspace_id)}/files", "PUT /workspaces/{id}/files",
                   json_body=to_wire(WriteFileRequest(content)), params={"path": path})

    def commit(self, workspace_id: str, request: CommitRequest) -> CommitOutcome:
        route = "POST /workspaces/{id}/commit"
        body = self._call("POST", f"/workspaces/{_seg(workspace_id)}/commit", route,
                          json_body=to_wire(request))
        return self._shape(body, CommitOutcome, route)

    def workspace_changes(self, workspace_id: str) -> tuple[WorkspaceChange, ...]:
        route = "GET /workspaces/{id}/status"
        body = self._call("GET", f"/workspaces/{_seg(workspace_id)}/status", route)
        return self._shape(body, WorkspaceStatus, route).changes

    def get_workspace(self, workspace_id: str) -> Workspace:
        route = "GET /workspaces/{id}"
        body = self._call("GET", f"/workspaces/{_seg(workspace_id)}", route)
        return self._shape(body, Workspace, route)

    def health(self) -> None:
        """The public liveness route: no token needed, so it tells reach from auth."""
        self._call("GET", "/health", "GET /health")

    def close_workspace(self, workspace_id: str) -> None:
        self._call("POST", f"/workspaces/{_seg(workspace_id)}/close", "POST /workspaces/{id}/close",
                   json_body={})

    # --- plumbing --------------------------------------------------------------------------

    def _shape(self, body: dict[str, Any], cls: type[T], route: str) -> T:
        try:
            return from_wire(body, cls)
        except WireShapeError:
            raise TransportError(
                FailureCode.CORRUPT,
                f"TreeDX answered {route} without the fields of a {cls.__name__} "
                f"(keys: {', '.join(sorted(body)[:12])})",
                hint="check that the remote points at a TreeDX service this adapter supports",
            ) from None

    def _call(
        self,
        method: str,
        path: str,
        route: str,
        *,
        json_body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        waited_ms = 0
        retries = 0
        while True:
            status, body = self._send(method, path, route, json_body, params)
            if body.get("ok") is True:
                return body
            error = self._error(body, status, route)
            retry_after = _retry_after_ms(error) if status == 503 else None
            if error.code != SERVER_BUSY or retry_after is None:
                raise CallError(status, error, route)
            # CONTRACT.md: a busy server says when to come back; honour it within one
            # request-timeout budget, then give the sync back to local-only (§5.3).
            if waited_ms + retry_after > self.timeout_ms:
                raise TransportError(
                    FailureCode.TIMEOUT,
                    f"TreeDX stayed busy on {route}: {retries} retries over {waited_ms} ms; the "
                    f"next retryAfterMs={retry_after} exceeds the {self.timeout_ms} ms budget",
                    hint="the sync stays local-only and retries next time; "
                         "raise treedxFetchTimeoutMs to wait longer",
                )
            log.info("treedx %s busy; retrying after %d ms", route, retry_after)
            self._sleep(retry_after / 1000)
            waited_ms += retry_after
            retries += 1

    def _send(
        self,
        method: str,
        path: str,
        route: str,
        json_body: dict[str, Any] | None,
        params: dict[str, str] | None,
    ) -> tuple[int, dict[str, Any]]:
        self.requests += 1
        started = time.monotonic()
        try:
            response = self._http.request(method, API + path, json=json_body, params=params)
        except httpx.TimeoutException:
            raise TransportError(
                FailureCode.TIMEOUT,
                f"TreeDX did not answer {route} within {self.timeout_ms} ms ({self.base_url})",
                hint="the sync stays local-only; check the service or raise treedxFetchTimeoutMs",
            ) from None
        except httpx.HTTPError as exc:
            raise TransportError(
                FailureCode.NETWORK,
                f"TreeDX at {self.base_url} unreachable on {route} ({type(exc).__name__})",
                hint="the sync stays local-only; `chapters sync` retries when the service is back",
            ) from None
        log.debug("treedx %s -> %d in %.0f ms", route, response.status_code,
                  (time.monotonic() - started) * 1000)
        try:
            body = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("ok"), bool):
            raise TransportError(
                FailureCode.CORRUPT if response.status_code < 500 else FailureCode.NETWORK,
                f"TreeDX answered {route} with HTTP {response.status_code} and no TreeDX envelope "
                f"({len(response.content)} bytes)",
                hint="check that the remote points at a TreeDX service (not a proxy page)",
            )
        return response.status_code, body

    def _error(self, body: dict[str, Any], status: int, route: str) -> ApiError:
        try:
            return from_wire(body.get("error"), ApiError)
        except WireShapeError:
            raise TransportError(
                FailureCode.CORRUPT,
                f"TreeDX answered {route} with HTTP {status} and a malformed error envelope",
                hint="check that the remote points at a TreeDX service this adapter supports",
            ) from None


def _retry_after_ms(error: ApiError) -> int | None:
    value = error.details.get("retryAfterMs")
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def _seg(value: str) -> str:
    return quote(value, safe="")
