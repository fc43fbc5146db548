"""Networked pools for the reliability parts: `git http-backend` on loopback (the git adapter's
token-checked test server) and the TreeDX fake, each optionally behind the fault proxy, and
machines (real workspaces run through the composition root) linked to them.

Sizes here follow the suite's bounded/full pattern (conftest.py's SIZES), read from the
`results` fixture, so these parts add their own sizes without touching the shared table.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_chapters_treedx.testing import FakeTreeDX
from dulwich.objects import Commit
from dulwich.repo import Repo

from tests.acceptance.steps_common import Machine
from tests.adapters.git.conftest import GitCli, GitHttpServer
from tests.reliability.fault_proxy import FaultProxy

GIT_REPO = "widgets.git"
TREEDX_REPO = "widgets-pool"
POOL_KINDS = ("git-http", "treedx")

# name -> (bounded, full), as conftest.SIZES
SIZES: dict[str, tuple[int, int]] = {
    "fault_rounds": (1, 2),
    "networked_sigkills": (6, 16),
    "enrich_sigkills": (4, 12),
}


def pick(results: Any, name: str) -> int:
    bounded, full = SIZES[name]
    return bounded if results.bounded else full




@dataclass
class ServedPool:
    kind: str  # one of POOL_KINDS
    remote: str
    token: str
    git_path: Path | None = None  # the bare repository behind git http-backend
    fake: FakeTreeDX | None = None
    proxy: FaultProxy | None = None
    tokens: list[str] = field(default_factory=list)

    def link(self, machine: Machine) -> None:
        result = machine.ok("link", self.remote, self.token)
        assert self.token not in result.text

    def files(self) -> dict[str, bytes]:
        """Every file at the pool's head, as the server holds it."""
        if self.fake is not None:
            return {p: d for p, d in self.fake.tree(TREEDX_REPO).items()
                    if p != ".treedxkeep"}
        assert self.git_path is not None
        repo = Repo(str(self.git_path))
        out: dict[str, bytes] = {}
        try:
            if b"refs/heads/main" not in repo.refs:
                return out
            head = repo[b"refs/heads/main"]
            assert isinstance(head, Commit)
            for entry in repo.object_store.iter_tree_contents(head.tree):
                assert entry.path is not None and entry.sha is not None
                out[entry.path.decode("utf-8", "replace")] = repo[entry.sha].as_raw_string()
        finally:
            repo.close()
        return out


@contextmanager
def served_pool(kind: str, root: Path, *, proxy_stall_s: float | None = None
                ) -> Iterator[ServedPool]:
    """A pool of `kind` on loopback; with `proxy_stall_s`, behind a FaultProxy whose
    slow fault stalls that long. Every server and proxy is stopped on exit."""
    if kind == "git-http":
        served = root / "served"
        served.mkdir(parents=True)
        home = root / "backend-home"
        home.mkdir()
        token = "tok-" + secrets.token_hex(16)
        server = GitHttpServer(served, home, token).start()
        try:
            path = server.create_repo(GIT_REPO, GitCli(home))
            with _fronted(server.port, "git", proxy_stall_s) as (port, proxy):
                yield ServedPool(kind, f"http://127.0.0.1:{port}/{GIT_REPO}", token,
                                 git_path=path, proxy=proxy, tokens=[token])
        finally:
            server.stop()
        return
    assert kind == "treedx", kind
    fake = FakeTreeDX().start()
    try:
        token = fake.issue_token()
        with _fronted(fake.port, "treedx", proxy_stall_s) as (port, proxy):
            yield ServedPool(kind, f"treedx+http://127.0.0.1:{port}/{TREEDX_REPO}", token,
                             fake=fake, proxy=proxy, tokens=[token])
    finally:
        fake.stop()
    assert fake.errors == [], fake.errors


@contextmanager
def _fronted(port: int, protocol: str,
             stall_s: float | None) -> Iterator[tuple[int, FaultProxy | None]]:
    """The served port, or with `stall_s` a stalling proxy in front of it; a proxy that saw
    an error fails the run once it has stopped."""
    if stall_s is None:
        yield port, None
        return
    proxy = FaultProxy(port, protocol, stall_s=stall_s)
    try:
        yield proxy.port, proxy
    finally:
        proxy.stop()
    assert proxy.errors == [], proxy.errors


def token_leaks(tokens: list[str], *roots: Path) -> list[str]:
    """Files under `roots` whose bytes hold a live token (the credential store excepted)."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if not path.is_file() or path.is_symlink() or "credentials" in path.parts:
                continue
            data = path.read_bytes()
            found += [str(path) for t in tokens if t.encode() in data]
    return found
