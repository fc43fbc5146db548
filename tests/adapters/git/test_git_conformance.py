"""The core's provider conformance suite, run against the git provider on real pools:
a local-path bare repository, and `git http-backend` over loopback smart-HTTP with a token."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderContext
from dsh_chapters_core.testing.conformance import CHECKS, Check, MakePool, MakeProvider, run_check
from dsh_chapters_git.provider import GitProviderFactory

from tests.adapters.git.conftest import GitCli, GitHttpServer, MemoryCredentials

_counter = itertools.count()


def _maker(token: str | None) -> MakeProvider:
    def make(remote: str, mirror_root: str, harness_id: str) -> KnowledgeProvider:
        context = ProviderContext(
            remote=remote,
            workspace=os.path.dirname(mirror_root),
            mirror_root=mirror_root,
            project_key="pk-test",
            harness_id=harness_id,
            config=Config(),
            credentials=MemoryCredentials({"pk-test": token} if token else {}),
            credential_name="pk-test",
        )
        return GitProviderFactory.create(context)

    return make


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_git_local_pool_conforms(check: Check, tmp_path: Path) -> None:
    def make_pool() -> str:
        return str(tmp_path / f"pool-{next(_counter)}.git")  # absent: the first open creates it

    run_check(check, make_pool, _maker(None))


@pytest.mark.slow
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_git_http_pool_conforms(
    check: Check, http_server: GitHttpServer, git: GitCli, pool_token: str
) -> None:
    def make_pool() -> str:
        name = f"pool-{next(_counter)}.git"
        http_server.create_repo(name, git)
        return http_server.url(name)

    pool_maker: MakePool = make_pool
    run_check(check, pool_maker, _maker(pool_token))
