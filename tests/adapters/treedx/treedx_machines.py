"""Machines over one TreeDX pool, for the adapter tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.transport import ProviderContext
from dsh_chapters_treedx.client import TreeDXClient
from dsh_chapters_treedx.provider import BRANCH, TreeDXProvider
from dsh_chapters_treedx.wire import Author, CommitRequest, OpenWorkspaceRequest

LIVE_URL_ENV = "TREEDX_BASE_URL"
LIVE_TOKEN_ENV = "TREEDX_TOKEN"
CREDENTIAL = "pool-key"
# Fast retries for tests; every other tunable keeps its documented default.
TEST_CONFIG = Config(treedx_lease_retry_delay_ms=20, treedx_fetch_timeout_ms=5000)


class MemoryCredentials:
    """A CredentialStore in a dict; records reads so tests can see the token was asked for."""

    def __init__(self) -> None:
        self.secrets: dict[str, str] = {}
        self.reads = 0

    def read(self, name: str) -> str | None:
        self.reads += 1
        return self.secrets.get(name)

    def write(self, name: str, secret: str) -> None:
        self.secrets[name] = secret

    def delete(self, name: str) -> None:
        self.secrets.pop(name, None)


@dataclass
class Machines:
    """Makes providers (one per machine and sync) over one pool; closes them all at the end."""

    tmp: Path
    base_url: str
    token: str
    repository: str
    config: Config = TEST_CONFIG
    sleeps: list[float] = field(default_factory=list)
    opened: list[TreeDXProvider] = field(default_factory=list)

    @property
    def remote(self) -> str:
        return f"treedx+{self.base_url}/{self.repository}"

    def mirror(self, machine: str) -> Path:
        return self.tmp / machine / ".dsh-knowledge"

    def provider(self, machine: str, *, token: str | None = None, remote: str | None = None,
                 config: Config | None = None) -> TreeDXProvider:
        credentials = MemoryCredentials()
        credentials.write(CREDENTIAL, self.token if token is None else token)
        context = ProviderContext(
            remote=remote or self.remote, workspace=str(self.tmp / machine),
            mirror_root=str(self.mirror(machine)), project_key="pk", harness_id=machine,
            config=config or self.config, credentials=credentials, credential_name=CREDENTIAL,
        )
        provider = TreeDXProvider(context, sleep=self.sleeps.append)
        self.opened.append(provider)
        return provider

    def close(self) -> None:
        for provider in self.opened:
            provider.close()

    def out_of_band(self, files: Mapping[str, bytes], message: str = "out-of-band") -> str:
        """Another client commits straight to main (works on the fake and on a real server)."""
        client = TreeDXClient(self.base_url, self.token,
                              timeout_ms=self.config.treedx_fetch_timeout_ms)
        try:
            repo = client.create_repository(self.repository, BRANCH)
            ws = client.open_workspace(repo.repo_id, OpenWorkspaceRequest(BRANCH, BRANCH, 60))
            for path, data in files.items():
                client.write_file(ws.workspace_id, path, data.decode("utf-8"))
            return client.commit(ws.workspace_id, CommitRequest(
                message, Author("someone-else", "someone-else@example.invalid"))).commit_sha
        finally:
            client.close()
