"""The archive use case on fakes: watermark, idempotence, the lock, crash recovery, the report."""

from __future__ import annotations

import json

import pytest
from dsh_chapters_core.archive import archive_transcript
from dsh_chapters_core.config import DEFAULTS, Config
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.events import LineAccount, Transcript
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.projectkey import derive_project_key
from dsh_chapters_core.testing.fakes_store import (
    FakeChapterStore,
    FakeWriterLock,
    FixedClock,
    SimulatedCrash,
)

from tests.core.conversation import Conversation

IDENTITY = derive_project_key(remote="https://github.com/acme/widgets.git")
SECRET = "AKIAABCDEFGHIJKLMNOP"


def _auth_turns(c: Conversation) -> Conversation:
    c.turn("Fix the token refresh in src/auth/middleware.py please",
           "Refresh now retries once.",
           ("Read", {"file_path": "src/auth/middleware.py"}, "def refresh(): pass"),
           ("Bash", {"command": "pytest tests/test_auth.py"}, "2 passed"))
    c.turn("Also cover src/auth/middleware.py expiry",
           "Expiry is covered.",
           ("Edit", {"file_path": "src/auth/middleware.py"}, "ok"))
    return c


def _docs_turns(c: Conversation) -> Conversation:
    c.turn("Now write the changelog in docs/CHANGELOG.md",
           "Changelog written.",
           ("Write", {"file_path": "docs/CHANGELOG.md"}, "written"))
    return c


def transcript(c: Conversation, session_id: str = "sess-1") -> Transcript:
    return Transcript(session_id=session_id, harness="dsh", events=tuple(c.events),
                      account=LineAccount(imported=len(c.events)), source_path="/tmp/log.jsonl")


def run(t: Transcript, store: FakeChapterStore, lock: FakeWriterLock, config: Config = DEFAULTS):
    return archive_transcript(t, store=store, lock=lock, clock=FixedClock(), config=config,
                              identity=IDENTITY, harness_id="laptop")


@pytest.fixture
def lock() -> FakeWriterLock:
    return FakeWriterLock()


@pytest.fixture
def store(lock: FakeWriterLock) -> FakeChapterStore:
    return FakeChapterStore(lock=lock)  # asserts every write happens under the lock


def test_archive_writes_topic_chapters_under_the_lock(store, lock) -> None:
    report = run(transcript(_docs_turns(_auth_turns(Conversation()))), store, lock)
    assert lock.holds == 1
    assert report.turns_complete == 3
    assert report.turns_archived == 3
    chapter_files = [p for p in sorted(store.files) if "/chapters/" in p]
    assert [c.path for c in report.chapters] == chapter_files
    assert len(report.chapters) == 2  # the changelog turn is another task
    assert [c.rule for c in report.chapters] == ["first", "below-threshold"]
    assert [c.turns for c in report.chapters] == [2, 1]
    assert report.watermark_before == -1
    assert report.watermark_after == store.watermark("sess-1") == max(
        c.seq_range[1] for c in report.chapters)
    text = store.files[report.chapters[0].path]
    fm, body = split_frontmatter(text)
    assert '"sessionId": ' not in fm and "sessionId: \"sess-1\"" in fm
    assert f'projectKey: "{IDENTITY.project_key}"' in fm
    assert "Refresh now retries once." in body
    lines = store.files["sess-1/collections.jsonl"].splitlines()
    assert len(lines) == 3 and all(json.loads(line)["seqs"] for line in lines)
    assert store.records["sess-1"]["harnessId"] == "laptop"


def test_running_twice_writes_nothing_new(store, lock) -> None:
    t = transcript(_docs_turns(_auth_turns(Conversation())))
    run(t, store, lock)
    writes = list(store.writes)
    files = dict(store.files)
    again = run(t, store, lock)
    assert again.wrote_nothing
    assert again.turns_archived == 0 and again.turns_already == 3
    assert store.writes == writes and store.files == files


def test_appended_turns_archive_only_the_new_ones(store, lock) -> None:
    c = _auth_turns(Conversation())
    first = run(transcript(c), store, lock)
    _docs_turns(c)
    second = run(transcript(c), store, lock)
    assert second.turns_archived == 1 and second.turns_already == 2
    assert second.watermark_before == first.watermark_after
    (chapter,) = second.chapters
    assert chapter.path.startswith("sess-1/chapters/002-")
    assert chapter.seq_range[0] > first.watermark_after
    assert len(store.files["sess-1/collections.jsonl"].splitlines()) == 3


