"""Real pools for the git provider: bare repositories on disk, and `git http-backend` (the
reference smart-HTTP server, as CGI) behind a small threaded server on 127.0.0.1:0 that checks
the token. Plain HTTP is fine on loopback: the smart protocol is the same as over https, and
the provider refuses plain http for any non-loopback host.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderContext
from dsh_chapters_git.provider import GitProviderFactory

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
GIT = shutil.which("git")


class MemoryCredentials:
    """A `CredentialStore` in memory: the fs adapter's real one is tested with the fs adapter."""

    def __init__(self, secrets_by_name: dict[str, str] | None = None) -> None:
        self._secrets = dict(secrets_by_name or {})

    def read(self, name: str) -> str | None:
        return self._secrets.get(name)

    def write(self, name: str, secret: str) -> None:
        self._secrets[name] = secret

    def delete(self, name: str) -> None:
        self._secrets.pop(name, None)


def git_env(home: Path) -> dict[str, str]:
    """An environment for the real `git` CLI that reads no user or system config."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "human",
        "GIT_AUTHOR_EMAIL": "human@example.invalid",
        "GIT_COMMITTER_NAME": "human",
        "GIT_COMMITTER_EMAIL": "human@example.invalid",
        "LC_ALL": "C",
    }


@dataclass
class GitCli:
    """The `git` binary, used only to check what dulwich did."""

    home: Path

    def __call__(self, *args: str | Path, cwd: Path | None = None, check: bool = True) -> str:
        assert GIT is not None, "the git CLI is needed for the adapter tests (.ci/run installs it)"
        done = subprocess.run(
            [GIT, *map(str, args)],
            cwd=cwd,
            env=git_env(self.home),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"git {' '.join(map(str, args))} failed: {done.stderr}")
        return done.stdout


@pytest.fixture
def git(tmp_path: Path) -> GitCli:
    home = tmp_path / "git-home"
    home.mkdir()
    return GitCli(home)


@dataclass
class Machine:
    """One workspace with its own harness id; `provider()` makes a fresh provider for it."""

    workspace: Path
    harness_id: str
    remote: str
    credentials: MemoryCredentials
    config: Config
    opened: list[KnowledgeProvider] = field(default_factory=list)

    @property
    def mirror(self) -> Path:
        return self.workspace / ".dsh-knowledge"

    def context(self, remote: str | None = None) -> ProviderContext:
        return ProviderContext(
            remote=remote or self.remote,
            workspace=str(self.workspace),
            mirror_root=str(self.mirror),
            project_key="pk-test",
            harness_id=self.harness_id,
            config=self.config,
            credentials=self.credentials,
            credential_name="pk-test",
        )

    def provider(self, remote: str | None = None) -> KnowledgeProvider:
        made = GitProviderFactory.create(self.context(remote))
        self.opened.append(made)
        return made


MakeMachine = Callable[..., Machine]


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[MakeMachine]:
    made: list[Machine] = []

    def make(
        name: str, remote: str, *, token: str | None = None, config: Config | None = None
    ) -> Machine:
        workspace = tmp_path / "machines" / name
        workspace.mkdir(parents=True)
        creds = MemoryCredentials({"pk-test": token} if token else {})
        machine = Machine(workspace, name, remote, creds, config or Config())
        made.append(machine)
        return machine

    yield make
    for machine in made:
        for provider in machine.opened:
            provider.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: GitHttpServer

    def log_message(self, format: str, *args: object) -> None:
        self.server.log.append(format % args)  # request lines only: never a header

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _authorized(self) -> bool:
        token = self.server.token
        if token is None:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer":
            return secrets.compare_digest(value.strip(), token)
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip()).decode("utf-8")
            except ValueError:
                return False
            return secrets.compare_digest(decoded.partition(":")[2], token)
        return False

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _serve(self) -> None:
        body = self._body()
        self.server.requests += 1
        if self.server.force_status is not None:
            self._send(self.server.force_status, {"Content-Type": "text/plain"}, b"no\n")
            return
        if not self._authorized():
            self._send(401, {"WWW-Authenticate": 'Basic realm="dsh-pool"'}, b"token required\n")
            return
        path, _, query = self.path.partition("?")
        env = {
            **git_env(self.server.home),
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "pool-user",  # lets http-backend accept receive-pack
            "REMOTE_ADDR": "127.0.0.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        done = subprocess.run(
            [HTTP_BACKEND], input=body, env=env, capture_output=True, timeout=60, check=False
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = done.stdout.partition(b"\n\n")
        status = 200
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers[name.strip()] = value.strip()
        if self.server.cut_bodies and len(payload) > 1:
            payload = payload[: len(payload) // 2]  # a document that simply ends early
        self._send(status, headers, payload)


class GitHttpServer(ThreadingHTTPServer):
    """`git http-backend` on 127.0.0.1:<free port>, token-checked when `token` is set."""

    daemon_threads = True

    def __init__(self, root: Path, home: Path, token: str | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.home = home
        self.token = token
        self.log: list[str] = []
        self.requests = 0
        self.force_status: int | None = None  # answer every request with this status
        self.cut_bodies = False  # send half of each answer, its length saying that is all
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, repo: str) -> str:
        return f"http://127.0.0.1:{self.port}/{repo}"

    def create_repo(self, repo: str, git: GitCli) -> Path:
        path = self.root / repo
        git("init", "--quiet", "--bare", "-b", "main", path)
        return path

    def start(self) -> GitHttpServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def pool_token() -> str:
    return "tok-" + secrets.token_hex(16)


@pytest.fixture
def http_server(tmp_path: Path, pool_token: str) -> Iterator[GitHttpServer]:
    root = tmp_path / "served"
    root.mkdir()
    home = tmp_path / "backend-home"
    home.mkdir()
    server = GitHttpServer(root, home, pool_token).start()
    yield server
    server.stop()


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[GitHttpServer]:
    """A loopback server that asks for no token (loopback pools are exempt)."""
    root = tmp_path / "served-open"
    root.mkdir()
    home = tmp_path / "backend-home-open"
    home.mkdir()
    server = GitHttpServer(root, home, None).start()
    yield server
    server.stop()


@pytest.fixture
def refused_port() -> int:
    """A loopback port with nothing listening: connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (for timeouts)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


def files_under(root: Path) -> dict[str, bytes]:
    """Every file below `root` except `.git/`, by forward-slash relative path."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(".git/"):
            out[rel] = path.read_bytes()
    return out


def grep_tree(root: Path, needle: bytes) -> list[str]:
    """Files under `root` (including `.git/`) whose bytes contain `needle`."""
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]
