"""The core's provider conformance suite, run against the TreeDX provider (fake and live)."""

from __future__ import annotations

import uuid

import pytest
from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderContext
from dsh_chapters_core.testing.conformance import CHECKS, Check, run_check
from dsh_chapters_treedx.provider import TreeDXProvider

from tests.adapters.treedx.treedx_machines import TEST_CONFIG, Machines, MemoryCredentials

# Concurrent pushes really sleep between lease retries: the loser must outwait the winner's
# commit and then see DIVERGED, never time out.
CONFORMANCE_CONFIG = TEST_CONFIG.replace(treedx_lease_retries=20, treedx_lease_retry_delay_ms=100)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_conformance(check: Check, pool: Machines) -> None:
    def make_pool() -> str:
        return f"treedx+{pool.base_url}/{pool.repository}-{uuid.uuid4().hex[:6]}"

    def make_provider(remote: str, mirror_root: str, harness_id: str) -> KnowledgeProvider:
        credentials = MemoryCredentials()
        credentials.write("pool", pool.token)
        context = ProviderContext(
            remote=remote, workspace=mirror_root.rsplit("/", 1)[0], mirror_root=mirror_root,
            project_key="0f0e0d0c-0b0a-5908-8706-050403020100", harness_id=harness_id,
            config=CONFORMANCE_CONFIG, credentials=credentials, credential_name="pool",
        )
        return TreeDXProvider(context)

    run_check(check, make_pool, make_provider)
