"""Fixtures for the TreeDX adapter tests: the fake server on loopback, machines, a live pool.

`pool` runs the provider suite against the fake, and a second time against a real TreeDX
service when `TREEDX_BASE_URL` and `TREEDX_TOKEN` are set. Unset, the live run is not collected
(a suite that reports skips proves nothing); set but unreachable or without a token, it fails.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from dsh_chapters_treedx.testing import FakeTreeDX

from tests.adapters.treedx.treedx_machines import LIVE_TOKEN_ENV, LIVE_URL_ENV, Machines


@pytest.fixture
def fake() -> Iterator[FakeTreeDX]:
    server = FakeTreeDX().start()
    try:
        yield server
    finally:
        server.stop()
    assert server.errors == []


@pytest.fixture
def machines(fake: FakeTreeDX, tmp_path: Path) -> Iterator[Machines]:
    """Machines over the fake, one fresh repository per test."""
    pool = Machines(tmp_path, fake.base_url, fake.issue_token(), f"pool-{uuid.uuid4().hex[:8]}")
    try:
        yield pool
    finally:
        pool.close()


def _live_pool(tmp_path: Path) -> Machines:
    base_url = os.environ.get(LIVE_URL_ENV, "").rstrip("/")
    token = os.environ.get(LIVE_TOKEN_ENV, "")
    if not token:
        pytest.fail(f"{LIVE_URL_ENV} is set but {LIVE_TOKEN_ENV} is not: the live run needs both")
    try:
        with httpx.Client(timeout=5.0) as client:
            client.get(f"{base_url}/api/v1/health")
    except httpx.HTTPError as exc:
        pytest.fail(f"{LIVE_URL_ENV}={base_url} is set but unreachable ({type(exc).__name__})")
    return Machines(tmp_path, base_url, token, f"dsh-chapters-live-{uuid.uuid4().hex[:10]}")


# The live run is collected only when a server is named, so the default suite skips nothing.
POOLS = ["fake", "live"] if os.environ.get(LIVE_URL_ENV, "").strip() else ["fake"]


@pytest.fixture(params=POOLS)
def pool(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Machines]:
    """The provider suite's pool: the fake always, a real server when configured."""
    if request.param == "live":
        handle = _live_pool(tmp_path)
        try:
            yield handle
        finally:
            handle.close()
        return
    yield request.getfixturevalue("machines")


@pytest.fixture
def chapter() -> Callable[..., tuple[str, bytes]]:
    def make(session: str, number: int, body: str = "") -> tuple[str, bytes]:
        path = f"chapters/pk/{session}/{number:03d}-work.md"
        text = f"---\ntitle: chapter {number} of {session}\n---\n{body or 'verbatim turn'}\n"
        return path, text.encode("utf-8")

    return make
