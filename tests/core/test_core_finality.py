"""Finality on fakes: a session that is over archives its unfinished tail once, marked
`ended: incomplete-turn`; a resumed one continues in a new chapter that names the final one;
`prLinks` comes from the harness's pull request links; the notice's TOC shows the mark."""

from __future__ import annotations

from dsh_chapters_core.archive import ArchiveReport, archive_transcript
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.events import LineAccount, PullRequestLink, Transcript
from dsh_chapters_core.notice import NoticeContext, assemble_notice, chapter_ended
from dsh_chapters_core.projectkey import derive_project_key
from dsh_chapters_core.testing.fakes_store import FakeChapterStore, FakeWriterLock, FixedClock

from tests.core.conversation import Conversation

IDENTITY = derive_project_key(remote="https://github.com/acme/widgets.git")


def transcript(c: Conversation) -> Transcript:
    return Transcript(session_id="s-1", harness="claude-code", events=tuple(c.events),
                      account=LineAccount(imported=len(c.events)))


def run(c: Conversation, store: FakeChapterStore, *, final: bool = False) -> ArchiveReport:
    return archive_transcript(transcript(c), store=store, lock=FakeWriterLock(),
                              clock=FixedClock(), config=DEFAULTS, identity=IDENTITY,
                              harness_id="laptop", final=final)


def chapters(store: FakeChapterStore) -> dict[str, str]:
    return {p: t for p, t in sorted(store.files.items()) if "/chapters/" in p}


def test_final_archives_the_tail_once_and_marks_it() -> None:
    c = Conversation().start().user("Fix the parser in src/parse.py").assistant("Fixed.").end()
    c.start().user("Now document it in docs/parse.md").assistant("Documented, see docs/parse.md")
    store = FakeChapterStore()
    live = run(c, store)
    assert live.turns_archived == 1 and live.clamp and not live.ended
    final = run(c, store, final=True)
    assert final.turns_archived == 1 and not final.clamp and "incomplete-turn" in final.ended
    [last] = [t for t in chapters(store).values() if "Documented" in t]
    assert 'ended: "incomplete-turn"' in last and "· ended: incomplete-turn" in last
    assert run(c, store, final=True).turns_archived == 0  # nothing archived twice
    assert sum("Documented" in t for t in chapters(store).values()) == 1


def test_a_tail_without_conversation_is_not_archived() -> None:
    c = Conversation().start().user("Fix src/a.py").assistant("Done.").end()
    c.command("/model opus")
    store = FakeChapterStore()
    report = run(c, store, final=True)
    assert report.turns_archived == 1 and report.ended == ""


def test_a_resumed_session_continues_in_a_linked_chapter_and_rewrites_nothing() -> None:
    c = Conversation().start().user("Fix the parser in src/parse.py").assistant("Working on")
    store = FakeChapterStore()
    run(c, store, final=True)
    before = chapters(store)
    [final_path] = before
    # The same turn goes on after the final archive (a resumed session), then ends.
    c.call("Edit", {"file_path": "src/parse.py"}, "ok").assistant("Parser fixed.").end()
    report = run(c, store)
    assert report.turns_archived == 1
    after = chapters(store)
    assert {p: after[p] for p in before} == before  # append-only (§1 invariant 3)
    [new] = [t for p, t in after.items() if p not in before]
    assert f'continues: "{final_path}"' in new
    assert "Parser fixed." in new and "Working on" not in new  # only what came after


def test_pr_links_are_chapter_metadata_once_each() -> None:
    c = Conversation().start().user("Open the PR").assistant("Opened.")
    url = "https://github.com/acme/widgets/pull/7"
    c.events.append(PullRequestLink(seq=c.seq + 1, url=url))
    c.events.append(PullRequestLink(seq=c.seq + 2, url=url))
    c.seq += 2
    c.end()
    store = FakeChapterStore()
    run(c, store)
    [text] = chapters(store).values()
    assert f'prLinks: ["{url}"]' in text


def test_the_notice_toc_shows_a_final_chapter_mark() -> None:
    c = Conversation().start().user("Fix the parser in src/parse.py").assistant("Working on")
    store = FakeChapterStore()
    run(c, store, final=True)
    [doc] = list(store.documents())
    assert chapter_ended(doc) == "incomplete-turn"
    ctx = NoticeContext(project_slug="widgets", project_key=IDENTITY.project_key,
                        session_id="s-1")
    text = assemble_notice(ctx, list(store.documents()), config=DEFAULTS)
    assert "· ended: incomplete-turn" in text