def test_an_unfinished_turn_is_clamped_and_archived_later(store, lock) -> None:
    c = _auth_turns(Conversation()).start().user("half a turn about docs/CHANGELOG.md")
    report = run(transcript(c), store, lock)
    assert report.turns_archived == 2
    assert "has not ended, so it was held back" in report.clamp and "§" not in report.clamp
    c.assistant("done now").end()
    later = run(transcript(c), store, lock)
    assert later.clamp == ""
    assert later.turns_archived == 1
    body = store.files[later.chapters[0].path]
    assert "half a turn about docs/CHANGELOG.md" in body and "done now" in body


def test_large_results_become_artifacts_once_and_credentials_are_counted(store, lock) -> None:
    config = DEFAULTS.replace(tool_result_defer_floor_tokens=50)
    big = "\n".join(f"log line {i} of the build" for i in range(200))
    c = Conversation().turn(f"Run the build, my key is {SECRET}", "Built.",
                            ("Bash", {"command": "make build"}, big))
    report = run(transcript(c), store, lock, config)
    assert report.artifacts_written == 1 and report.artifacts_present == 0
    assert dict(report.redactions) == {"aws-access-key": 1}
    assert all(SECRET not in text for text in store.files.values())
    other = run(transcript(c, "sess-2"), store, lock, config)
    assert other.artifacts_written == 0 and other.artifacts_present == 1


def test_no_complete_turn_writes_nothing(store, lock) -> None:
    report = run(transcript(Conversation().start().user("only a question")), store, lock)
    assert report.wrote_nothing and report.turns_complete == 0
    assert store.writes == [] and store.records == {}


def test_a_busy_lock_refuses_and_writes_nothing(store) -> None:
    busy = FakeWriterLock(busy=True)
    with pytest.raises(ChaptersError, match="held by another writer"):
        run(transcript(_auth_turns(Conversation())), store, busy)
    assert store.files == {}


def _chapter_ranges(store: FakeChapterStore) -> list[tuple[int, int]]:
    return sorted(d.seq_range for d in store.documents())


WRITES_OF_A_CLEAN_RUN = 6  # session, signatures, the numbers, 2 chapters, watermark


def test_a_clean_run_makes_the_expected_writes(store, lock) -> None:
    run(transcript(_docs_turns(_auth_turns(Conversation()))), store, lock)
    assert len(store.writes) == WRITES_OF_A_CLEAN_RUN


@pytest.mark.parametrize("crash_after", range(1, WRITES_OF_A_CLEAN_RUN + 1))
def test_a_crash_at_any_write_recovers_without_duplicates(crash_after: int) -> None:
    lock = FakeWriterLock()
    store = FakeChapterStore(lock=lock, crash_after=crash_after)
    t = transcript(_docs_turns(_auth_turns(Conversation())))
    with pytest.raises(SimulatedCrash):
        run(t, store, lock)
    assert not lock.held
    store.crash_after = None
    run(t, store, lock)
    ranges = _chapter_ranges(store)
    # every complete turn lands in exactly one chapter; no range overlaps another
    covered = [seq for lo, hi in ranges for seq in range(lo, hi + 1)]
    assert len(covered) == len(set(covered))
    assert covered and max(covered) == max(e.seq for e in t.events)
    numbers = store.chapter_numbers("sess-1")
    assert len(numbers) == len(set(numbers))
    seqs = [tuple(json.loads(line)["seqs"])
            for line in store.files["sess-1/collections.jsonl"].splitlines()]
    assert len(seqs) == len(set(seqs)) == 3
    assert all(d.sha256 == d.body_sha256 for d in store.documents())
    assert run(t, store, lock).wrote_nothing


def test_report_names_turns_and_serializes(store, lock) -> None:
    c = _auth_turns(Conversation())
    run(transcript(c), store, lock)
    _docs_turns(c)
    report = run(transcript(c), store, lock)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["turns"] == {"complete": 3, "archived": 1, "alreadyArchived": 2}
    assert data["decisions"] == [{"turn": 2, "action": "open", "rule": "first",
                                  "overlap": 0.0, "size": report.decisions[0].size}]
    assert data["chapters"][0]["rule"] == "first"
    assert data["lines"]["imported"] == len(c.events)


def test_a_crash_before_the_watermark_write_is_repaired_by_the_next_run() -> None:
    lock = FakeWriterLock()
    store = FakeChapterStore(lock=lock, crash_after=WRITES_OF_A_CLEAN_RUN)  # the watermark
    t = transcript(_docs_turns(_auth_turns(Conversation())))
    with pytest.raises(SimulatedCrash):
        run(t, store, lock)
    assert store.watermark("sess-1") == -1 and len(list(store.documents())) == 2
    store.crash_after = None
    again = run(t, store, lock)
    assert again.turns_archived == 0 and again.wrote_nothing
    assert store.watermark("sess-1") == max(e.seq for e in t.events)
    writes = list(store.writes)
    run(t, store, lock)
    assert store.writes == writes  # repaired once; later runs write nothing
