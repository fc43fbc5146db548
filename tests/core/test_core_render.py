"""Rendering (§2.4, §9, amendment 2026-09-21): verbatim body, chokepoint order, determinism."""

from __future__ import annotations

import hashlib

import pytest
from dsh_chapters_core.config import DEFAULTS, Config
from dsh_chapters_core.events import (
    AssistantMessage,
    InjectionKind,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_chapters_core.fences import parse_fenced_blocks
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.render import (
    Artifact,
    RenderedChapter,
    artifact_path,
    cap_text,
    render_chapter,
    slugify,
)
from dsh_chapters_core.signature import sign_turn
from dsh_chapters_core.turns import split_turns
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.conversation import Conversation

GHP = "ghp_" + "Q" * 36


def render(c: Conversation, config: Config = DEFAULTS, **kw: object) -> RenderedChapter:
    turns = split_turns(c.events).complete
    signatures = [sign_turn(t, config) for t in turns]
    return render_chapter(turns, signatures, session_id="sess-1", project_key="pk-1",
                          harness_id="mbp", config=config, **kw)  # type: ignore[arg-type]


def test_golden_chapter_bytes() -> None:
    c = Conversation().start().inject(InjectionKind.INSTRUCTIONS, "be terse")
    c.user("Fix the `auth` bug").call("Read", {"file_path": "src/auth.py"}, "def auth(): ...")
    c.assistant("Fixed.").end()
    got = render(c)
    body = (
        "## Turn · seq 1–7 · 2026-09-17T10:00:07Z\n\n"
        "⟦omitted:host-injected instructions, 8 chars⟧\n\n"
        "**User:**\n\n```text\nFix the `auth` bug\n```\n\n"
        '→ tool Read({"file_path": "src/auth.py"})\n\n'
        "← result Read:\n\n```text\ndef auth(): ...\n```\n\n"
        "**Assistant:**\n\n```text\nFixed.\n```\n"
    )
    sha = hashlib.sha256(body.encode()).hexdigest()
    assert got.body == body
    assert got.sha256 == sha
    assert got.text == (
        "---\n"
        'date: "2026-09-17T10:00:07Z"\n'
        'generated: {"summary": {"by": "deterministic"}, "title": {"by": "deterministic"}, '
        '"topics": {"by": "deterministic"}}\n'
        'harnessId: "mbp"\n'
        'kind: "chapter"\n'
        'messages: {"assistant": 1, "tool": 1, "user": 1}\n'
        'projectKey: "pk-1"\n'
        "seqRange: [1, 7]\n"
        'sessionId: "sess-1"\n'
        f'sha256: "{sha}"\n'
        'summary: "Fix the `auth` bug"\n'
        'title: "Fix the `auth` bug"\n'
        f"tokens: {DEFAULTS.estimate_tokens(body)}\n"
        'topics: ["auth", "bug", "fix", "fixed"]\n'
        "---\n" + body
    )
    assert got.slug == "fix-the-auth-bug"
    assert got.omissions == 1
    assert got.omitted == (("instructions", 1),)
    assert got.seq_range == (1, 7)
    assert got.messages == (("assistant", 1), ("tool", 1), ("user", 1))
    assert dict(got.frontmatter)["kind"] == "chapter"
    assert split_frontmatter(got.text)[1] == body


def test_large_results_become_redacted_artifacts_with_a_stub() -> None:
    big = f"line with {GHP}\n" + "row\n" * 3000
    c = Conversation().start().user("dump it").call("Bash", {"command": "cat big.log"}, big)
    c.assistant("here").end()
    got = render(c)
    (artifact,) = got.artifacts
    digest = hashlib.sha256(GHP.encode()).hexdigest()[:8]
    redacted = big.replace(GHP, f"⟦redacted:credential sha256={digest}⟧")
    assert artifact == Artifact(sha256=hashlib.sha256(redacted.encode()).hexdigest(), text=redacted)
    assert artifact.path == artifact_path(artifact.sha256) == (
        f"artifacts/{artifact.sha256[:2]}/{artifact.sha256}.txt"
    )
    stub = f"← result Bash: {artifact.path} ({len(redacted)} chars, 3001 lines)"
    assert stub in got.body.split("\n")
    assert GHP not in got.text
    assert got.redactions == (("github-token", 1),)


def test_floor_comes_from_config() -> None:
    c = Conversation().start().user("q").call("Read", {"file_path": "a.py"}, "x" * 40)
    c.assistant("a").end()
    assert render(c).artifacts == ()
    assert len(render(c, DEFAULTS.replace(tool_result_defer_floor_tokens=5)).artifacts) == 1


def test_a_repeated_delivery_keeps_only_the_last() -> None:
    c = Conversation().start().user("q").call("Read", {"file_path": "a.py"}, "FIRST delivery")
    c.result("call-1", "SECOND delivery").assistant("a").end()
    got = render(c)
    assert "FIRST" not in got.body
    assert "SECOND delivery" in got.body
    assert dict(got.messages)["tool"] == 1


def test_injections_are_screened_before_redaction_and_never_counted() -> None:
    c = Conversation().start()
    c.user(f"<system-reminder>skills: deploy with {GHP}</system-reminder>")
    c.user("real question <environment_context>cwd=/w</environment_context>")
    c.call("Read", {"file_path": "a.py"}, "body\n<system-reminder>runtime note</system-reminder>")
    c.assistant("answer").end()
    got = render(c)
    assert GHP not in got.body
    assert got.redactions == ()  # the secret left with the injection, before redaction
    assert got.omitted == (("runtime-context", 2), ("skill-catalog", 1))
    assert got.omissions == 3
    assert dict(got.messages)["user"] == 1
    assert got.title == "real question"


def test_reasoning_errors_compaction_and_one_line_calls() -> None:
    c = Conversation().start().user("q").reasoning("thinking\nhard")
    c.call("Bash", "echo 1\necho 2", "boom", is_error=True)
    c.compaction("summary").assistant("a").end()
    got = render(c)
    assert "**Reasoning:**\n\n```text\nthinking\nhard\n```" in got.body
    assert "→ tool Bash(echo 1\\necho 2)" in got.body
    assert "← result Bash (error):" in got.body
    assert "— compaction at seq 6 —" in got.body
    assert dict(got.messages) == {"assistant": 1, "tool": 1, "user": 1}


def test_many_turns_one_chapter() -> None:
    c = Conversation().turn("first request", "a1").turn("second", "a2")
    got = render(c)
    assert got.seq_range == (1, 8)
    assert got.body.count("## Turn") == 2
    assert got.title == "first request"
    assert dict(got.frontmatter)["date"] == c.events[-1].time


def test_no_turns_is_an_error() -> None:
    with pytest.raises(ValueError):
        render_chapter([], [], session_id="s", project_key="k", harness_id="h", config=DEFAULTS)


def test_a_chapter_without_prose_gets_a_seq_title() -> None:
    got = render(Conversation().start().end())
    assert got.title == "Chapter seq 1–2"
    assert got.slug == "chapter-seq-1-2"


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Fix the JWT refresh!", "fix-the-jwt-refresh"),
        ("Ümlaut café – déjà vu", "umlaut-cafe-deja-vu"),
        ("漢字だけ", "chapter"),
        ("", "chapter"),
        ("a" * 60, "a" * 48),
        ("word " * 20, "word-word-word-word-word-word-word-word-word-word"[:44]),
    ],
)
def test_slugify(title: str, slug: str) -> None:
    assert slugify(title, 48) == slug


