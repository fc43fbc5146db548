"""The provider suite: the six verbs against the fake and, when configured, a real server."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_core.ports.transport import KnowledgeProvider
from dsh_chapters_treedx.mirror import STATE_FILE, git_blob_id
from dsh_chapters_treedx.provider import FILE_LIMIT_BYTES, TreeDXProvider

from tests.adapters.treedx.treedx_machines import Machines

Chapter = Callable[..., tuple[str, bytes]]


def publish(provider: TreeDXProvider, files: dict[str, bytes], who: str = "m") -> str:
    provider.stage(files)
    provider.commit(f"publish {len(files)}", who)
    return provider.push().head


def mirror_files(pool: Machines, machine: str) -> dict[str, bytes]:
    root = pool.mirror(machine)
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != STATE_FILE
    }


def test_provider_satisfies_the_port(pool: Machines) -> None:
    provider: KnowledgeProvider = pool.provider("a")
    assert provider.name == "treedx"
    assert provider.mirror_root == str(pool.mirror("a"))


def test_open_materializes_an_empty_pool_without_treedxkeep(pool: Machines) -> None:
    state = pool.provider("a").open()
    assert state.cloned
    assert state.head == ""  # the port's empty pool, though the repo has its keep commit
    assert mirror_files(pool, "a") == {}
    assert not (pool.mirror("a") / ".treedxkeep").exists()


def test_published_files_reach_another_machine(pool: Machines, chapter: Chapter) -> None:
    a = pool.provider("a")
    a.open()
    files = dict([chapter("s1", 1), chapter("s1", 2)])
    head = publish(a, files)
    b = pool.provider("b")
    state = b.open()
    assert state.head == head
    assert mirror_files(pool, "b") == files


def test_pull_brings_only_what_changed(pool: Machines, chapter: Chapter) -> None:
    a, b = pool.provider("a"), pool.provider("b")
    a.open()
    b.open()
    path, data = chapter("s1", 1)
    head = publish(a, {path: data})
    result = b.pull()
    assert result.head_after == head and result.head_before != head
    assert result.changed_paths == (path,)
    again = b.pull()
    assert again.changed_paths == () and again.head_before == again.head_after == head
    assert again.requests == 1  # the head read only


def test_stage_counts_new_changed_unchanged(pool: Machines, chapter: Chapter) -> None:
    a = pool.provider("a")
    a.open()
    p1, d1 = chapter("s1", 1)
    p2, d2 = chapter("s1", 2)
    assert a.stage({p1: d1}).new == 1
    result = a.stage({p1: d1, p2: d2})
    assert (result.new, result.changed, result.unchanged) == (1, 0, 1)
    result = a.stage({p1: d1 + b"more"})
    assert (result.new, result.changed, result.unchanged) == (0, 1, 0)


def test_commit_without_staged_files_is_none_and_push_is_a_no_op(pool: Machines) -> None:
    a = pool.provider("a")
    a.open()
    assert a.commit("nothing", "a") is None
    before = a.requests
    result = a.push()
    assert result.pushed is False
    assert a.requests == before  # nothing to push costs no request


def test_push_is_authored_by_the_harness_id(machines: Machines, fake, chapter: Chapter) -> None:
    a = machines.provider("laptop-7")
    a.open()
    path, data = chapter("s1", 1)
    a.stage({path: data})
    changeset = a.commit("chapters: laptop-7 publishes 1 new", "laptop-7")
    assert changeset is not None and len(changeset) == 40
    head = a.push().head
    sha, author, message = fake.commit_log(machines.repository)[0]
    assert sha == head
    assert author.startswith("laptop-7 <laptop-7@")
    assert message == "chapters: laptop-7 publishes 1 new"


def test_file_over_one_mib_is_refused_and_the_rest_goes_on(
    pool: Machines, chapter: Chapter
) -> None:
    a = pool.provider("a")
    a.open()
    path, data = chapter("s1", 1)
    big = "artifacts/pk/ab/" + "a" * 64
    result = a.stage({path: data, big: b"x" * (FILE_LIMIT_BYTES + 1)})
    assert result.refused == ((big, FILE_LIMIT_BYTES + 1),)
    assert result.new == 1
    a.commit("m", "a")
    assert a.push().pushed
    b = pool.provider("b")
    b.open()
    assert mirror_files(pool, "b") == {path: data}


def test_non_utf8_bytes_are_refused_at_stage(pool: Machines) -> None:
    a = pool.provider("a")
    a.open()
    result = a.stage({"edits/a/curation.jsonl": b"\xff\xfe\x00"})
    assert result.refused == (("edits/a/curation.jsonl", 3),)


def test_head_moved_before_push_is_diverged_and_nothing_is_written(
    pool: Machines, chapter: Chapter
) -> None:
    a = pool.provider("a")
    a.open()
    path, data = chapter("s1", 1)
    a.stage({path: data})
    a.commit("m", "a")
    moved = pool.out_of_band({"chapters/pk/other/001-x.md": b"theirs\n"})
    with pytest.raises(TransportError) as caught:
        a.push()
    assert caught.value.code is FailureCode.DIVERGED
    # Never written over the unseen head: the pool is still at the out-of-band commit.
    b = pool.provider("b")
    assert b.open().head == moved
    assert path not in mirror_files(pool, "b")
    # §5.2: rebuild, re-stage from the store, push again.
    rebuilt = a.rebuild()
    assert rebuilt.head == moved
    assert path not in mirror_files(pool, "a")  # the rebuild forgot the unpushed change
    head = publish(a, {path: data})
    assert b.pull().head_after == head
    assert set(mirror_files(pool, "b")) == {path, "chapters/pk/other/001-x.md"}


def test_pull_with_unpushed_changes_and_a_moved_head_is_diverged(
    pool: Machines, chapter: Chapter
) -> None:
    a = pool.provider("a")
    a.open()
    path, data = chapter("s1", 1)
    a.stage({path: data})
    a.commit("m", "a")
    pool.out_of_band({"chapters/pk/other/001-x.md": b"theirs\n"})
    with pytest.raises(TransportError) as caught:
        a.pull()
    assert caught.value.code is FailureCode.DIVERGED


def test_rebuild_removes_junk_and_restores_damaged_files(pool: Machines, chapter: Chapter) -> None:
    a = pool.provider("a")
    a.open()
    path, data = chapter("s1", 1)
    publish(a, {path: data})
    (pool.mirror("a") / path).write_bytes(b"damaged")
    (pool.mirror("a") / "junk.txt").write_bytes(b"junk")
    a.rebuild()
    assert mirror_files(pool, "a") == {path: data}


def test_state_file_has_the_recorded_keys_and_no_token(pool: Machines, chapter: Chapter) -> None:
    a = pool.provider("a")
    a.open()
    path, data = chapter("s1", 1)
    head = publish(a, {path: data})
    raw = (pool.mirror("a") / STATE_FILE).read_text(encoding="utf-8")
    state = json.loads(raw)
    assert set(state) == {"origin", "head", "baseline", "staged", "offline", "repoId",
                          "unsafe", "lease"}
    assert state["unsafe"] == [] and state["lease"] is None
    assert state["origin"] == pool.remote
    assert state["head"] == head
    assert state["baseline"] == {path: git_blob_id(data)}
    assert state["offline"] is None
    assert pool.token not in raw


def test_a_second_sync_reopens_without_requests(pool: Machines, chapter: Chapter) -> None:
    a = pool.provider("a")
    a.open()
    a.close()
    again = pool.provider("a")
    state = again.open()
    assert not state.cloned
    assert again.requests == 0


def test_open_moves_a_foreign_mirror_aside(pool: Machines) -> None:
    root = pool.mirror("a")
    (root / ".git").mkdir(parents=True)
    (root / "project.yml").write_text("from a git pool\n", encoding="utf-8")
    state = pool.provider("a").open()
    assert state.moved_aside and ".stale-" in state.moved_aside
    assert (pool.tmp / "a" / state.moved_aside.rsplit("/", 1)[-1] / "project.yml").exists()
    assert mirror_files(pool, "a") == {}


def test_a_mirror_of_another_pool_is_moved_aside(pool: Machines) -> None:
    pool.provider("a").open()
    other = pool.provider("a", remote=pool.remote + "-other")
    state = other.open()
    assert state.moved_aside and state.cloned


def test_resolve_or_create_is_idempotent(pool: Machines) -> None:
    pool.provider("a").open()
    pool.provider("b").open()
    ids = {json.loads((pool.mirror(m) / STATE_FILE).read_text())["repoId"] for m in ("a", "b")}
    assert len(ids) == 1


def test_a_hand_damaged_mirror_is_repaired_by_the_next_pull(
    pool: Machines, chapter: Chapter
) -> None:
    a = pool.provider("a")
    a.open()
    files = dict([chapter("s1", 1), chapter("s1", 2)])
    publish(a, files)
    a.close()
    first = sorted(files)[0]
    (pool.mirror("a") / first).unlink()
    (pool.mirror("a") / "junk.md").write_bytes(b"junk")
    again = pool.provider("a")
    assert not again.open().cloned
    result = again.pull()
    assert set(result.changed_paths) == {first, "junk.md"}
    assert mirror_files(pool, "a") == files


def test_staged_files_survive_a_repair(pool: Machines, chapter: Chapter) -> None:
    a = pool.provider("a")
    a.open()
    path, data = chapter("s1", 1)
    a.stage({path: data})
    (pool.mirror("a") / "junk.md").write_bytes(b"junk")
    again = pool.provider("a")
    again.open()
    again.pull()
    assert mirror_files(pool, "a") == {path: data}
    assert again.commit("m", "a") is not None
    assert again.push().pushed


def test_unsafe_pool_paths_are_reported_never_materialized(
    machines: Machines, fake, chapter: Chapter
) -> None:
    """`..` and a name over NAME_MAX in the pool: reported cut at the unsafe element (as the
    git provider reports a tree entry), never written, and the pull goes on."""
    a = machines.provider("a")
    a.open()
    fair, data = chapter("s1", 1)
    climb = "chapters/pk/../001-climb.md"
    long_id = "chapters/pk/" + "9" * 300 + "/001-long.md"
    fake.move_head(machines.repository, {fair: data, climb: b"x", long_id: b"y"})
    pulled = a.pull()
    assert pulled.unsafe_paths == ("chapters/pk/..", "chapters/pk/" + "9" * 300)
    assert mirror_files(machines, "a") == {fair: data}
    assert not (machines.mirror("a").parent / "001-climb.md").exists()
    a.close()
    again = machines.provider("a").open()  # remembered in the state, no request needed
    assert again.unsafe_paths == pulled.unsafe_paths
    rebuilt = machines.provider("b").open()  # a first materialization reports them too
    assert rebuilt.cloned and rebuilt.unsafe_paths == pulled.unsafe_paths
