"""The git provider on a local-path pool (a real bare repository), checked with the git CLI."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_git.packs import add_loose
from dsh_chapters_git.provider import GitProviderFactory
from dulwich.objects import Blob
from dulwich.repo import Repo

from tests.adapters.git.conftest import GitCli, MakeMachine, files_under

PK = "pk-test"


def chapter(session: str, number: int, text: str) -> tuple[str, bytes]:
    return (
        f"chapters/{PK}/{session}/{number:03d}-note.md",
        f"---\ntitle: {text}\n---\n\n{text}\n".encode(),
    )


def publish(provider: object, files: dict[str, bytes], who: str) -> str:
    provider.stage(files)  # type: ignore[attr-defined]
    sha = provider.commit(f"publish {len(files)}", who)  # type: ignore[attr-defined]
    assert sha
    result = provider.push()  # type: ignore[attr-defined]
    assert result.pushed and result.head == sha
    return sha


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    return tmp_path / "pools" / "knowledge.git"


def test_first_open_creates_a_bare_pool_on_main(
    machines: MakeMachine, pool: Path, git: GitCli
) -> None:
    a = machines("mach-a", str(pool)).provider()
    state = a.open()
    assert state.created_pool and state.cloned and state.head == ""
    assert git("-C", pool, "rev-parse", "--is-bare-repository").strip() == "true"
    assert git("-C", pool, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    again = machines("mach-b", str(pool)).provider().open()
    assert not again.created_pool and again.cloned


def test_publish_is_checked_by_the_git_cli(
    machines: MakeMachine, pool: Path, git: GitCli, tmp_path: Path
) -> None:
    a = machines("mach-a", str(pool))
    b = machines("mach-b", str(pool))
    pa, pb = a.provider(), b.provider()
    pa.open()
    pb.open()
    first = dict([chapter("s-a", 1, "alpha"), ("project.yml", b"projectKey: pk-test\n")])
    publish(pa, first, "mach-a")
    pb.pull()
    second = dict([chapter("s-b", 1, "beta"), ("edits/mach-b/curation.jsonl", b"{}\n")])
    publish(pb, second, "mach-b")
    pa.pull()
    third = dict([chapter("s-a", 2, "gamma")])
    publish(pa, third, "mach-a")

    git("-C", pool, "fsck", "--strict")
    log = git("-C", pool, "log", "--format=%an|%ae|%P", "main").splitlines()
    assert [line.split("|")[0] for line in log] == ["mach-a", "mach-b", "mach-a"]
    assert all(line.split("|")[1].endswith("@dsh-chapters.invalid") for line in log)
    assert all(len(line.split("|")[2].split()) <= 1 for line in log), "a merge in the pool"
    assert git("-C", pool, "rev-list", "--merges", "main") == ""
    clone = tmp_path / "cli-clone"
    git("clone", "--quiet", pool, clone)
    assert files_under(clone) == {**first, **second, **third}
    for machine in (a, b):
        git("-C", machine.mirror, "fsck", "--strict")
    assert git("-C", a.mirror, "status", "--porcelain") == ""
    pb.pull()
    assert files_under(b.mirror) == files_under(clone)


def test_commit_with_nothing_new_is_none_and_push_is_a_no_op(
    machines: MakeMachine, pool: Path
) -> None:
    a = machines("mach-a", str(pool)).provider()
    a.open()
    assert a.commit("empty", "mach-a") is None
    assert a.push().pushed is False
    path, data = chapter("s", 1, "once")
    publish(a, {path: data}, "mach-a")
    assert a.stage({path: data}).unchanged == 1
    assert a.commit("again", "mach-a") is None


def test_stage_counts_and_refuses_file_directory_collisions(
    machines: MakeMachine, pool: Path
) -> None:
    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    result = a.stage({"a/b.md": b"1", "a/c.md": b"2"})
    assert (result.new, result.changed, result.unchanged) == (2, 0, 0)
    a.commit("two", "mach-a")
    result = a.stage(
        {"a/b.md": b"1", "a/c.md": b"22", "a": b"file over a dir", "a/b.md/x": b"under a file"}
    )
    assert (result.new, result.changed, result.unchanged) == (0, 1, 1)
    assert sorted(result.refused) == [("a", 15), ("a/b.md/x", 12)]
    assert (m.mirror / "a" / "c.md").read_bytes() == b"22"


@pytest.mark.parametrize(
    "bad", ["../escape.md", "/abs.md", ".git/config", "a//b.md", "", "a/../b", "chapters/.GIT/x"]
)
def test_unsafe_stage_paths_are_the_callers_bug(
    machines: MakeMachine, pool: Path, bad: str
) -> None:
    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    with pytest.raises(ValueError):
        a.stage({bad: b"x", "fine.md": b"y"})
    assert not (m.mirror / "fine.md").exists()


def test_pull_fast_forwards_commits_made_with_the_git_cli(
    machines: MakeMachine, pool: Path, git: GitCli, tmp_path: Path
) -> None:
    """A human's commit (packed and delta-compressed by git) arrives file by file, with a
    deletion and a file that became a directory."""
    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    publish(
        a,
        {
            "keep.md": b"keep\n",
            "gone.md": b"bye\n",
            "node": b"file\n",
            "index/topic.md": b"shard v1\n" * 200,
        },
        "mach-a",
    )
    work = tmp_path / "human"
    git("clone", "--quiet", pool, work)
    (work / "gone.md").unlink()
    (work / "node").unlink()
    (work / "node").mkdir()
    (work / "node" / "leaf.md").write_bytes(b"leaf\n")
    (work / "index" / "topic.md").write_bytes(b"shard v1\n" * 200 + b"shard v2\n")
    git("-C", work, "add", "-A")
    git("-C", work, "commit", "--quiet", "-m", "human edit")
    git("-C", work, "repack", "-adq")
    git("-C", work, "push", "--quiet", "origin", "main")

    result = a.pull()
    assert result.head_after == git("-C", pool, "rev-parse", "main").strip()
    assert set(result.changed_paths) == {"gone.md", "node", "node/leaf.md", "index/topic.md"}
    assert files_under(m.mirror) == files_under(work)
    assert git("-C", m.mirror, "status", "--porcelain") == ""


def test_pull_with_unpushed_commit_and_moved_pool_is_diverged(
    machines: MakeMachine, pool: Path
) -> None:
    a = machines("mach-a", str(pool)).provider()
    b = machines("mach-b", str(pool)).provider()
    a.open()
    b.open()
    b.stage(dict([chapter("s-b", 1, "b")]))
    b.commit("b", "mach-b")
    quiet = b.pull()  # the pool did not move: nothing to do, the commit stays
    assert quiet.head_before == quiet.head_after == ""
    publish(a, dict([chapter("s-a", 1, "a")]), "mach-a")
    with pytest.raises(TransportError) as caught:
        b.pull()
    assert caught.value.code is FailureCode.DIVERGED


def test_rewritten_pool_history_is_diverged_and_rebuild_adopts_it(
    machines: MakeMachine, pool: Path, git: GitCli, tmp_path: Path
) -> None:
    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    publish(a, {"one.md": b"1\n"}, "mach-a")
    work = tmp_path / "rewriter"
    git("init", "--quiet", "-b", "main", work)
    (work / "other.md").write_bytes(b"other history\n")
    git("-C", work, "add", "-A")
    git("-C", work, "commit", "--quiet", "-m", "unrelated")
    git("-C", work, "push", "--quiet", "--force", str(pool), "main")
    with pytest.raises(TransportError) as caught:
        a.pull()
    assert caught.value.code is FailureCode.DIVERGED
    state = a.rebuild()
    assert state.cloned and state.head == git("-C", pool, "rev-parse", "main").strip()
    assert files_under(m.mirror) == {"other.md": b"other history\n"}


def test_concurrent_pushes_one_diverges_then_both_converge(
    machines: MakeMachine, pool: Path, git: GitCli
) -> None:
    a = machines("mach-a", str(pool))
    b = machines("mach-b", str(pool))
    pa, pb = a.provider(), b.provider()
    pa.open()
    pb.open()
    a_files = dict([chapter("s-a", 1, "a")])
    b_files = dict([chapter("s-b", 1, "b")])
    pa.stage(a_files)
    pb.stage(b_files)
    pa.commit("a", "mach-a")
    pb.commit("b", "mach-b")
    pa.push()
    with pytest.raises(TransportError) as caught:
        pb.push()
    assert caught.value.code is FailureCode.DIVERGED
    assert "push" in caught.value.message and "chapters link" not in caught.value.hint
    pb.rebuild()
    assert files_under(b.mirror) == a_files
    publish(pb, b_files, "mach-b")
    pa.pull()
    assert files_under(a.mirror) == files_under(b.mirror) == {**a_files, **b_files}
    git("-C", pool, "fsck", "--strict")
    assert git("-C", pool, "rev-list", "--merges", "main") == ""
    assert git("-C", pool, "log", "--format=%an", "main").split() == ["mach-b", "mach-a"]


@pytest.mark.parametrize("how", ["modified", "untracked", "deleted", "staged-not-committed"])
def test_a_dirty_mirror_is_moved_aside_and_rebuilt(
    machines: MakeMachine, pool: Path, how: str
) -> None:
    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    publish(a, {"kept.md": b"pool copy\n"}, "mach-a")
    if how == "modified":
        (m.mirror / "kept.md").write_bytes(b"hand edit\n")
    elif how == "untracked":
        (m.mirror / "stray.md").write_bytes(b"stray\n")
    elif how == "deleted":
        (m.mirror / "kept.md").unlink()
    else:
        a.stage({"half.md": b"never committed\n"})
    a.close()
    state = m.provider().open()
    assert state.moved_aside and state.cloned
    stale = Path(state.moved_aside)
    assert stale.parent == m.workspace and stale.name.startswith(".dsh-knowledge.stale-")
    assert stale.is_dir()
    assert files_under(m.mirror) == {"kept.md": b"pool copy\n"}


def _corrupt_head(mirror: Path) -> None:
    (mirror / ".git" / "HEAD").write_bytes(b"garbage\n")


def _corrupt_objects(mirror: Path) -> None:
    objects = mirror / ".git" / "objects"
    for path in list(objects.rglob("*")):
        if path.is_file() and "info" not in path.parts:
            path.chmod(0o644)
            path.write_bytes(b"not an object")


def _corrupt_index(mirror: Path) -> None:
    (mirror / ".git" / "index").write_bytes(b"DIRC broken")


def _remove_git_dir(mirror: Path) -> None:
    import shutil

    shutil.rmtree(mirror / ".git")


@pytest.mark.parametrize(
    "corrupt",
    [_corrupt_head, _corrupt_objects, _corrupt_index, _remove_git_dir],
    ids=["head", "objects", "index", "no-git-dir"],
)
def test_a_corrupt_mirror_is_moved_aside_and_rebuilt(
    machines: MakeMachine, pool: Path, git: GitCli, corrupt: object
) -> None:
    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    head = publish(a, {"x.md": b"x\n"}, "mach-a")
    a.close()
    corrupt(m.mirror)  # type: ignore[operator]
    state = m.provider().open()
    assert state.moved_aside and state.cloned and state.head == head
    assert files_under(m.mirror) == {"x.md": b"x\n"}
    git("-C", pool, "fsck", "--strict")  # the copy was a copy: the pool is untouched
    git("-C", m.mirror, "fsck", "--strict")


def test_a_staged_file_changed_before_the_commit_is_damage_never_published(
    machines: MakeMachine, pool: Path, git: GitCli
) -> None:
    """Staged bytes are read back by the commit, not held in memory: a file changed behind the
    writer lock fails the commit (the mirror marked, moved aside by the next open), and the
    pool never holds the changed bytes."""
    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    head = publish(a, {"x.md": b"x\n"}, "mach-a")
    first, second = chapter("s", 1, "one"), chapter("s", 2, "two")
    assert a.stage(dict([first, second])).new == 2
    (m.mirror / second[0]).write_bytes(b"changed behind the lock\n")
    with pytest.raises(TransportError) as failed:
        a.commit("publish 2", "mach-a")
    assert f"{second[0]} changed after it was staged" in failed.value.message
    a.close()
    state = m.provider().open()
    assert state.moved_aside and state.cloned and state.head == head
    assert git("-C", pool, "log", "--format=%H", "main").split() == [head]
    b = m.provider()
    b.open()
    publish(b, dict([first, second]), "mach-a")
    assert files_under(m.mirror) == {"x.md": b"x\n", first[0]: first[1], second[0]: second[1]}
    (m.mirror / first[0]).unlink()  # not staged: a commit with nothing staged reads no file
    assert b.commit("nothing", "mach-a") is None
    third = chapter("s", 3, "three")
    b.stage(dict([third]))
    (m.mirror / third[0]).unlink()
    with pytest.raises(TransportError) as gone:
        b.commit("publish 1", "mach-a")
    assert f"{third[0]}, staged for the next commit, cannot be read" in gone.value.message
    git("-C", pool, "fsck", "--strict")


def test_a_mirror_of_another_pool_is_moved_aside(machines: MakeMachine, tmp_path: Path) -> None:
    m = machines("mach-a", str(tmp_path / "first.git"))
    first = m.provider()
    first.open()
    publish(first, {"first.md": b"1\n"}, "mach-a")
    first.close()
    state = m.provider(str(tmp_path / "second.git")).open()
    assert state.moved_aside and state.created_pool
    assert files_under(m.mirror) == {}


def test_a_reopened_clean_mirror_is_not_cloned_again(machines: MakeMachine, pool: Path) -> None:
    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    head = publish(a, {"x.md": b"x\n"}, "mach-a")
    a.close()
    state = m.provider().open()
    assert (state.cloned, state.moved_aside, state.head) == (False, "", head)


def test_a_crashed_clone_leaves_no_half_mirror(machines: MakeMachine, pool: Path) -> None:
    m = machines("mach-a", str(pool))
    leftover = m.workspace / ".dsh-knowledge.tmp-99999-dead"
    (leftover / ".git").mkdir(parents=True)
    m.provider().open()
    assert not leftover.exists()
    assert not [p for p in m.workspace.iterdir() if ".tmp-" in p.name]


def test_a_pool_path_that_is_not_a_repository_is_refused(
    machines: MakeMachine, tmp_path: Path
) -> None:
    taken = tmp_path / "not-a-pool"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(TransportError) as caught:
        machines("mach-a", str(taken)).provider().open()
    assert caught.value.code is FailureCode.REFUSED
    assert (taken / "notes.txt").read_text() == "mine"


def test_a_pool_that_vanished_after_a_sync_is_not_found(machines: MakeMachine, pool: Path) -> None:
    import shutil

    m = machines("mach-a", str(pool))
    a = m.provider()
    a.open()
    publish(a, {"x.md": b"x\n"}, "mach-a")
    a.close()
    shutil.rmtree(pool)
    with pytest.raises(TransportError) as caught:
        m.provider().open()
    assert caught.value.code is FailureCode.NOT_FOUND
    assert not pool.exists(), "an empty pool was created in place of the lost one"


def test_relative_home_and_file_url_remotes(
    machines: MakeMachine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = machines("mach-a", "./pools/rel.git")
    assert m.provider().open().created_pool
    assert (m.workspace / "pools" / "rel.git" / "HEAD").is_file()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    n = machines("mach-b", "~/pool.git")
    assert n.provider().open().created_pool
    assert (tmp_path / "home" / "pool.git" / "HEAD").is_file()
    url = (tmp_path / "url pool.git").as_uri()
    o = machines("mach-c", url)
    assert o.provider().open().created_pool
    assert (tmp_path / "url pool.git" / "HEAD").is_file()


def test_small_transfers_are_loose_objects_and_large_ones_one_pack(
    machines: MakeMachine, pool: Path
) -> None:
    a = machines("mach-a", str(pool)).provider()
    a.open()
    publish(a, dict([chapter("s", 1, "small")]), "mach-a")
    packs = pool / "objects" / "pack"
    assert not list(packs.glob("*.pack"))
    publish(a, dict(chapter("s", n, f"big {n}") for n in range(2, 120)), "mach-a")
    assert len(list(packs.glob("*.pack"))) == 1


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("/srv/pool.git", True),
        ("~/pool.git", True),
        ("./pool", True),
        ("../pool", True),
        ("file:///srv/pool.git", True),
        ("https://git.example.com/org/pool.git", True),
        ("http://127.0.0.1:8080/pool.git", True),
        ("treedx+https://treedx.example.com/pool", False),
        ("pool", False),
        ("ssh://git@example.com/pool.git", False),
        ("", False),
    ],
)
def test_factory_matches_local_paths_and_http_urls(remote: str, expected: bool) -> None:
    assert GitProviderFactory.matches(remote) is expected
    assert GitProviderFactory().matches(remote) is expected


def test_the_factory_satisfies_the_plugin_protocol() -> None:
    from dsh_chapters_core.ports.transport import ProviderFactory

    assert isinstance(GitProviderFactory, ProviderFactory)
    assert isinstance(GitProviderFactory(), ProviderFactory)
    assert GitProviderFactory.name == "git"


def test_the_entry_point_names_the_factory() -> None:
    from importlib.metadata import entry_points

    (point,) = [p for p in entry_points(group="dsh_chapters.providers") if p.name == "git"]
    assert point.load() is GitProviderFactory


def test_verbs_open_the_mirror_on_demand(machines: MakeMachine, pool: Path) -> None:
    m = machines("mach-a", str(pool))
    a = m.provider()
    assert a.pull().head_after == ""
    assert os.path.isdir(m.mirror / ".git")


def test_a_push_writes_an_object_another_writer_holds_locked(
    machines: MakeMachine, pool: Path, git: GitCli
) -> None:
    # Two machines push the same blob at once, or a writer died mid-write: either way the
    # pool holds `<object>.lock`. git's own rule (temp file, rename) must still land the push.
    a = machines("mach-a", str(pool)).provider()
    a.open()
    path, body = chapter("s-a", 1, "shared words")
    blob = Blob.from_string(body).id.decode()
    fan = pool / "objects" / blob[:2]
    fan.mkdir(parents=True, exist_ok=True)
    (fan / f"{blob[2:]}.lock").write_bytes(b"")
    sha = publish(a, {path: body}, "mach-a")
    assert git("-C", pool, "cat-file", "-p", blob).encode() == body
    assert git("-C", pool, "rev-parse", "main").strip() == sha
    git("-C", pool, "fsck", "--strict")
    assert not [p.name for p in fan.iterdir() if p.name.startswith("tmp_obj_")]


def test_many_writers_adding_the_same_loose_objects_all_succeed(tmp_path: Path) -> None:
    Repo.init_bare(str(tmp_path / "p.git"), mkdir=True).close()
    blobs = [Blob.from_string(f"same text {i}\n".encode()) for i in range(40)]

    def writer(_: int) -> int:
        repo = Repo(str(tmp_path / "p.git"))
        try:
            for blob in blobs:
                add_loose(repo.object_store, blob)
            return len(blobs)
        finally:
            repo.close()

    with ThreadPoolExecutor(8) as workers:
        assert sum(workers.map(writer, range(8))) == 8 * len(blobs)
    repo = Repo(str(tmp_path / "p.git"))
    try:
        assert [repo.object_store[b.id].as_raw_string() for b in blobs] == [
            b.as_raw_string() for b in blobs
        ]
    finally:
        repo.close()
