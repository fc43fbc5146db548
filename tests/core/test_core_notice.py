"""Notice v2 (§7.3): goldens with and without rules, the O(1) property, and its sections."""

from __future__ import annotations

import os
import pathlib

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.notice import (
    MODIFIED_MARK,
    NoticeContext,
    NoticeWords,
    assemble_notice,
    build_notice,
    derive_ancestry,
    session_chapters,
)
from dsh_chapters_core.rules import (
    RuleProposal,
    approve_rule,
    load_rules,
    propose_rule,
    revoke_rule,
    select_rules,
)
from dsh_chapters_core.testing.fakes_rules import TreeShelf
from dsh_chapters_core.testing.fakes_transport import FakeClock, MemoryTree

GOLDEN = pathlib.Path(__file__).parent / "golden"
SESSION = "sess-a1"
# The CLI's words for the notice's doors: the app passes `dsh_chapters.present.NOTICE_WORDS`,
# and tests/app/test_app_core_wording.py checks that it equals these, so the goldens below are
# the notice the CLI and the hooks give (the core itself names no command).
CLI_WORDS = NoticeWords(
    list_rules="`chapters rule list`",
    list_category="`chapters rule list --category <name>`",
    revoke_rule="`chapters rule revoke <id>`",
    add_rule="`chapters rule add`",
    list_chapters="`chapters list`",
    search='`chapters search "<query>"`',
    raise_budget="`--max-tokens N`",
    search_topic="`chapters search --topic <topic>`",
)
CTX = NoticeContext(
    project_slug="dsh-chapters",
    project_key="5b7c9f5e-1f53-5b8e-a0f4-0c9c1e7d2a11",
    session_id=SESSION,
    title="Make the sync loop degrade to local-only",
    handoff="Halfway through the retry test: the TimeoutError path is not covered yet.",
    shard_dir=".dsh-knowledge/index",
    words=CLI_WORDS,
)


def _golden(name: str, text: str) -> str:
    path = GOLDEN / name
    if os.environ.get("DSH_UPDATE_GOLDEN") == "1":  # regenerate on purpose, then review the diff
        path.write_text(text, encoding="utf-8")
    return path.read_text(encoding="utf-8")


def _chapter_text(number: int, session: str, *, title: str, topics: tuple[str, ...],
                  messages: dict[str, int], tamper: bool = False) -> str:
    body = f"## user\n\nWork item {number} of {session}.\n"
    import hashlib

    fm = dump_frontmatter({
        "kind": "chapter", "title": title, "summary": f"We worked on: {title.lower()}.",
        "topics": list(topics), "sessionId": session, "messages": messages,
        "sha256": hashlib.sha256(body.encode()).hexdigest(), "date": "2026-11-29T10:00:00Z",
    })
    return fm + (body + "edited by hand\n" if tamper else body)


def _session_tree() -> MemoryTree:
    tree = MemoryTree()
    chapters = [
        (1, "Sync loop: pull, copy-in, push", ("sync", "git"), {"user": 3, "assistant": 5}),
        (2, "Timeouts degrade to local-only", ("sync", "testing"), {"user": 2, "assistant": 4,
                                                                   "tool": 6}),
        (3, "Status line shows pending pushes", ("status",), {"user": 1, "assistant": 1}),
    ]
    for number, title, topics, messages in chapters:
        slug = title.lower().split(":")[0].replace(" ", "-")
        tree.files[f"{SESSION}/chapters/{number:03d}-{slug}.md"] = _chapter_text(
            number, SESSION, title=title, topics=topics, messages=messages, tamper=number == 2
        ).encode()
    return tree


def _grow_other_sessions(tree: MemoryTree, count: int) -> None:
    for n in range(count):
        session = f"other-{n // 100:04d}"
        tree.files[f"{session}/chapters/{n % 100 + 1:03d}-c.md"] = _chapter_text(
            n, session, title=f"Other work {n}", topics=("sync", "testing"),
            messages={"user": 1, "assistant": 1},
        ).encode()


def _with_rules(tree: MemoryTree, *, approve: tuple[str, ...], harness: str = "hostB") -> None:
    clock = FakeClock()
    for category, text in [
        ("testing", "Run `hatch run test tests/<dir> -x -q`, never the whole suite in a loop."),
        ("sync", "The store is the truth: repair by rebuilding the mirror, never by merging."),
        ("docs", "Docs use the user's words and real commands."),
    ]:
        propose_rule(tree, RuleProposal(category, text), harness_id="hostA", project_key="pk",
                     clock=clock, config=DEFAULTS)
    for rule_id in approve:
        rules = load_rules(tree, TreeShelf(tree), harness)
        approve_rule(tree, rules, rule_id, harness_id=harness, clock=clock)


