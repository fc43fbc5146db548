"""A fake TreeDX server that behaves like the real one (`treedx/CONTRACT.md`), quirks included.

The real server (Elixir + Rust, release 0.2.43) cannot be built here, so the adapter is proven
against this: a real threaded HTTP server on 127.0.0.1 that tests start and stop. It implements
what the adapter uses, the way the server does it, not the way `openapi.yaml` draws it:

- flat responses (workspace, commit, workspace file GET/DELETE), `paths/list` as
  `entries` + `page`, `ok`/`error` envelopes with the server's codes;
- one writable lease per (repo, branch): a second writable open gets 409 `conflict`; the lease
  ends on commit, close or TTL expiry; there is no renew call;
- no compare-and-swap at commit: the branch moves to a commit whose parent is the workspace's
  `baseCommitSha`, unconditionally (what another writer committed meanwhile drops out of head);
- opaque offset cursors; batch reads fail whole (404) on one missing path; 415 on a non-UTF-8
  file read as utf8; 422 on a path that traverses out;
- a new repository starts with one commit adding `.treedxkeep`; names are lowercased and
  checked; `POST /repos` is an idempotent resolve-or-create;
- 401 `authentication_required` for a missing, bad, expired or revoked token; 413 over 1 MiB;
  422 on a commit with no changes.

Stand-ins, named so nobody mistakes them: `repoId` and the `blake3:` file sha use sha-256 (the
stdlib has no blake3); callers treat both as opaque. `objectId` is the real git blob sha-1.

Fault switches: `slow`, `busy` (503 `server_busy` with `details.retryAfterMs`), `unavailable`
(503 `service_unavailable`), `drop` (close the connection without answering), `revoke`,
`move_head` (an out-of-band commit), `after` (run an action after the n-th request to a route),
`advance` (move the lease clock), `quarantine`. Every request is counted per route
(`count`), and every answer is kept in `exchanges` for the spec check.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import re
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

API = "/api/v1"
MAIN = "refs/heads/main"
FILE_LIMIT = 1 << 20  # CONTRACT.md: files over 1 MiB get 413
PAGE_LIMIT_MAX = 500
DEFAULT_TTL_SECONDS = 3600
KEEP_FILE = ".treedxkeep"
REPO_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
# The server holds its own list; these stand in for "reserved names get 422".
RESERVED_NAMES = frozenset({"admin", "api", "health", "internal", "new", "repos"})
PROTECTED_SEGMENTS = frozenset({".git", ".ssh", "node_modules", "dist", "target", "_build", "deps"})
LOCKFILES = frozenset({"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "Cargo.lock",
                       "poetry.lock", "Gemfile.lock", "composer.lock", "mix.lock", "uv.lock",
                       "Pipfile.lock"})


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def is_protected(path: str) -> bool:
    """CONTRACT.md: hidden from listings unless `allowProtected: true`."""
    parts = path.split("/")
    name = parts[-1]
    return (
        any(part in PROTECTED_SEGMENTS for part in parts)
        or name in LOCKFILES
        or name.startswith(".env")
        or name.endswith((".pem", ".key"))
    )


def _glob(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            if pattern.startswith("/", i):  # `a/**/b` also matches `a/b`
                out[-1] = "(?:.*/)?"
                i += 1
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class _Fail(Exception):
    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


@dataclass
class _Commit:
    """One commit of a fake repository: its sha, parent, whole file tree, message and author, with
    the git blob id of each path."""

    sha: str
    parent: str | None
    tree: dict[str, bytes]
    message: str
    author: str
    ids: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ids = {path: git_blob_id(data) for path, data in self.tree.items()}


@dataclass
class _Repo:
    """A fake repository: its id, name, default ref, branches and commits, and the heads a commit
    dropped."""

    repo_id: str
    name: str
    default_ref: str
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, _Commit] = field(default_factory=dict)
    overwritten: list[str] = field(default_factory=list)  # heads a commit dropped (no CAS)


@dataclass
class _Principal:
    """Whom a token authenticates on the fake server: the actor, the tenant and when it expires."""

    actor: str
    tenant: str
    expires_at: float | None  # on the fake's clock


@dataclass
class _Workspace:
    """A workspace opened on the fake server: its base, branch, mode, lease expiry and status, and
    the files written or deleted in it since."""

    workspace_id: str
    repo: _Repo
    actor: str
    base_ref: str
    base_sha: str
    branch: str
    mode: str
    ttl: int
    created: datetime
    expires_at: float  # on the fake's clock
    status: str = "ready"  # ready, committed, closed, expired, quarantined
    overlay: dict[str, bytes | None] = field(default_factory=dict)

    @property
    def holds_lease(self) -> bool:
        return self.mode == "writable" and self.status == "ready"


@dataclass(frozen=True)
class Exchange:
    """One answered request, for the check against `openapi.yaml`."""

    method: str
    route: str  # the spec's path template, e.g. /api/v1/repos/{repo_id}/paths/list
    status: int
    body: dict[str, Any]


@dataclass
class _Trigger:
    """An action a test scheduled to run right after the fake server's n-th request to a route."""

    route: str
    after: int
    action: Callable[[], None]
    seen: int = 0