@pytest.mark.parametrize(
    ("text", "limit", "capped"),
    [
        ("short", 10, "short"),
        ("one two three four five", 12, "one two…"),
        ("x" * 30, 10, "x" * 9 + "…"),
    ],
)
def test_cap_text(text: str, limit: int, capped: str) -> None:
    assert cap_text(text, limit) == capped
    assert len(cap_text(text, limit)) <= limit


def test_title_and_summary_caps_come_from_config() -> None:
    c = Conversation().turn("word " * 100, "ok")
    got = render(c, DEFAULTS.replace(title_max_chars=20, summary_max_chars=50))
    assert len(got.title) <= 20
    assert len(got.summary) <= 50


_prose = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<⟦"),
                 max_size=80) | st.sampled_from(["```", "x\n```\ny", "````\n", "\n\n", ""])


@settings(max_examples=150)
@given(st.lists(st.tuples(_prose, _prose), min_size=1, max_size=4))
def test_body_is_verbatim_and_deterministic(exchanges: list[tuple[str, str]]) -> None:
    c = Conversation()
    for user, assistant in exchanges:
        c.turn(user, assistant)
    got = render(c)
    again = render(c)
    assert got == again
    # A blank reply (nothing but whitespace) is not written: it holds nothing to keep.
    expected = [("text", t) for user, assistant in exchanges
                for t in (user, *((assistant,) if assistant.strip() else ()))]
    # Texts pass untouched unless a credential pattern happens to match (never here).
    assert parse_fenced_blocks(got.body) == expected
    block, body = split_frontmatter(got.text)
    assert body == got.body
    assert f'sha256: "{hashlib.sha256(body.encode()).hexdigest()}"' in block
    assert 1 <= len(got.slug) <= DEFAULTS.slug_max_chars


def test_a_turn_end_reason_is_written_into_the_chapter_and_a_completed_one_is_not() -> None:
    events = (TurnStart(0), UserMessage(1, "stop the build"), AssistantMessage(2, "stopp"),
              TurnEnd(3, reason="aborted"), TurnStart(4), UserMessage(5, "again"),
              AssistantMessage(6, "done"), TurnEnd(7))
    turns = split_turns(events).complete
    rendered = render_chapter(turns, [sign_turn(t, DEFAULTS) for t in turns], session_id="s",
                              project_key="k", harness_id="h", config=DEFAULTS)
    assert rendered.body.count("— turn ended: aborted —") == 1
    assert "turn ended: completed" not in rendered.body and "turn ended: \n" not in rendered.body


def test_a_menu_choice_titles_its_chapter_with_the_reply_it_got() -> None:
    c = Conversation().start().user("c").assistant("Going with option C: a per-client bucket.")
    got = render(c.end())
    assert got.title == "c → Going with option C: a per-client bucket."
    assert got.summary == got.title  # the notice lists it by the same words
    long_enough = render(Conversation().start().user("fix it").assistant("Done.").end())
    assert long_enough.title == "fix it"  # titleMinPromptChars (3) is met: the prompt stays


def test_an_empty_assistant_block_is_not_written_nor_counted() -> None:
    c = Conversation().start().user("Run the tests").assistant("")
    c.call("Bash", {"command": "pytest -q"}, "3 passed").assistant("All three pass.").end()
    got = render(c)
    assert got.body.count("**Assistant:**") == 1
    assert "All three pass." in got.body
    assert dict(got.messages) == {"assistant": 1, "tool": 1, "user": 1}