def _notice(tree: MemoryTree, harness: str = "hostB", ctx: NoticeContext = CTX) -> str:
    return build_notice(tree, TreeShelf(tree), ctx, config=DEFAULTS, harness_id=harness).text


# -- goldens ------------------------------------------------------------------------------------


def test_golden_notice_without_rules() -> None:
    assert _notice(_session_tree()) == _golden("notice_without_rules.md", _notice(_session_tree()))


def test_with_no_core_rule_the_notice_is_byte_identical_to_a_build_without_rules() -> None:
    without = _golden("notice_without_rules.md", _notice(_session_tree()))
    tree = _session_tree()
    chapters = session_chapters(tree, TreeShelf(tree), SESSION)
    ctx = NoticeContext(**{**{f: getattr(CTX, f) for f in CTX.__slots__},
                           "ancestry": derive_ancestry(SESSION, chapters)})
    assert assemble_notice(ctx, chapters, config=DEFAULTS) == without  # rules=None: no rules code
    _with_rules(tree, approve=())  # proposed only
    assert _notice(tree) == without
    _with_rules(tree, approve=("hostA/001",), harness="hostA")  # core elsewhere only
    assert _notice(tree, "hostB") == without
    rules = load_rules(tree, TreeShelf(tree), "hostB")
    approve_rule(tree, rules, "hostA/002", harness_id="hostB", clock=FakeClock())
    rules = load_rules(tree, TreeShelf(tree), "hostB")
    revoke_rule(tree, rules, "hostA/002", harness_id="hostB", clock=FakeClock())
    assert _notice(tree, "hostB") == without  # revoked


def test_golden_notice_with_rules() -> None:
    tree = _session_tree()
    _with_rules(tree, approve=("hostA/001", "hostA/002"))
    text = _notice(tree)
    assert text == _golden("notice_with_rules.md", text)
    assert "Docs use the user's words" not in text  # proposed on this machine: affects nothing


def test_golden_notice_refused_over_budget() -> None:
    tree = _session_tree()
    _with_rules(tree, approve=("hostA/001", "hostA/002", "hostA/003"))
    config = DEFAULTS.replace(core_rules_budget_tokens=40)
    text = build_notice(tree, TreeShelf(tree), CTX, config=config, harness_id="hostB").text
    assert text == _golden("notice_rules_refused.md", text)


# -- sections -----------------------------------------------------------------------------------


def test_the_project_line_is_near_the_top() -> None:
    lines = _notice(_session_tree()).splitlines()
    assert lines.index(f"Project: dsh-chapters · {CTX.project_key}") <= 2


def test_a_path_derived_key_is_flagged() -> None:
    ctx = NoticeContext(project_slug="w", project_key="k", derivation="path-derived")
    text = assemble_notice(ctx, (), config=DEFAULTS)
    assert "path-derived key: unstable across machines" in text


def test_chapters_show_title_summary_link_and_message_counts_never_tokens() -> None:
    text = _notice(_session_tree())
    section = text.split("## Chapters of this session (3)\n", 1)[1].split("\n## ", 1)[0]
    assert "- Sync loop: pull, copy-in, push — We worked on: sync loop: pull, copy-in, push." in (
        section)
    assert ("  .dsh-chapters/sess-a1/chapters/001-sync-loop.md · 8 messages (assistant 5, user 3)"
            in section)
    assert "token" not in section


def test_a_title_that_begins_the_summary_is_not_said_twice() -> None:
    doc = Document(path="s/chapters/001-a.md", kind=DocumentKind.CHAPTER,
                   title="The retry loop gives up after one…",
                   summary="The retry loop gives up after one attempt on a 503.")
    text = assemble_notice(NoticeContext("p", "k", session_id="s"), [doc], config=DEFAULTS)
    assert "\n- The retry loop gives up after one attempt on a 503.\n" in text
    assert text.count("The retry loop") == 1


def test_a_chapter_whose_body_changed_is_marked_beside_it() -> None:
    lines = _notice(_session_tree()).splitlines()
    marked = [n for n, line in enumerate(lines) if MODIFIED_MARK in line]
    assert len(marked) == 1
    # beside it: on the path's line, or (past 100 columns) on the line right under it
    assert "002-timeouts-degrade-to-local-only.md" in " ".join(lines[marked[0] - 1:marked[0] + 1])


def test_more_chapters_than_the_limit_says_how_many_are_listed() -> None:
    docs = [Document(path=f"s/chapters/{n:03d}-c.md", kind=DocumentKind.CHAPTER, title=f"C{n}")
            for n in range(1, 21)]
    text = assemble_notice(NoticeContext("p", "k", session_id="s", words=CLI_WORDS), docs,
                           config=DEFAULTS.replace(notice_chapter_limit=5))
    assert ("The last 5 of 20 are listed (noticeChapterLimit); `chapters list` shows every one."
            in text)
    assert "- C20" in text and "- C16" in text and "- C15\n" not in text