_DROP = object()


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True

    def __init__(self, address: tuple[str, int], fake: FakeTreeDX) -> None:
        self.fake = fake
        self.live: set[socket.socket] = set()
        self.live_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.live_lock:
            self.live.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.live_lock:
            self.live.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError | OSError):
            return  # a client that timed out and hung up: normal under the fault switches
        self.fake.errors.append(repr(exc))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so one httpx.Client reuses its connection
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall
    timeout = 30
    server: _Server

    def _any(self) -> None:
        self.server.fake._serve(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

    def log_message(self, format: str, *args: Any) -> None:
        return


class FakeTreeDX:
    """Start with `start()` (or `with FakeTreeDX() as fake:`), stop with `stop()`."""

    def __init__(self) -> None:
        self.errors: list[str] = []  # unexpected handler exceptions: a test asserts none
        self.exchanges: list[Exchange] = []
        self._counts: Counter[str] = Counter()
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self._repos: dict[str, _Repo] = {}
        self._tokens: dict[str, _Principal] = {}
        self._workspaces: dict[str, _Workspace] = {}
        self._clock_offset = 0.0
        self._serial = 0
        # fault switches
        self._delay_s = 0.0
        self._delay_route = ""
        self._busy_left = 0
        self._busy_retry_after_ms = 0
        self._unavailable = False
        self._drop_left = 0
        self._triggers: list[_Trigger] = []
        self._routes = self._route_table()
        self._listings: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeTreeDX:
        """Listen on 127.0.0.1 (port 0 the first time, the same port after a `stop`)."""
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", self._port), self)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name=f"fake-treedx-{self._port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every connection (the data stays for a later `start`)."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()
        server.shutdown()
        with server.live_lock:
            live = list(server.live)
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        server.server_close()
        thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeTreeDX:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def remote(self, repository: str) -> str:
        return f"treedx+{self.base_url}/{repository}"

    # --- tokens ------------------------------------------------------------------------------

    def issue_token(self, actor: str = "actor_demo", tenant: str = "tenant_demo",
                    expires_in_seconds: float | None = None) -> str:
        token = "tdx_" + secrets.token_urlsafe(24)
        expires = None if expires_in_seconds is None else self._now() + expires_in_seconds
        with self._lock:
            self._tokens[token] = _Principal(actor, tenant, expires)
        return token

    def revoke(self, token: str) -> None:
        """Every later request with this token gets 401 `authentication_required`."""
        with self._lock:
            self._tokens.pop(token, None)

    # --- fault switches ------------------------------------------------------------------------

    def slow(self, seconds: float, route: str = "") -> None:
        """Delay every answer (or those whose route template ends with `route`)."""
        with self._lock:
            self._delay_s, self._delay_route = seconds, route

    def busy(self, times: int, retry_after_ms: int) -> None:
        """The next `times` protected requests get 503 `server_busy` with `retryAfterMs`."""
        with self._lock:
            self._busy_left, self._busy_retry_after_ms = times, retry_after_ms

    def unavailable(self, on: bool = True) -> None:
        """Every protected request gets 503 `service_unavailable` until switched off."""
        with self._lock:
            self._unavailable = on

    def drop(self, times: int) -> None:
        """The next `times` requests are read and then the connection is closed, unanswered."""
        with self._lock:
            self._drop_left = times

    def after(self, route: str, count: int, action: Callable[[], None]) -> None:
        """Run `action` once, right after the `count`-th request whose route ends with `route`
        is computed (before its answer is sent)."""
        with self._lock:
            self._triggers.append(_Trigger(route, count, action))

    def advance(self, seconds: float) -> None:
        """Move the fake's clock (lease and token expiry) forward."""
        with self._lock:
            self._clock_offset += seconds

    def quarantine(self, repository: str) -> None:
        """Revoke the permissions of every open workspace of the repository."""
        with self._lock:
            repo = self._repo_by_name(repository)
            for ws in self._workspaces.values():
                if ws.repo is repo and ws.status == "ready":
                    ws.status = "quarantined"

    def move_head(self, repository: str, files: Mapping[str, bytes | None],
                  message: str = "out-of-band change", branch: str = MAIN) -> str:
        """An out-of-band commit on the branch (another client, an admin, a mirror sync)."""
        with self._lock:
            repo = self._repo_by_name(repository)
            parent = repo.commits[repo.branches[branch]]
            tree = dict(parent.tree)
            for path, data in files.items():
                if data is None:
                    tree.pop(path, None)
                else:
                    tree[path] = data
            commit = self._new_commit(repo, parent.sha, tree, message, "out-of-band")
            repo.branches[branch] = commit.sha
            return commit.sha

    # --- introspection -------------------------------------------------------------------------

    def count(self, route: str = "") -> int:
        """Requests whose `METHOD template` ends with `route` ("" counts every request)."""
        with self._lock:
            return sum(n for key, n in self._counts.items() if key.endswith(route))

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()
            self.exchanges.clear()

    def head(self, repository: str, branch: str = MAIN) -> str:
        with self._lock:
            return self._repo_by_name(repository).branches[branch]

    def tree(self, repository: str, branch: str = MAIN) -> dict[str, bytes]:
        with self._lock:
            repo = self._repo_by_name(repository)
            return dict(repo.commits[repo.branches[branch]].tree)

    def commit_log(self, repository: str, branch: str = MAIN) -> list[tuple[str, str, str]]:
        """(sha, author, message) from the head back to the initial commit."""
        with self._lock:
            repo = self._repo_by_name(repository)
            out = []
            sha: str | None = repo.branches[branch]
            while sha is not None:
                commit = repo.commits[sha]
                out.append((commit.sha, commit.author, commit.message))
                sha = commit.parent
            return out

    def overwritten(self, repository: str) -> list[str]:
        """Heads that a commit moved the branch away from without having seen them."""
        with self._lock:
            return list(self._repo_by_name(repository).overwritten)

    def lease_holders(self, repository: str) -> int:
        with self._lock:
            repo = self._repo_by_name(repository)
            return sum(1 for ws in self._workspaces.values()
                       if ws.repo is repo and ws.holds_lease and not self._expired(ws))

    def seed(self, repository: str, files: Mapping[str, bytes]) -> str:
        """Create the repository (if needed) and commit `files` to main in one commit."""
        with self._lock:
            repo = self._create_repo(repository, MAIN)
        return self.move_head(repo.name, files, message="seed")

    # --- HTTP plumbing -------------------------------------------------------------------------

    def _route_table(self) -> list[tuple[str, re.Pattern[str], str, Callable[..., Any], bool]]:
        table: list[tuple[str, str, Callable[..., Any], bool]] = [
            ("GET", "/api/v1/health", self._h_health, True),
            ("POST", "/api/v1/auth/dev-token", self._h_dev_token, True),
            ("POST", "/api/v1/repos", self._h_create_repo, False),
            ("POST", "/api/v1/repos/{repo_id}/paths/list", self._h_paths_list, False),
            ("POST", "/api/v1/repos/{repo_id}/files/read", self._h_files_read, False),
            ("POST", "/api/v1/repos/{repo_id}/workspaces", self._h_open_workspace, False),
            ("GET", "/api/v1/workspaces/{workspace_id}", self._h_get_workspace, False),
            ("POST", "/api/v1/workspaces/{workspace_id}/close", self._h_close, False),
            ("PUT", "/api/v1/workspaces/{workspace_id}/files", self._h_put_file, False),
            ("DELETE", "/api/v1/workspaces/{workspace_id}/files", self._h_delete_file, False),
            ("GET", "/api/v1/workspaces/{workspace_id}/status", self._h_status, False),
            ("POST", "/api/v1/workspaces/{workspace_id}/commit", self._h_commit, False),
        ]
        out = []
        for method, template, handler, public in table:
            pattern = re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template) + r"\Z")
            out.append((method, pattern, template, handler, public))
        return out

    def _serve(self, handler: _Handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        parts = urlsplit(handler.path)
        method = handler.command
        answer = self._answer(method, parts.path, parse_qs(parts.query), handler.headers, raw)
        if answer is _DROP:
            handler.close_connection = True  # hang up without a status line
            return
        assert isinstance(answer, tuple)
        status, body = answer
        payload = json.dumps(body).encode("utf-8")
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _answer(self, method: str, path: str, query: dict[str, list[str]], headers: Any,
                raw: bytes) -> object:
        route = None
        for m, pattern, template, fn, public in self._routes:
            match = pattern.match(path)
            if match and m == method:
                route = (template, fn, public, match.groupdict())
                break
        key = f"{method} {route[0] if route else '(unmatched)'}"
        with self._lock:
            self._counts[key] += 1
            if self._drop_left > 0:
                self._drop_left -= 1
                return _DROP
            delay = self._delay_s if key.endswith(self._delay_route) else 0.0
        if delay:
            self._stopping.wait(delay)
        status, body = self._compute(method, route, query, headers, raw)
        with self._lock:
            if route is not None:
                self.exchanges.append(Exchange(method, route[0], status, body))
            fired = []
            for trigger in self._triggers:
                if key.endswith(trigger.route):
                    trigger.seen += 1
                    if trigger.seen == trigger.after:
                        fired.append(trigger)
            self._triggers = [t for t in self._triggers if t not in fired]
        for trigger in fired:
            trigger.action()
        return status, body

    def _compute(self, method: str, route: Any, query: dict[str, list[str]], headers: Any,
                 raw: bytes) -> tuple[int, dict[str, Any]]:
        try:
            if route is None:
                raise _Fail(404, "not_found", f"no route for {method}")
            _template, fn, public, params = route
            with self._lock:
                if not public:
                    self._admit()
                    principal = self._authenticate(headers.get("Authorization", ""))
                else:
                    principal = None
                body = self._json(raw)
                result = fn(principal=principal, body=body, query=query, **params)
            return 200, {**result, "ok": True}
        except _Fail as fail:
            error: dict[str, Any] = {"code": fail.code, "message": fail.message,
                                     "details": fail.details}
            return fail.status, {"ok": False, "error": error}

    def _admit(self) -> None:
        if self._unavailable:
            raise _Fail(503, "service_unavailable", "service unavailable")
        if self._busy_left > 0:
            self._busy_left -= 1
            raise _Fail(503, "server_busy", "server busy",
                        {"retryAfterMs": self._busy_retry_after_ms})

    def _authenticate(self, header: str) -> _Principal:
        scheme, _, token = header.partition(" ")
        principal = self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if principal is None or (principal.expires_at is not None
                                 and self._now() >= principal.expires_at):
            raise _Fail(401, "authentication_required", "authentication required")
        return principal

    @staticmethod
    def _json(raw: bytes) -> dict[str, Any]:
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _Fail(422, "validation_error", "request body is not JSON") from None
        if not isinstance(body, dict):
            raise _Fail(422, "validation_error", "request body must be an object")
        return body

    # --- model helpers -------------------------------------------------------------------------

    def _now(self) -> float:
        return time.monotonic() + self._clock_offset

    def _repo_by_name(self, name: str) -> _Repo:
        for repo in self._repos.values():
            if repo.name == name.lower():
                return repo
        raise KeyError(name)

    def _repo(self, repo_id: str) -> _Repo:
        repo = self._repos.get(repo_id)
        if repo is None:
            raise _Fail(404, "not_found", "repository not found")
        return repo

    def _new_commit(self, repo: _Repo, parent: str | None, tree: dict[str, bytes], message: str,
                    author: str) -> _Commit:
        self._serial += 1
        listing = "\n".join(f"{p} {git_blob_id(d)}" for p, d in sorted(tree.items()))
        text = f"tree {listing}\nparent {parent}\nauthor {author}\n{self._serial}\n\n{message}"
        sha = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()
        commit = _Commit(sha, parent, tree, message, author)
        repo.commits[sha] = commit
        return commit

    def _create_repo(self, raw_name: str, default_ref: str) -> _Repo:
        name = raw_name.lower()
        if not REPO_NAME.match(name) or name in RESERVED_NAMES:
            raise _Fail(422, "validation_error", "invalid repository name",
                        {"field": "repositoryName"})
        repo_id = "repo_" + hashlib.sha256(name.encode()).hexdigest()[:16]
        repo = self._repos.get(repo_id)
        if repo is None:
            repo = _Repo(repo_id, name, default_ref)
            first = self._new_commit(repo, None, {KEEP_FILE: b""}, "Initialize repository",
                                     "treedx")
            repo.branches[default_ref] = first.sha
            self._repos[repo_id] = repo
        return repo

    def _resolve(self, repo: _Repo, ref: Any) -> str:
        if ref is None:
            ref = repo.default_ref
        if not isinstance(ref, str) or not ref:
            raise _Fail(422, "validation_error", "ref must be a string")
        for candidate in (ref, f"refs/heads/{ref}"):
            if candidate in repo.branches:
                return repo.branches[candidate]
        if ref == "HEAD":
            return repo.branches[repo.default_ref]
        if ref in repo.commits:
            return ref
        raise _Fail(404, "not_found", "ref not found")

    @staticmethod
    def _check_path(path: Any) -> str:
        if not isinstance(path, str) or not path:
            raise _Fail(422, "validation_error", "path is required")
        parts = path.split("/")
        if path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
            raise _Fail(422, "validation_error", "path escapes the repository")
        return path

    def _expired(self, ws: _Workspace) -> bool:
        return ws.status == "ready" and self._now() >= ws.expires_at

    def _workspace(self, workspace_id: str, principal: _Principal) -> _Workspace:
        ws = self._workspaces.get(workspace_id)
        if ws is None:
            raise _Fail(404, "not_found", "workspace not found")
        if ws.actor != principal.actor:
            raise _Fail(403, "permission_denied", "workspace belongs to another actor")
        if self._expired(ws):
            ws.status = "expired"  # the lease ends with it
        if ws.status == "expired":
            raise _Fail(409, "conflict", "Workspace has expired")
        if ws.status == "quarantined":
            raise _Fail(409, "workspace_revoked", "workspace permissions were revoked")
        return ws

    def _open(self, workspace_id: str, principal: _Principal) -> _Workspace:
        ws = self._workspace(workspace_id, principal)
        if ws.status != "ready":
            raise _Fail(409, "conflict", f"workspace is {ws.status}")
        return ws

    def _view(self, ws: _Workspace) -> dict[str, bytes]:
        tree = dict(ws.repo.commits[ws.base_sha].tree)
        for path, data in ws.overlay.items():
            if data is None:
                tree.pop(path, None)
            else:
                tree[path] = data
        return tree

    def _flat_workspace(self, ws: _Workspace) -> dict[str, Any]:
        return {
            "workspaceId": ws.workspace_id,
            "repoId": ws.repo.repo_id,
            "baseRef": ws.base_ref,
            "baseCommitSha": ws.base_sha,
            "branchName": ws.branch,
            "mode": ws.mode,
            "status": ws.status,
            "ttlSeconds": ws.ttl,
            "createdAt": _iso(ws.created),
            "expiresAt": _iso(ws.created + timedelta(seconds=ws.ttl)),
            "allowedPaths": [],
        }

    @staticmethod
    def _file_sha(data: bytes) -> str:
        return "blake3:" + hashlib.sha256(data).hexdigest()  # stand-in, see the module doc

    # --- handlers ----------------------------------------------------------------------------

    def _h_health(self, **_: Any) -> dict[str, Any]:
        return {"status": "ok", "health": {"status": "ok"}}

    def _h_dev_token(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        actor = str(body.get("actorId") or "actor_demo")
        tenant = str(body.get("tenantId") or "tenant_demo")
        seconds = body.get("expiresInSeconds", 3600)
        if not isinstance(seconds, int) or seconds <= 0:
            raise _Fail(422, "validation_error", "expiresInSeconds must be a positive integer")
        token = self.issue_token(actor, tenant, seconds)
        expires = datetime.now(UTC) + timedelta(seconds=seconds)
        return {"accessToken": token, "tokenType": "Bearer", "expiresAt": _iso(expires),
                "principal": {"actorId": actor, "tenantId": tenant}}

    def _h_create_repo(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        name = body.get("repositoryName")
        if not isinstance(name, str):
            raise _Fail(422, "validation_error", "repositoryName is required",
                        {"field": "repositoryName"})
        default_ref = body.get("defaultRef") or MAIN
        if not isinstance(default_ref, str) or not default_ref.startswith("refs/heads/"):
            raise _Fail(422, "validation_error", "defaultRef must be a branch ref")
        repo = self._create_repo(name, default_ref)
        return {
            "repo": {"repoId": repo.repo_id, "repositoryName": repo.name, "name": repo.name,
                     "defaultRef": repo.default_ref, "status": "ready", "storageKind": "managed",
                     "remoteUrl": None},
            "placement": {"repoId": repo.repo_id, "primaryNodeId": "local", "mirrorNodeIds": [],
                          "readPolicy": "primary", "writePolicy": "primary",
                          "migrationState": "none"},
        }

    def _h_paths_list(self, repo_id: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        repo = self._repo(repo_id)
        ref = body.get("ref")
        resolved = self._resolve(repo, ref)
        limit = body.get("limit", 100)
        if (isinstance(limit, bool) or not isinstance(limit, int)
                or not 1 <= limit <= PAGE_LIMIT_MAX):
            raise _Fail(422, "validation_error", f"limit must be 1..{PAGE_LIMIT_MAX}",
                        {"field": "limit"})
        patterns = body.get("paths") or ["**"]
        kinds = body.get("kinds") or ["blob", "tree"]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise _Fail(422, "validation_error", "paths must be a list of globs")
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise _Fail(422, "validation_error", "kinds must be a list of strings")
        offset = self._decode_cursor(body.get("cursor"))
        allow = body.get("allowProtected") is True
        key = (resolved, tuple(patterns), tuple(kinds), allow)
        rows = self._listings.get(key)
        if rows is None:  # a commit never changes, so its listing is computed once
            rows = self._listing(repo.commits[resolved], patterns, kinds, allow)
            self._listings[key] = rows
        page = rows[offset : offset + limit]
        more = offset + limit < len(rows)
        return {
            "repoId": repo.repo_id,
            "ref": ref if isinstance(ref, str) else repo.default_ref,
            "resolvedRef": resolved,
            "entries": page,
            "page": {"limit": limit, "nextCursor": self._encode_cursor(offset + limit) if more
                     else None, "hasMore": more},
        }

    @staticmethod
    def _listing(commit: _Commit, patterns: list[str], kinds: list[str],
                 allow: bool) -> list[dict[str, Any]]:
        globs = [_glob(p) for p in patterns]
        rows: list[dict[str, Any]] = []
        if "blob" in kinds:
            for path, data in commit.tree.items():
                rows.append({"path": path, "name": path.rsplit("/", 1)[-1], "kind": "blob",
                             "extension": path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1]
                             else "", "objectId": commit.ids[path], "mode": "100644",
                             "size": len(data)})
        if "tree" in kinds:
            dirs = {path.rsplit("/", 1)[0] for path in commit.tree if "/" in path}
            for d in list(dirs):
                while "/" in d:
                    d = d.rsplit("/", 1)[0]
                    dirs.add(d)
            for d in dirs:
                digest = hashlib.sha1(d.encode(), usedforsecurity=False).hexdigest()
                rows.append({"path": d, "name": d.rsplit("/", 1)[-1], "kind": "tree",
                             "extension": "", "objectId": digest, "mode": "040000", "size": 0})
        rows = sorted(
            (r for r in rows
             if any(g.match(r["path"]) for g in globs) and (allow or not is_protected(r["path"]))),
            key=lambda r: str(r["path"]),
        )
        return rows

    @staticmethod
    def _encode_cursor(offset: int) -> str:
        return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")

    @staticmethod
    def _decode_cursor(cursor: Any) -> int:
        if cursor is None:
            return 0
        try:
            text = base64.urlsafe_b64decode(str(cursor) + "=" * (-len(str(cursor)) % 4))
            offset = json.loads(text)["o"]
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise _Fail(422, "validation_error", "invalid cursor", {"field": "cursor"}) from None
        if not isinstance(offset, int) or offset < 0:
            raise _Fail(422, "validation_error", "invalid cursor", {"field": "cursor"})
        return offset

    def _h_files_read(self, repo_id: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        repo = self._repo(repo_id)
        ref = body.get("ref")
        resolved = self._resolve(repo, ref)
        encoding = body.get("encoding") or "utf8"
        if encoding not in ("utf8", "base64"):
            raise _Fail(422, "validation_error", "encoding must be utf8 or base64")
        batch = "paths" in body
        paths = body.get("paths") if batch else [body.get("path")]
        if not isinstance(paths, list) or not paths:
            raise _Fail(422, "validation_error", "path or paths is required")
        checked = [self._check_path(p) for p in paths]
        tree = repo.commits[resolved].tree
        missing = [p for p in checked if p not in tree]
        if missing:  # CONTRACT.md: one missing path fails the whole batch
            raise _Fail(404, "not_found", "file not found", {"path": missing[0]})
        files = []
        for path in checked:
            data = tree[path]
            if encoding == "utf8":
                try:
                    content = data.decode("utf-8")
                except UnicodeDecodeError:
                    raise _Fail(415, "unsupported_media_type", "file is not valid UTF-8",
                                {"path": path}) from None
            else:
                content = base64.b64encode(data).decode("ascii")
            files.append({"path": path, "objectId": repo.commits[resolved].ids[path],
                          "size": len(data), "encoding": encoding, "content": content,
                          "source": "base"})
        head = {"repoId": repo.repo_id, "ref": ref if isinstance(ref, str) else repo.default_ref,
                "resolvedRef": resolved}
        return {**head, "files": files} if batch else {**head, "file": files[0]}

    def _h_open_workspace(self, repo_id: str, body: dict[str, Any], principal: _Principal,
                          **_: Any) -> dict[str, Any]:
        repo = self._repo(repo_id)
        mode = body.get("mode") or "read_only"  # CONTRACT.md: the default is read_only
        if mode not in ("writable", "read_only"):
            raise _Fail(422, "validation_error", "mode must be writable or read_only")
        ttl = body.get("ttlSeconds", DEFAULT_TTL_SECONDS)
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
            raise _Fail(422, "validation_error", "ttlSeconds must be a positive integer")
        base_ref = body.get("baseRef") or repo.default_ref
        base_sha = self._resolve(repo, base_ref)
        branch = body.get("branchName") or base_ref
        if not isinstance(branch, str) or not branch.startswith("refs/heads/"):
            raise _Fail(422, "validation_error", "branchName must be a branch ref")
        if mode == "writable":
            for ws in self._workspaces.values():
                if self._expired(ws):
                    ws.status = "expired"
                if ws.repo is repo and ws.branch == branch and ws.holds_lease:
                    # Names neither the holder nor the expiry, as the server does.
                    raise _Fail(409, "conflict", "writable lease already exists")
        ws = _Workspace(
            workspace_id="ws_" + secrets.token_hex(8), repo=repo, actor=principal.actor,
            base_ref=str(base_ref), base_sha=base_sha, branch=branch, mode=mode, ttl=ttl,
            created=datetime.now(UTC), expires_at=self._now() + ttl,
        )
        self._workspaces[ws.workspace_id] = ws
        return self._flat_workspace(ws)

    def _h_get_workspace(self, workspace_id: str, principal: _Principal,
                         **_: Any) -> dict[str, Any]:
        return self._flat_workspace(self._workspace(workspace_id, principal))

    def _h_close(self, workspace_id: str, principal: _Principal, **_: Any) -> dict[str, Any]:
        ws = self._workspace(workspace_id, principal)
        if ws.status == "ready":
            ws.status = "closed"  # the lease ends here
        return self._flat_workspace(ws)

    def _h_put_file(self, workspace_id: str, principal: _Principal, body: dict[str, Any],
                    query: dict[str, list[str]], **_: Any) -> dict[str, Any]:
        ws = self._open(workspace_id, principal)
        path = self._check_path(query.get("path", [""])[0])
        if ws.mode != "writable":
            raise _Fail(403, "permission_denied", "workspace is read-only")
        content = body.get("content")
        if not isinstance(content, str):
            raise _Fail(422, "validation_error", "content must be a string", {"field": "content"})
        data = content.encode("utf-8")
        if len(data) > FILE_LIMIT:
            raise _Fail(413, "payload_too_large", "file exceeds the size limit",
                        {"path": path, "size": len(data), "limit": FILE_LIMIT})
        expected = body.get("expectedSha")
        if expected is not None:
            current = self._view(ws).get(path)
            if current is None or self._file_sha(current) != expected:
                raise _Fail(409, "conflict", "expectedSha does not match")
        ws.overlay[path] = data
        return {"file": {"path": path, "sha": self._file_sha(data), "size": len(data),
                         "source": "overlay"}}

    def _h_delete_file(self, workspace_id: str, principal: _Principal,
                       query: dict[str, list[str]], **_: Any) -> dict[str, Any]:
        ws = self._open(workspace_id, principal)
        path = self._check_path(query.get("path", [""])[0])
        if ws.mode != "writable":
            raise _Fail(403, "permission_denied", "workspace is read-only")
        if path not in self._view(ws):
            raise _Fail(404, "not_found", "file not found", {"path": path})
        ws.overlay[path] = None
        return {"workspaceId": ws.workspace_id, "path": path, "op": "delete"}

    def _changes(self, ws: _Workspace) -> list[dict[str, str]]:
        base = ws.repo.commits[ws.base_sha].tree
        view = self._view(ws)
        out = []
        for path in sorted(set(base) | set(view)):
            if path not in base:
                out.append({"path": path, "status": "added"})
            elif path not in view:
                out.append({"path": path, "status": "deleted"})
            elif base[path] != view[path]:
                out.append({"path": path, "status": "modified"})
        return out

    def _h_status(self, workspace_id: str, principal: _Principal, **_: Any) -> dict[str, Any]:
        ws = self._workspace(workspace_id, principal)
        return {"workspaceId": ws.workspace_id, "status": ws.status, "changes": self._changes(ws)}

    def _h_commit(self, workspace_id: str, principal: _Principal, body: dict[str, Any],
                  **_: Any) -> dict[str, Any]:
        ws = self._open(workspace_id, principal)
        if ws.mode != "writable":
            raise _Fail(403, "permission_denied", "workspace is read-only")
        message = body.get("message")
        if not isinstance(message, str) or not message.strip():
            raise _Fail(422, "validation_error", "message is required", {"field": "message"})
        author = body.get("author") or {}
        if not isinstance(author, dict):
            raise _Fail(422, "validation_error", "author must be an object", {"field": "author"})
        changes = self._changes(ws)
        if not changes:
            raise _Fail(422, "validation_error", "no changes to commit")
        # CONTRACT.md: no compare-and-swap. The parent is the workspace's base and the branch
        # moves unconditionally; the lease is the only guard.
        who = f"{author.get('name', principal.actor)} <{author.get('email', '')}>"
        commit = self._new_commit(ws.repo, ws.base_sha, self._view(ws), message, who)
        current = ws.repo.branches.get(ws.branch)
        if current is not None and current != ws.base_sha:
            ws.repo.overwritten.append(current)  # what that head added is gone from the branch
        ws.repo.branches[ws.branch] = commit.sha
        ws.status = "committed"  # the lease ends here
        return {"repoId": ws.repo.repo_id, "workspaceId": ws.workspace_id,
                "branchName": ws.branch, "commitSha": commit.sha,
                "changedPaths": [c["path"] for c in changes], "status": "committed"}
