"""A pool file that is listed but not yet fully arrived (a synced folder still copying it) is
reported as pending by the sync report, never as a failure: `arriving` and its step."""

from __future__ import annotations

import dataclasses

from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.transport import MirrorState, PullResult
from dsh_chapters_core.projectkey import ProjectIdentity
from dsh_chapters_core.sync.run import sync
from dsh_chapters_core.sync.state import SyncReport, read_sync_state
from dsh_chapters_core.testing.fakes_transport import (
    FakeClock,
    FakeLock,
    FakeProvider,
    InMemoryPool,
    MemoryTree,
)

PK = "1c3f0000-0000-5000-8000-000000000002"
IDENTITY = ProjectIdentity(project_key=PK, canonical="example.org/acme/w", derivation="remote")
LATE = f"chapters/{PK}/s-9/001-late.md"


class HalfSyncedProvider(FakeProvider):
    """The fake pool, with one listed file whose bytes are still on their way."""

    arriving: tuple[str, ...] = (LATE,)

    def open(self) -> MirrorState:
        return dataclasses.replace(super().open(), arriving=self.arriving)

    def pull(self) -> PullResult:
        return dataclasses.replace(super().pull(), arriving=self.arriving)


def _sync(provider: FakeProvider, store: MemoryTree) -> SyncReport:
    return sync(store_tree=store, provider=provider, mirror_tree=provider.mirror,
                lock=FakeLock(), clock=FakeClock(), config=Config(knowledge_remote="fake:pool"),
                identity=IDENTITY, harness_id="box-b", mode="pull")


def test_arriving_files_are_pending_in_the_report_and_clear_when_they_arrive() -> None:
    provider = HalfSyncedProvider(InMemoryPool(), MemoryTree("mem://b/mirror"))
    store = MemoryTree("mem://b/store")
    first = _sync(provider, store)
    assert first.ok and first.arriving == 1
    assert "1 pending (not yet arrived)" in first.steps and "1 pending" in first.line()
    assert first.to_json()["arriving"] == 1
    assert read_sync_state(store).report == first  # it survives the state file
    provider.arriving = ()
    second = _sync(provider, store)
    assert second.ok and second.arriving == 0
    assert not any("not yet arrived" in step for step in second.steps)
