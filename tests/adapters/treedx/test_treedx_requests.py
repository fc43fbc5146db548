"""Request counts prove the pull's cost: O(pages) when nothing changed, O(pages + k/batch) for k
changed files (issue #7; the TS plugin paid N+1). The fake counts requests per route."""

from __future__ import annotations

import math

import pytest
from dsh_chapters_treedx.testing import FakeTreeDX

from tests.adapters.treedx.treedx_machines import TEST_CONFIG, Machines

LIST = "/paths/list"
READ = "/files/read"


def seed(fake: FakeTreeDX, machines: Machines, n: int) -> dict[str, bytes]:
    files = {f"chapters/pk/s{i % 7}/{i:04d}-turn.md": f"chapter {i}\n".encode() for i in range(n)}
    fake.seed(machines.repository, files)
    return files


def test_first_open_costs_pages_plus_batches_not_n_plus_one(
    fake: FakeTreeDX, machines: Machines
) -> None:
    n = 1200
    seed(fake, machines, n)
    fake.reset_counts()
    machines.provider("a").open()
    pages = math.ceil(n / TEST_CONFIG.treedx_page_size)  # 3
    batches = math.ceil(n / TEST_CONFIG.treedx_read_batch)  # 24
    assert fake.count("POST /api/v1/repos") == 1
    assert fake.count(LIST) == pages
    assert fake.count(READ) == batches
    assert fake.count() == 1 + pages + batches  # 28 requests, where N+1 would be 1201


def test_pull_with_nothing_new_is_one_request(fake: FakeTreeDX, machines: Machines) -> None:
    seed(fake, machines, 1200)
    a = machines.provider("a")
    a.open()
    fake.reset_counts()
    result = a.pull()
    assert result.changed_paths == ()
    assert result.requests == 1 == fake.count()
    assert fake.count(LIST) == 1


def test_head_moved_without_new_content_costs_pages_only(
    fake: FakeTreeDX, machines: Machines
) -> None:
    seed(fake, machines, 1200)
    a = machines.provider("a")
    a.open()
    fake.move_head(machines.repository, {".treedxkeep": b"touched\n"})  # not a pool file
    fake.reset_counts()
    result = a.pull()
    assert result.changed_paths == ()
    assert fake.count(LIST) == 1 + 3  # the head read, then three pages
    assert fake.count(READ) == 0


@pytest.mark.parametrize("changed", [1, 50, 120])
def test_pull_of_k_changed_files_costs_pages_plus_k_over_batch(
    fake: FakeTreeDX, machines: Machines, changed: int
) -> None:
    files = seed(fake, machines, 1200)
    a = machines.provider("a")
    a.open()
    edits = {path: data + b"enriched\n" for path, data in sorted(files.items())[:changed]}
    fake.move_head(machines.repository, edits)
    fake.reset_counts()
    result = a.pull()
    assert set(result.changed_paths) == set(edits)
    batches = math.ceil(changed / TEST_CONFIG.treedx_read_batch)
    assert fake.count(LIST) == 1 + 3
    assert fake.count(READ) == batches
    assert result.requests == fake.count() == 1 + 3 + batches


@pytest.mark.parametrize(("n", "k", "page", "batch"),
                         [(95, 0, 10, 4), (95, 1, 10, 4), (95, 23, 10, 4), (40, 40, 7, 9)])
def test_the_count_formula_holds_for_other_sizes(
    fake: FakeTreeDX, machines: Machines, n: int, k: int, page: int, batch: int
) -> None:
    config = TEST_CONFIG.replace(treedx_page_size=page, treedx_read_batch=batch)
    files = seed(fake, machines, n)
    a = machines.provider("a", config=config)
    a.open()
    edits = {path: data + b"x" for path, data in sorted(files.items())[:k]}
    edits[".treedxkeep"] = b"move the head even when k is 0"
    fake.move_head(machines.repository, edits)
    fake.reset_counts()
    a.pull()
    assert fake.count() == 1 + math.ceil(n / page) + math.ceil(k / batch)


def test_a_head_move_between_pages_restarts_the_walk(fake: FakeTreeDX, machines: Machines) -> None:
    files = seed(fake, machines, 1200)
    a = machines.provider("a")
    a.open()
    first = sorted(files)[0]
    fake.move_head(machines.repository, {first: b"moved once\n"})
    late = "chapters/pk/s9/9999-late.md"
    # Requests: #1 the head read, #2 page one; then the head moves before page two.
    fake.after(LIST, 2, lambda: fake.move_head(machines.repository, {late: b"late\n"}))
    fake.reset_counts()
    result = a.pull()
    assert result.head_after == fake.head(machines.repository)
    assert fake.count(LIST) == 1 + 2 + 3  # head, two pages of the abandoned walk, a full walk
    assert (machines.mirror("a") / late).read_bytes() == b"late\n"
    assert (machines.mirror("a") / first).read_bytes() == b"moved once\n"


def test_a_push_costs_lease_plus_one_put_per_file_plus_commit(
    fake: FakeTreeDX, machines: Machines
) -> None:
    a = machines.provider("a")
    a.open()
    a.stage({f"chapters/pk/s1/{i:03d}-x.md": b"x" for i in range(5)})
    a.commit("m", "a")
    fake.reset_counts()
    assert a.push().pushed
    assert fake.counts() == {
        "POST /api/v1/repos/{repo_id}/workspaces": 1,
        "PUT /api/v1/workspaces/{workspace_id}/files": 5,
        "POST /api/v1/workspaces/{workspace_id}/commit": 1,
    }


def test_repairing_a_damaged_mirror_costs_pages_plus_what_is_damaged(
    fake: FakeTreeDX, machines: Machines
) -> None:
    files = seed(fake, machines, 1200)
    machines.provider("a").open()
    for path in sorted(files)[:3]:
        (machines.mirror("a") / path).unlink()
    again = machines.provider("a")
    again.open()
    fake.reset_counts()
    result = again.pull()
    assert len(result.changed_paths) == 3
    assert fake.count(LIST) == 1 + 3 and fake.count(READ) == 1
