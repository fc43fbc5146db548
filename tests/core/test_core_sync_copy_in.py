"""Copy-in validates before it writes (§2.2, §3.3): a pool file is copied only when its path,
size, frontmatter, hash and namespace are right; anything else is quarantined, with a code
and a reason, and never stops the rest."""

from __future__ import annotations

import hashlib
import json

from dsh_chapters_core.sync.copy import CopyLimits, QuarantineCode, copy_in
from dsh_chapters_core.testing.fakes_transport import MemoryTree

PK = "1c3f0000-0000-5000-8000-000000000001"
ME = "box-a"


def chapter(harness_id: str, body: str = "body") -> bytes:
    return f'---\nharnessId: "{harness_id}"\ntitle: "t"\n---\n{body}\n'.encode()


def run(mirror: dict[str, bytes], store: dict[str, bytes] | None = None, **kw: object):
    store_tree = MemoryTree("mem://store", store or {})
    result = copy_in(store_tree, MemoryTree("mem://mirror", mirror), PK, ME, **kw)  # type: ignore[arg-type]
    return store_tree, result, {q.path: q.code for q in result.quarantined}


def test_a_fair_foreign_chapter_is_copied_with_its_writer_named() -> None:
    store, result, refused = run({f"chapters/{PK}/s1/001-x.md": chapter("box-b")})
    assert result.new == 1 and not refused
    assert json.loads(store.files["s1/session.json"])["harnessId"] == "box-b"


def test_reserved_names_and_overlong_ids_are_path_quarantines() -> None:
    mirror = {
        f"chapters/{PK}/config.toml/001-x.md": chapter("box-b"),
        f"chapters/{PK}/State/001-x.md": chapter("box-b"),
        f"chapters/{PK}/s1/not-a-chapter.txt": b"x",
        f"chapters/{PK}/{'9' * 300}/001-x.md": chapter("box-b"),
        f"rules/{PK}/box-b/deeper/001-x.md": chapter("box-b"),
    }
    store, result, refused = run(mirror)
    assert refused == dict.fromkeys(mirror, QuarantineCode.PATH)
    assert result.new == 0 and store.files == {}


def test_namespaces_are_owned_by_their_writer() -> None:
    mine = {"s-mine/session.json": json.dumps({"harnessId": ME}).encode(),
            "s-mine/chapters/001-a.md": chapter(ME)}
    mirror = {
        f"chapters/{PK}/s-mine/002-injected.md": chapter("mallory"),
        f"chapters/{PK}/s-new/001-claims-me.md": chapter(ME),
        f"chapters/{PK}/s-none/001-no-writer.md": b'---\ntitle: "t"\n---\nx\n',
        f"rules/{PK}/{ME}/001-testing-x.md": chapter("mallory"),
        f"rules/{PK}/box-b/001-testing-x.md": chapter("mallory"),
        f"edits/{ME}/curation.jsonl": b'{"type": "rule-status"}\n',
        f"chapters/{PK}/s-b/001-ok.md": chapter("box-b"),
        f"chapters/{PK}/s-b/002-other-writer.md": chapter("box-c"),
    }
    store, result, refused = run(mirror, mine)
    assert set(refused) == set(mirror) - {f"chapters/{PK}/s-b/001-ok.md"}
    assert set(refused.values()) == {QuarantineCode.NAMESPACE}
    assert result.new == 1 and "s-b/chapters/001-ok.md" in store.files
    assert store.files["s-mine/chapters/001-a.md"] == chapter(ME)


def test_sizes_hashes_and_frontmatter_are_checked() -> None:
    good = b"artifact text"
    sha = hashlib.sha256(good).hexdigest()
    wrong = hashlib.sha256(b"other").hexdigest()
    mirror = {
        f"chapters/{PK}/s1/001-big.md": chapter("box-b", "x" * 5000),
        f"chapters/{PK}/s2/001-bad.md": chapter("box-b"),
        f"chapters/{PK}/s3/001-none.md": b"/etc/passwd",
        f"artifacts/{PK}/{sha[:2]}/{sha}": good,
        f"artifacts/{PK}/{wrong[:2]}/{wrong}": b"not other",
    }
    store, result, refused = run(
        mirror, limits=CopyLimits(max_bytes=4096),
        check=lambda path, data: "invalid date" if path.endswith("001-bad.md") else "")
    assert refused == {
        f"chapters/{PK}/s1/001-big.md": QuarantineCode.SIZE,
        f"chapters/{PK}/s2/001-bad.md": QuarantineCode.FRONTMATTER,
        f"chapters/{PK}/s3/001-none.md": QuarantineCode.FRONTMATTER,
        f"artifacts/{PK}/{wrong[:2]}/{wrong}": QuarantineCode.ARTIFACT,
    }
    assert result.new == 1 and store.files[f"artifacts/{sha[:2]}/{sha}.txt"] == good
    assert all(q.reason for q in result.quarantined)


def test_unsafe_entries_named_by_the_provider_are_quarantined_with_the_commit() -> None:
    _, _, refused = run({}, unsafe=(f"chapters/{PK}/..",), commit="abc123")
    assert refused == {f"chapters/{PK}/..": QuarantineCode.PATH}


class BatchTree(MemoryTree):
    """A store that writes in batches, as DirectoryTree does (`write_many`): each call kept."""

    def __init__(self) -> None:
        super().__init__("mem://store")
        self.batches: list[list[str]] = []

    def write_many(self, files: list[tuple[str, bytes]]) -> None:
        self.batches.append([path for path, _ in files])
        for path, data in files:
            self.write(path, data)


def test_a_large_pool_is_copied_in_batches_each_writer_before_its_files() -> None:
    sessions = [f"s{k:03d}" for k in range(40)]
    mirror = {f"chapters/{PK}/{sid}/{n:03d}-x.md": chapter(f"box-{k % 3}", f"body {sid} {n}")
              for k, sid in enumerate(sessions) for n in range(1, 9)}
    store = BatchTree()
    result = copy_in(store, MemoryTree("mem://mirror", mirror), PK, ME)  # type: ignore[arg-type]
    assert result.new == 320 and not result.quarantined
    assert {f"{sid}/chapters/{n:03d}-x.md" for sid in sessions for n in range(1, 9)} | {
        f"{sid}/session.json" for sid in sessions} == set(store.files)
    # Every file went through a batch, more than one batch was needed, and a session's
    # writer record was on the disk before the batch that holds its first chapter.
    assert len(store.batches) > 2 and store.writes == [p for b in store.batches for p in b]
    first_file = {path.split("/")[0]: at for at, path in reversed(list(enumerate(store.writes)))
                  if "/chapters/" in path}
    records = {path.split("/")[0]: at for at, path in enumerate(store.writes)
               if path.endswith("/session.json")}
    assert all(records[sid] < first_file[sid] for sid in sessions)
    assert all(json.loads(store.files[f"{s}/session.json"])["harnessId"] == f"box-{k % 3}"
               for k, s in enumerate(sessions))
