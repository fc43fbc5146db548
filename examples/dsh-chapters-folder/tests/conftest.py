"""The folder provider's tests: a maker of providers for one machine, as the kit wants it."""

from __future__ import annotations

import os

import pytest
from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderContext
from dsh_chapters_core.testing.conformance import MakeProvider
from dsh_chapters_folder.provider import FolderProviderFactory


class _NoCredentials:
    def read(self, name: str) -> str | None:
        return None

    def write(self, name: str, secret: str) -> None:
        raise AssertionError("a folder pool never stores a token")

    def delete(self, name: str) -> None:
        return None


def _make_provider(remote: str, mirror_root: str, harness_id: str) -> KnowledgeProvider:
    context = ProviderContext(
        remote=remote,
        workspace=os.path.dirname(mirror_root),
        mirror_root=mirror_root,
        project_key="pk-folder",
        harness_id=harness_id,
        config=Config(),
        credentials=_NoCredentials(),
        credential_name="pk-folder",
    )
    return FolderProviderFactory.create(context)



@pytest.fixture
def make_provider() -> MakeProvider:
    return _make_provider
