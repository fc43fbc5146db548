"""The sync use case on fakes: layout, ownership, copy-in/out, divergence, local-only (§3, §5)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pytest
from dsh_chapters_core.config import Config
from dsh_chapters_core.errors import ChaptersError, FailureCode, UsageError
from dsh_chapters_core.pool_layout import (
    Ownership,
    PoolFileKind,
    frontmatter_value,
    name_problem,
    path_problem,
    project_manifest,
    to_pool,
    to_store,
)
from dsh_chapters_core.projectkey import ProjectIdentity
from dsh_chapters_core.sync.copy import pool_chapters
from dsh_chapters_core.sync.run import (
    PushDecision,
    decide_push,
    push_after_archive,
    select_provider,
    sync,
)
from dsh_chapters_core.sync.state import (
    QUARANTINE_PATH,
    STATE_PATH,
    SyncReport,
    SyncState,
    iter_pool_lines,
    quarantine_rows,
    read_sync_state,
    write_sync_state,
)
from dsh_chapters_core.testing.fakes_transport import (
    FakeClock,
    FakeLock,
    FakeProvider,
    FakeProviderFactory,
    InMemoryPool,
    MemoryTree,
)
from hypothesis import given
from hypothesis import strategies as st

PK = "1c3f0000-0000-5000-8000-000000000001"
IDENTITY = ProjectIdentity(project_key=PK, canonical="github.com/acme/widgets", derivation="remote")
SHA = "ab" + "0" * 62


def chapter_text(harness_id: str, title: str, body: str = "body") -> bytes:
    return (
        f'---\nharnessId: "{harness_id}"\nharness: "dsh"\ntitle: "{title}"\n'
        f'date: "2026-11-30T08:00:00Z"\n---\n{body}\n'
    ).encode()


@dataclass
class Machine:
    harness_id: str
    pool: InMemoryPool
    config: Config = field(default_factory=lambda: Config(knowledge_remote="fake:pool"))
    store: MemoryTree = field(default_factory=lambda: MemoryTree("mem://store"))
    lock: FakeLock = field(default_factory=FakeLock)
    clock: FakeClock = field(default_factory=FakeClock)
    provider: FakeProvider = field(init=False)

    def __post_init__(self) -> None:
        self.provider = FakeProvider(self.pool, MemoryTree(f"mem://{self.harness_id}/mirror"))
        self.provider.lock_probe = lambda: self.lock.held

    @property
    def mirror(self) -> MemoryTree:
        return self.provider.mirror

    def archive(self, sid: str, chapters: int = 1, start: int = 1) -> None:
        self.store.write(
            f"{sid}/session.json",
            json.dumps(
                {
                    "sessionId": sid,
                    "harnessId": self.harness_id,
                    "harness": "dsh",
                    "projectKey": PK,
                    "source": "x.jsonl",
                    "watermark": 9,
                }
            ).encode(),
        )
        for n in range(start, start + chapters):
            self.store.write(
                f"{sid}/chapters/{n:03d}-topic-{n}.md",
                chapter_text(self.harness_id, f"{sid} chapter {n}"),
            )
        lines = b"".join(b'{"turn":%d}\n' % n for n in range(1, start + chapters))
        self.store.write(f"{sid}/collections.jsonl", lines)

    def sync(self, mode: str = "full") -> SyncReport:
        return sync(
            store_tree=self.store,
            provider=self.provider,
            mirror_tree=self.mirror,
            lock=self.lock,
            clock=self.clock,
            config=self.config,
            identity=IDENTITY,
            harness_id=self.harness_id,
            mode=mode,
        )


@pytest.fixture
def pool() -> InMemoryPool:
    return InMemoryPool()


# ---------------------------------------------------------------------------------------------
# pool_layout


@pytest.mark.parametrize(
    ("store", "pool_path", "kind"),
    [
        ("s1/chapters/001-auth.md", f"chapters/{PK}/s1/001-auth.md", PoolFileKind.CHAPTER),
        (f"artifacts/ab/{SHA}.txt", f"artifacts/{PK}/ab/{SHA}", PoolFileKind.ARTIFACT),
        ("s1/collections.jsonl", f"collections/{PK}/s1.jsonl", PoolFileKind.COLLECTION),
        ("rules/box-a/001-style-tabs.md", f"rules/{PK}/box-a/001-style-tabs.md", PoolFileKind.RULE),
        ("edits/box-a/curation.jsonl", "edits/box-a/curation.jsonl", PoolFileKind.EDITS),
    ],
)
def test_layout_maps_both_ways(store: str, pool_path: str, kind: PoolFileKind) -> None:
    out = to_pool(store, PK)
    assert out is not None and out.pool_path == pool_path and out.kind is kind
    back = to_store(pool_path, PK)
    assert back is not None and back.store_path == store and back.kind is kind


@pytest.mark.parametrize(
    "store",
    [
        "index/auth.md",
        "index/manifest.json",
        "topics/vocabulary.json",
        "state/sync.json",
        "logs/archive.log",
        "cache/q.json",
        "config.toml",
        "s1/session.json",
        "s1/notes.txt",
        "artifacts/zz/" + SHA + ".txt",
        "artifacts/ab/short.txt",
        "edits/box-a/other.jsonl",
        "../s1/chapters/001-x.md",
        "s1/chapters/../../x/chapters/001-x.md",
        ".hidden/chapters/001-x.md",
    ],
)
def test_local_and_derived_files_never_leave_the_machine(store: str) -> None:
    assert to_pool(store, PK) is None


@pytest.mark.parametrize(
    "pool_path",
    [
        "index/auth.md",
        "topics/vocabulary.json",
        "project.yml",
        f"chapters/{PK}/../../etc/001-x.md",
        f"chapters/{PK}/s1/../001-x.md",
        f"chapters/{PK}/state/001-x.md",
        "chapters/other-project/s1/001-x.md",
        f"rules/{PK}/001-x.md",
        "edits/box-a/../../x/curation.jsonl",
    ],
)
def test_copy_in_refuses_derived_foreign_and_climbing_paths(pool_path: str) -> None:
    assert to_store(pool_path, PK) is None


segment = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=12).filter(
    lambda s: s not in {"index", "topics", "state", "logs", "cache"}
)


@given(sid=segment, number=st.integers(min_value=1, max_value=999), slug=segment)
def test_chapter_paths_round_trip(sid: str, number: int, slug: str) -> None:
    store = f"{sid}/chapters/{number:03d}-{slug}.md"
    entry = to_pool(store, PK)
    assert entry is not None and entry.session_id == sid
    back = to_store(entry.pool_path, PK)
    assert back is not None and back.store_path == store


def test_ownership_follows_session_json_and_path_segments() -> None:
    own = Ownership("box-a", (("s-theirs", "box-b"), ("s-unknown", "")))
    mine = to_pool("s-mine/chapters/001-x.md", PK)
    theirs = to_pool("s-theirs/chapters/001-x.md", PK)
    unknown = to_pool("s-unknown/collections.jsonl", PK)
    art = to_pool(f"artifacts/ab/{SHA}.txt", PK)
    edits_b = to_pool("edits/box-b/curation.jsonl", PK)
    rule_a = to_pool("rules/box-a/001-x-y.md", PK)
    assert mine and theirs and unknown and art and edits_b and rule_a
    assert own.is_ours(mine) and own.is_ours(art) and own.is_ours(rule_a)
    assert not own.is_ours(theirs) and not own.is_ours(unknown) and not own.is_ours(edits_b)


def test_frontmatter_value_reads_json_scalars() -> None:
    text = b'---\nharnessId: "box-a"\ntopics: ["x"]\nplain: value\n---\nharnessId: "body"\n'
    assert frontmatter_value(text, "harnessId") == "box-a"
    assert frontmatter_value(text, "topics") == '["x"]'
    assert frontmatter_value(text, "plain") == "value"
    assert frontmatter_value(text, "missing") == ""
    assert frontmatter_value(b"no frontmatter", "harnessId") == ""


def test_project_manifest_is_deterministic_yaml() -> None:
    kw = dict(
        project_key=PK,
        slug="widgets",
        derivation="remote",
        created_by="box-a",
        created_at="2026-11-30T08:50:00Z",
    )
    first = project_manifest(**kw)
    assert first == project_manifest(**kw)
    assert first.decode().splitlines() == [
        'created-at: "2026-11-30T08:50:00Z"',
        'created-by: "box-a"',
        'derivation: "remote"',
        f'projectKey: "{PK}"',
        'slug: "widgets"',
    ]


# ---------------------------------------------------------------------------------------------
# the loop


def test_first_sync_clones_publishes_and_pushes(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.archive("s1", chapters=2)
    a.store.write(f"artifacts/ab/{SHA}.txt", b"big tool output")
    a.store.write("index/auth.md", b"derived")
    a.store.write("state/queue.json", b"{}")
    report = a.sync()
    assert report.ok and report.cloned and report.created_pool and report.pushed
    assert report.line() == (
        "created the pool → cloned → published 4 new, 0 already mirrored "
        "→ wrote project.yml → pushed"
    )
    assert report.published_new == 4 and report.pending == 0
    assert sorted(pool.files()) == sorted(
        [
            "project.yml",
            f"artifacts/{PK}/ab/{SHA}",
            f"chapters/{PK}/s1/001-topic-1.md",
            f"chapters/{PK}/s1/002-topic-2.md",
            f"collections/{PK}/s1.jsonl",
        ]
    )
    assert pool.authors() == ["box-a"]
    assert b'created-by: "box-a"' in pool.files()["project.yml"]
    assert not a.provider.unlocked_calls and a.lock.holds == 1  # §5.2: every verb under the lock


def test_second_sync_publishes_only_what_is_new(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.archive("s1", chapters=2)
    a.sync()
    a.archive("s1", chapters=1, start=3)
    report = a.sync()
    assert (
        report.line()
        == "opened → up to date → published 1 new, 1 changed, 2 already mirrored → pushed"
    )
    again = a.sync()
    assert (
        again.line()
        == "opened → up to date → published 0 new, 4 already mirrored → nothing to push"
    )
    assert len(pool.commits) == 2


def test_machine_b_receives_a_and_never_republishes_it(pool: InMemoryPool) -> None:
    a, b = Machine("box-a", pool), Machine("box-b", pool)
    a.archive("s-a", chapters=2)
    a.sync()
    b.archive("s-b", chapters=1)
    report = b.sync()
    assert report.ok and report.copied_in_new == 3 and report.published_new == 2
    assert b.store.read("s-a/chapters/001-topic-1.md") == a.store.read(
        "s-a/chapters/001-topic-1.md"
    )
    meta = json.loads(b.store.read("s-a/session.json"))
    assert meta["harnessId"] == "box-a" and meta["source"] == "pool" and meta["sessionId"] == "s-a"
    assert "project.yml" not in b.store.files
    assert pool.authors() == ["box-a", "box-b"]
    # A later foreign change (an enrichment write, an appended collection) flows in; B never
    # writes A's files back.
    a.store.write("s-a/chapters/001-topic-1.md", chapter_text("box-a", "enriched title"))
    a.sync()
    report = b.sync()
    assert (
        report.copied_in_changed == 1
        and report.published_new == 0
        and report.published_changed == 0
    )
    assert b"enriched title" in b.store.read("s-a/chapters/001-topic-1.md")
    assert json.loads(a.store.read("s-b/session.json"))["harnessId"] == "box-b"


def test_our_own_files_are_never_overwritten_from_the_pool(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.archive("s1")
    a.sync()
    # Someone edits A's chapter in the pool by hand: the store stays the truth and re-publishes.
    files = pool.files()
    files[f"chapters/{PK}/s1/001-topic-1.md"] = b"tampered"
    pool.advance(pool.head, "intruder", "edit", files)
    report = a.sync()
    assert a.store.read("s1/chapters/001-topic-1.md") == chapter_text("box-a", "s1 chapter 1")
    assert report.published_changed == 1
    assert pool.files()[f"chapters/{PK}/s1/001-topic-1.md"] == chapter_text("box-a", "s1 chapter 1")


def test_curation_only_change_is_committed_and_pushed(pool: InMemoryPool) -> None:
    a, b = Machine("box-a", pool), Machine("box-b", pool)
    a.archive("s1")
    a.sync()
    a.store.write("edits/box-a/curation.jsonl", b'{"type":"note","path":"x","text":"y"}\n')
    report = a.sync()
    assert report.pushed and report.published_new == 1
    assert "edits/box-a/curation.jsonl" in pool.files()
    b.store.write("edits/box-b/curation.jsonl", b'{"type":"note"}\n')
    b.sync()
    a.store.write("edits/box-a/curation.jsonl", b'{"type":"note"}\n{"type":"note"}\n')
    a.sync()
    report = b.sync()
    assert report.copied_in_changed == 1  # A's grown edits file
    assert b.store.read("edits/box-b/curation.jsonl") == b'{"type":"note"}\n'
    assert pool.files()["edits/box-a/curation.jsonl"] == b'{"type":"note"}\n{"type":"note"}\n'


def test_foreign_session_seen_before_its_chapters_gets_its_writer_later(pool: InMemoryPool) -> None:
    a, b = Machine("box-a", pool), Machine("box-b", pool)
    a.store.write("s1/session.json", json.dumps({"harnessId": "box-a"}).encode())
    a.store.write("s1/collections.jsonl", b'{"turn":1}\n')
    a.sync()
    b.sync()
    assert json.loads(b.store.read("s1/session.json"))["harnessId"] == ""
    a.archive("s1", chapters=1)
    a.sync()
    report = b.sync()
    assert json.loads(b.store.read("s1/session.json"))["harnessId"] == "box-a"
    assert report.published_new == 0 and report.published_changed == 0


def test_pool_index_topics_and_other_projects_stay_out_of_the_store(pool: InMemoryPool) -> None:
    pool.exists = True
    pool.advance(
        "",
        "box-z",
        "seed",
        {
            "index/auth.md": b"x",
            "topics/vocabulary.json": b"{}",
            "chapters/other/s9/001-x.md": b"x",
            f"chapters/{PK}/s1/001-x.md": chapter_text("box-z", "t"),
            "project.yml": b"projectKey: x\n",
        },
    )
    a = Machine("box-a", pool)
    report = a.sync()
    assert sorted(a.store.files) == ["s1/chapters/001-x.md", "s1/session.json", STATE_PATH]
    assert report.copied_in_new == 1
    assert pool.files()["project.yml"] == b"projectKey: x\n"  # written only if absent


def mirror_index(tree: MemoryTree) -> dict[str, bytes]:
    """A stand-in derive: one shard line per chapter in the mirror, plus a stray path."""
    names = sorted(tree.list(f"chapters/{PK}/"))
    return {
        "index/manifest.json": json.dumps({"chapters": names}).encode(),
        "index/topic.md": "".join(f"{n}\n" for n in names).encode(),
        "topics/vocabulary.json": b"{}\n",
        f"chapters/{PK}/s9/001-stray.md": b"not derived",  # §10.2: dropped, never staged
    }


def test_derived_index_lands_in_the_pool_commit_and_replaces_a_divergent_one(
    pool: InMemoryPool,
) -> None:
    pool.exists = True
    pool.advance("", "box-z", "seed", {"index/topic.md": b"stale, from another machine\n"})
    a = Machine("box-a", pool)
    a.archive("s1")
    report = sync(
        store_tree=a.store,
        provider=a.provider,
        mirror_tree=a.mirror,
        lock=a.lock,
        clock=a.clock,
        config=a.config,
        identity=IDENTITY,
        harness_id=a.harness_id,
        derive=lambda: mirror_index(a.mirror),
    )
    assert report.ok and report.pushed
    files = pool.files()
    chapter = f"chapters/{PK}/s1/001-topic-1.md"
    assert files["index/topic.md"] == f"{chapter}\n".encode()  # rebuilt bytes, not merged
    assert json.loads(files["index/manifest.json"]) == {"chapters": [chapter]}
    assert files["topics/vocabulary.json"] == b"{}\n"
    assert f"chapters/{PK}/s9/001-stray.md" not in files
    assert len(pool.commits) == 2 and chapter in files  # one commit carries store and index
    assert not any(p.startswith(("index/", "topics/")) for p in a.store.files)


def test_derived_index_is_rederived_after_a_push_divergence(pool: InMemoryPool) -> None:
    a, b = Machine("box-a", pool), Machine("box-b", pool)
    a.archive("s-a")
    b.archive("s-b")
    b.provider.before_push = lambda: a.sync() and None  # A pushes between B's commit and push
    report = sync(
        store_tree=b.store,
        provider=b.provider,
        mirror_tree=b.mirror,
        lock=b.lock,
        clock=b.clock,
        config=b.config,
        identity=IDENTITY,
        harness_id=b.harness_id,
        derive=lambda: mirror_index(b.mirror),
    )
    assert report.ok and report.rebuilds == 1
    shard = pool.files()["index/topic.md"].decode().splitlines()
    assert shard == [f"chapters/{PK}/s-a/001-topic-1.md", f"chapters/{PK}/s-b/001-topic-1.md"]


def test_push_divergence_rebuilds_and_republishes_without_merge(pool: InMemoryPool) -> None:
    a, b = Machine("box-a", pool), Machine("box-b", pool)
    a.archive("s-a")
    b.archive("s-b")
    a.sync()
    b.sync()
    a.archive("s-a", chapters=1, start=2)
    b.archive("s-b", chapters=1, start=2)
    b.provider.before_push = lambda: a.sync() and None  # A pushes between B's commit and push
    report = b.sync()
    assert report.ok and report.rebuilds == 1 and report.pushed
    assert "push diverged → rebuilt" in report.line()
    files = pool.files()
    assert (
        f"chapters/{PK}/s-a/002-topic-2.md" in files
        and f"chapters/{PK}/s-b/002-topic-2.md" in files
    )
    assert all(c.parent == p.id for p, c in zip(pool.commits, pool.commits[1:], strict=False))
    a.sync()
    assert a.mirror.files == b.mirror.files == pool.files()  # both converge


def test_divergence_retries_are_bounded(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool, config=Config(knowledge_remote="fake:pool", sync_rebuild_retries=2))
    a.archive("s1")
    a.provider.fail_next("push", FailureCode.DIVERGED, times=5)
    report = a.sync()
    assert not report.ok and report.failure_code == "diverged" and report.rebuilds == 2
    assert a.provider.calls.count("push") == 3
    assert report.line() == "local-only — push: diverged (injected at push) · 2 pending"


def test_pull_divergence_rebuilds(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.archive("s1")
    a.sync()
    a.provider.fail_next("pull", FailureCode.DIVERGED)
    report = a.sync()
    assert (
        report.ok
        and report.rebuilds == 1
        and report.steps[:3] == ("opened", "pull diverged", "rebuilt")
    )


def test_network_failure_is_local_only_with_numbers_and_recovers(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.archive("s1")
    a.sync()
    a.archive("s1", chapters=2, start=2)
    a.provider.fail_next("push", FailureCode.NETWORK)
    report = a.sync()
    # 2 new chapters + the grown collections file, committed in the mirror but not pushed.
    assert not report.ok and report.local_only
    assert report.line() == "local-only — push: network (injected at push) · 3 pending"
    state = read_sync_state(a.store)
    assert state.report == report and len(state.unpushed) == 3
    pool.reachable = False
    offline = a.sync()
    assert offline.failure_step == "open" and offline.pending == 3
    assert offline.line() == "local-only — open: network (connection refused) · 3 pending"
    pool.reachable = True
    back = a.sync()
    assert back.ok and back.pushed and back.pending == 0
    assert f"chapters/{PK}/s1/003-topic-3.md" in pool.files()
    assert read_sync_state(a.store).unpushed == ()


def test_never_reachable_pool_counts_every_file_pending(pool: InMemoryPool) -> None:
    pool.reachable = False
    a = Machine("box-a", pool)
    a.archive("s1", chapters=3)
    a.store.write(f"artifacts/ab/{SHA}.txt", b"x")
    report = a.sync()
    assert report.local_only and report.pending == 5 and report.failure_code == "network"


def test_auth_failure_carries_the_code(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.archive("s1")
    a.provider.fail_next("open", FailureCode.AUTH)
    report = a.sync()
    assert report.failure_code == "auth" and report.failure_step == "open" and report.pending == 2


def test_pull_mode_never_publishes_and_push_mode_never_copies_in(pool: InMemoryPool) -> None:
    a, b = Machine("box-a", pool), Machine("box-b", pool)
    a.archive("s-a")
    a.sync()
    b.archive("s-b")
    pulled = b.sync("pull")
    assert pulled.copied_in_new == 2 and "push" not in b.provider.calls and pulled.pending == 2
    a.archive("s-a2")
    a.sync()
    pushed = b.sync("push")
    assert pushed.ok and pushed.copied_in_new == 0 and "pull" not in b.provider.calls
    assert not b.store.exists("s-a2/session.json")
    assert f"chapters/{PK}/s-b/001-topic-1.md" in pool.files()


def test_refused_files_stay_pending(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.provider.refuse_over = 300
    a.archive("s1")
    big = chapter_text("box-a", "big", "x" * 500)
    a.store.write("s1/chapters/002-big.md", big)
    report = a.sync()
    assert report.ok and report.refused == ((f"chapters/{PK}/s1/002-big.md", len(big)),)
    assert report.pending == 1 and "1 refused by the transport" in report.line()


def test_report_round_trips_through_the_state_file(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.archive("s1")
    report = a.sync()
    raw = json.loads(a.store.read(STATE_PATH))
    assert raw["report"]["line"] == report.line()
    assert SyncReport.from_json(raw["report"]) == report
    a.store.write(STATE_PATH, b"not json")
    assert read_sync_state(a.store) == SyncState()


# ---------------------------------------------------------------------------------------------
# the debounced push


def test_decide_push_coalesces_within_the_window() -> None:
    at = "2026-11-30T08:50:00Z"
    assert decide_push(now=at, last_push_at="", push_due_at="", debounce_ms=30000).push_now
    assert decide_push(now=at, last_push_at=at, push_due_at="", debounce_ms=0).push_now
    later = decide_push(
        now="2026-11-30T08:50:10Z", last_push_at=at, push_due_at="", debounce_ms=30000
    )
    assert later == PushDecision(False, "2026-11-30T08:50:30Z", later.reason)
    assert "10000 ms ago" in later.reason
    due = decide_push(
        now="2026-11-30T08:50:31Z",
        last_push_at=at,
        push_due_at="2026-11-30T08:50:30Z",
        debounce_ms=30000,
    )
    assert due.push_now and due.reason == "a deferred push is due"


def test_push_after_archive_defers_then_delivers(pool: InMemoryPool) -> None:
    a = Machine("box-a", pool)
    a.archive("s1")
    first = push_after_archive(
        store_tree=a.store,
        lock=a.lock,
        clock=a.clock,
        config=a.config,
        run_push=lambda: a.sync("push"),
    )
    assert isinstance(first, SyncReport) and first.pushed
    a.clock.advance(5000)
    a.archive("s1", chapters=1, start=2)
    second = push_after_archive(
        store_tree=a.store,
        lock=a.lock,
        clock=a.clock,
        config=a.config,
        run_push=lambda: a.sync("push"),
    )
    assert isinstance(second, PushDecision) and not second.push_now
    state = read_sync_state(a.store)
    assert state.push_due_at == "2026-11-30T08:50:30Z"
    lines = list(iter_pool_lines(state.report, 2, state))
    assert lines[-1].strip().startswith("push deferred until 2026-11-30T08:50:30Z")
    a.clock.advance(26000)
    third = push_after_archive(
        store_tree=a.store,
        lock=a.lock,
        clock=a.clock,
        config=a.config,
        run_push=lambda: a.sync("push"),
    )
    assert isinstance(third, SyncReport) and third.pushed and third.published_new == 1
    assert read_sync_state(a.store).push_due_at == ""


def test_status_lines_say_never_synced_and_local_only() -> None:
    assert list(iter_pool_lines(None, 4, SyncState())) == ["sync       never synced · 4 pending"]
    bad = SyncReport(
        mode="full",
        at="T",
        harness_id="h",
        ok=False,
        failure_code="network",
        failure_step="push",
        failure_detail="connection refused",
        pending=12,
    )
    assert list(iter_pool_lines(bad, 12, SyncState())) == [
        "sync       T local-only — push: network (connection refused) · 12 pending"
    ]
    assert list(iter_pool_lines(bad, 13, SyncState()))[1].strip() == "now 13 pending"


def test_pool_chapters_list_each_writer(pool: InMemoryPool) -> None:
    a, b = Machine("box-a", pool), Machine("box-b", pool)
    a.archive("s-a")
    a.sync()
    b.archive("s-b", chapters=2)
    b.sync()
    listed = pool_chapters(b.mirror, PK)
    assert [(c.session_id, c.harness_id) for c in listed] == [
        ("s-a", "box-a"),
        ("s-b", "box-b"),
        ("s-b", "box-b"),
    ]
    assert listed[0].title == "s-a chapter 1" and listed[0].date == "2026-11-30T08:00:00Z"


def test_write_sync_state_keeps_the_schedule() -> None:
    tree = MemoryTree()
    write_sync_state(tree, SyncState(last_push_at="A", push_due_at="B", unpushed=("y", "x")))
    assert read_sync_state(tree) == SyncState(
        last_push_at="A", push_due_at="B", unpushed=("x", "y")
    )


# ---------------------------------------------------------------------------------------------
# provider selection


def test_select_provider_by_scheme_and_policy() -> None:
    git = FakeProviderFactory("git", "/")
    treedx = FakeProviderFactory("treedx", "treedx+")
    both = (git, treedx)
    assert select_provider(both, "/srv/pool.git", "auto") is git
    assert select_provider(both, "treedx+https://h/r", "auto") is treedx
    assert select_provider(both, "/srv/pool.git", "git") is git
    with pytest.raises(UsageError, match="contradicts") as info:
        select_provider(both, "treedx+https://h/r", "git")
    assert "treedx" in info.value.message
    with pytest.raises(UsageError, match="no `treedx` provider is installed"):
        select_provider((git,), "/srv/pool.git", "treedx")
    with pytest.raises(UsageError, match="no installed provider takes"):
        select_provider((git,), "ftp://x", "auto")
    with pytest.raises(UsageError, match="2 providers claim"):
        select_provider((git, FakeProviderFactory("other", "/")), "/srv/p", "auto")
    with pytest.raises(ChaptersError, match="no knowledge pool is linked"):
        select_provider(both, "", "auto")


def test_fake_factory_keeps_one_mirror_per_machine() -> None:
    from dsh_chapters_core.ports.transport import ProviderContext

    class NoCredentials:
        def read(self, name: str) -> str | None:
            return None

        def write(self, name: str, secret: str) -> None: ...

        def delete(self, name: str) -> None: ...

    factory = FakeProviderFactory()
    ctx = ProviderContext(
        remote="fake:p",
        workspace="/w",
        mirror_root="/w/.dsh-knowledge",
        project_key=PK,
        harness_id="h",
        config=Config(),
        credentials=NoCredentials(),
        credential_name=PK,
    )
    assert factory.create(ctx) is factory.create(ctx)
    assert hashlib.sha256(b"").hexdigest() == MemoryTree(files={"x": b""}).digest("x")


def test_the_quarantine_list_is_absent_beside_other_state_and_unreadable_as_a_folder() -> None:
    store = MemoryTree()
    for n in range(50):  # a reservation per session, as `state/` holds them
        store.write(f"state/reservations/s-{n}.json", b"{}")
    store.write(f"{QUARANTINE_PATH}.bak", b"a user's copy")  # beside the list, not the list
    assert quarantine_rows(store) == []  # nothing withheld
    store.write(f"{QUARANTINE_PATH}/stray", b"x")  # a folder where the list should be
    assert quarantine_rows(store) is None  # no one can tell: the whole mirror is withheld


_ELEMENTS = st.one_of(
    st.sampled_from(["", ".", "..", ".git", "GIT~1", "con", "Con.md", "nul.txt", "lpt1", "com0",
                     "conin$", "cone", "a.", "a..b", "001-x.md", "-x", "_", "a b", "é", "x\\y"]),
    st.text(alphabet="abcCOMNUL019._-", min_size=0, max_size=6),
    st.integers(min_value=195, max_value=205).map(lambda n: "a" * n),
)


@given(st.lists(_ELEMENTS, min_size=1, max_size=5))
def test_a_path_problem_is_its_first_elements_problem(elements: list[str]) -> None:
    """The fast path for plain paths says exactly what asking every element says."""
    path = "/".join(elements)
    expected = next((p for p in map(name_problem, path.split("/")) if p), "")
    assert path_problem(path) == expected
    # to_pool and to_store take a path only when every element of it is a name
    if expected:
        assert to_pool(path, "pk") is None
        assert to_store(path, "pk") is None