def test_handoff_and_ancestry() -> None:
    text = _notice(_session_tree())
    assert "## In flight\nHalfway through the retry test" in text
    assert text.rstrip().endswith("Ancestry: sess-a1 → this continuation.")
    fresh = assemble_notice(NoticeContext("p", "k"), (), config=DEFAULTS)
    assert "## In flight" not in fresh
    assert "Ancestry: a new session (no parent)." in fresh
    docs = [Document(path="r/chapters/001-a.md", kind=DocumentKind.CHAPTER, title="a",
                     session_id="r"),
            Document(path="r/chapters/002-b.md", kind=DocumentKind.CHAPTER, title="b",
                     session_id="fork-1")]
    assert derive_ancestry("r", docs) == ("r", "fork-1")


def test_search_paragraph_points_at_the_command_and_the_shards() -> None:
    text = _notice(_session_tree())
    assert 'chapters search "<query>"' in text
    assert ".dsh-knowledge/index/<topic>.md" in text


def test_p3b_topic_matched_categories_render_when_the_core_block_is_refused() -> None:
    tree = _session_tree()  # this session's topics include sync and testing
    _with_rules(tree, approve=("hostA/001", "hostA/002", "hostA/003"))
    rules = load_rules(tree, TreeShelf(tree), "hostB")
    config = DEFAULTS.replace(core_rules_budget_tokens=50)
    selection = select_rules(rules, config=config, session_topics=("testing",))
    assert selection.core.refused and not selection.topic.refused
    text = assemble_notice(CTX, (), config=config, rules=selection)
    assert "## Core rules: refused, over budget" in text
    assert "## Rules for this session's topics (testing)" in text
    topic = text.split("## Rules for this session's topics (testing)\n", 1)[1].split("\n## ")[0]
    assert "- [testing] Run `hatch run test" in topic
    refused = text.split("## Core rules: refused, over budget\n", 1)[1].split("\n## ")[0]
    assert "never by merging" not in refused + topic  # refused: only its id and size
    assert "- hostA/002 [sync] 25 tokens\n" in text


# -- O(1) in corpus size (§1 invariant 6) --------------------------------------------------------


@pytest.mark.parametrize("with_rules", [False, True])
def test_the_notice_does_not_grow_with_the_corpus(with_rules: bool) -> None:
    texts = []
    opened = []
    for others in (10, 10_000):
        tree = _session_tree()
        if with_rules:
            _with_rules(tree, approve=("hostA/001", "hostA/002"))
        _grow_other_sessions(tree, others)
        shelf = TreeShelf(tree)
        texts.append(build_notice(tree, shelf, CTX, config=DEFAULTS, harness_id="hostB").text)
        opened.append(sorted(shelf.opened))
    assert len(texts[0]) == len(texts[1])
    assert texts[0] == texts[1]
    assert opened[0] == opened[1]  # the same files were read: none of the other sessions'
    assert not any(p.startswith("other-") for p in opened[1])


def test_the_notice_uses_the_callers_words_for_its_doors() -> None:
    """The core names no command: every door the notice points at is the caller's word."""
    words = NoticeWords(list_rules="<LR>", list_category="<LC>", revoke_rule="<RV>",
                        add_rule="<AD>", list_chapters="<LS>", search="<S>",
                        raise_budget="<MT>", search_topic="<ST>")
    tree = _session_tree()
    _with_rules(tree, approve=("hostA/001", "hostA/002", "hostA/003"))
    rules = load_rules(tree, TreeShelf(tree), "hostB")
    config = DEFAULTS.replace(core_rules_budget_tokens=50, notice_chapter_limit=1)
    selection = select_rules(rules, config=config, session_topics=("testing",))
    docs = [Document(path=f"s/chapters/{n:03d}-c.md", kind=DocumentKind.CHAPTER, title=f"C{n}")
            for n in range(1, 3)]
    ctx = NoticeContext("p", "k", session_id="s", words=words)
    text = assemble_notice(ctx, docs, config=config, rules=selection)
    assert "<LR> shows each text." in text and "Next: <RV> for rules" in text
    assert "add the parts with <AD>," in text and "<LS> shows every one." in text
    assert "search it: <S> ranks" in text and "ask again with <MT>. <ST> reads" in text
    assert "overlap it: <LC>, or read" in text
    assert "chapters " not in text.replace("chapters of", "").replace("chapters/", "")
