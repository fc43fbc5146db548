"""A small archived corpus on fakes for the enrichment tests, and answers a model could give."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dsh_chapters_core.archive import archive_transcript
from dsh_chapters_core.config import DEFAULTS, Config
from dsh_chapters_core.enrich.chapter import parse_chapter_file
from dsh_chapters_core.events import LineAccount, Transcript
from dsh_chapters_core.ports.model import ModelCall
from dsh_chapters_core.projectkey import derive_project_key
from dsh_chapters_core.testing.fakes_store import FakeChapterStore, FakeWriterLock
from dsh_chapters_core.testing.fakes_transport import FakeClock, MemoryTree

from tests.core.conversation import Conversation

IDENTITY = derive_project_key(remote="https://github.com/acme/widgets.git")
HERE = "laptop"
ROUTE = "fake/enricher-1"
CONFIG = DEFAULTS.replace(enrichment_model=ROUTE, enrichment_trigger="manual")


def conversation() -> Conversation:
    c = Conversation()
    c.turn("Fix the token refresh in src/auth/middleware.py please",
           "Refresh now retries once.",
           ("Read", {"file_path": "src/auth/middleware.py"}, "def refresh(): pass"))
    c.turn("Now write the changelog in docs/CHANGELOG.md",
           "Changelog written.",
           ("Write", {"file_path": "docs/CHANGELOG.md"}, "written"))
    return c


def answer(title: str = "Fix the token refresh", summary: str = "Refresh retries once.",
           topics: tuple[str, ...] = ("auth", "token-refresh")) -> str:
    return json.dumps({"title": title, "summary": summary, "topics": list(topics)})


@dataclass
class Corpus:
    """Chapters archived here (`laptop`) into a fake store; state in a memory tree."""

    config: Config = CONFIG
    store: FakeChapterStore = field(init=False)
    lock: FakeWriterLock = field(default_factory=FakeWriterLock)
    tree: MemoryTree = field(default_factory=MemoryTree)
    clock: FakeClock = field(default_factory=FakeClock)

    def __post_init__(self) -> None:
        self.store = FakeChapterStore(lock=self.lock)

    def archive(self, session_id: str = "sess-1", harness_id: str = HERE,
                c: Conversation | None = None) -> list[str]:
        c = c or conversation()
        transcript = Transcript(session_id=session_id, harness="dsh", events=tuple(c.events),
                                account=LineAccount(imported=len(c.events)))
        report = archive_transcript(transcript, store=self.store, lock=self.lock,
                                    clock=self.clock, config=self.config, identity=IDENTITY,
                                    harness_id=harness_id)
        return [ch.path for ch in report.chapters]

    def chapters(self) -> dict[str, str]:
        return {p: t for p, t in sorted(self.store.files.items()) if "/chapters/" in p}

    def body(self, path: str) -> str:
        chapter = parse_chapter_file(path, self.store.files[path])
        assert chapter is not None
        return chapter.body

    def fields(self, path: str) -> dict[str, object]:
        chapter = parse_chapter_file(path, self.store.files[path])
        assert chapter is not None
        return dict(chapter.fields)


def user_text(call: ModelCall) -> str:
    return next(m.content for m in call.messages if m.role == "user")
