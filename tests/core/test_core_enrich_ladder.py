"""The enrichment ladder on fakes (§6.1): the slice, validation, retry once, keep, provenance."""

from __future__ import annotations

import json

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.enrich.chapter import (
    parse_chapter_file,
    prepend_links,
    provenance_chain,
)
from dsh_chapters_core.enrich.ladder import (
    ask_model,
    enriched_frontmatter,
    plan_chapter,
    stale_reason,
)
from dsh_chapters_core.enrich.outcome import EnrichReason
from dsh_chapters_core.enrich.proposal import Invalid, Proposal, validate_answer
from dsh_chapters_core.enrich.slice import cheap_slice, first_call, labelled_blocks
from dsh_chapters_core.frontmatter import dump_frontmatter, split_frontmatter
from dsh_chapters_core.ports.model import ModelError, ModelFailure
from dsh_chapters_core.search.aliases import EMPTY_ALIASES, AliasMap
from dsh_chapters_core.testing.fakes_model import ScriptedDoor

from tests.core.conversation import Conversation
from tests.core.enrich_corpus import HERE, ROUTE, Corpus, answer, user_text

# ---------------------------------------------------------------------------------------------
# The chapter file and its provenance


def test_a_rendered_chapter_round_trips_and_carries_deterministic_provenance() -> None:
    corpus = Corpus()
    path = corpus.archive()[0]
    chapter = parse_chapter_file(path, corpus.store.files[path])
    assert chapter is not None
    assert chapter.frontmatter + chapter.body == corpus.store.files[path]
    assert chapter.claimed_sha256 == chapter.body_sha256
    assert [p.by for p in chapter.chain("title")] == ["deterministic"]


@pytest.mark.parametrize("text", [
    "no frontmatter at all\n",
    "---\ntitle: plain yaml, not JSON\n---\nbody\n",
    '---\ntitle: "a"\ntitle: "b"\n---\nbody\n',
    '---\nb: 1\na: 2\n---\nbody\n',  # unsorted: not what the archive writes
])
def test_frontmatter_not_in_the_archive_form_is_not_parsed(text: str) -> None:
    assert parse_chapter_file("s/chapters/001-x.md", text) is None


def test_prepending_turns_each_class_into_a_newest_first_chain() -> None:
    generated = {"title": {"by": "deterministic"}, "summary": {"by": "deterministic"}}
    link = {"at": "2026-01-01T00:00:00Z", "by": "model", "model": "m"}
    once = prepend_links(generated, {"title": link})
    assert once["title"] == [link, {"by": "deterministic"}]
    assert once["summary"] == {"by": "deterministic"}  # untouched classes stay as they were
    twice = prepend_links(once, {"title": {**link, "model": "n"}})
    assert [p.model for p in provenance_chain(twice, "title")] == ["n", "m", ""]


# ---------------------------------------------------------------------------------------------
# The cheap slice


def test_the_slice_holds_the_requests_first_and_last_answers_and_a_bounded_head() -> None:
    c = Conversation()
    c.turn("First request about src/a.py", "First answer.")
    c.turn("Second request", "Middle answer.")
    c.turn("Third request", "Last answer " + "x" * 5000)
    corpus = Corpus()
    path = corpus.archive(c=c)[0]
    body = corpus.body(path)
    config = DEFAULTS.replace(enrichment_slice_chars=200, enrichment_body_tokens=10)
    piece = cheap_slice(body, config)
    assert "First request" in piece.user_requests and "Third request" in piece.user_requests
    assert piece.first_assistant == "First answer."
    assert piece.last_assistant.startswith("Last answer") and len(piece.last_assistant) <= 200
    assert "Middle answer" not in piece.text()
    assert len(piece.body_head) <= 10 * config.chars_per_token
    call = first_call(piece, config)
    assert call.max_tokens == config.enrichment_max_tokens
    assert call.timeout_s == config.enrichment_timeout_ms / 1000
    assert [m.role for m in call.messages] == ["system", "user"]
    assert '"topics"' in call.messages[0].content


def test_labelled_blocks_survive_backticks_inside_messages() -> None:
    c = Conversation()
    c.turn("Run ```code``` please", "Done: ````fence```` inside.")
    corpus = Corpus()
    body = corpus.body(corpus.archive(c=c)[0])
    assert labelled_blocks(body) == [("User", "Run ```code``` please"),
                                     ("Assistant", "Done: ````fence```` inside.")]


# ---------------------------------------------------------------------------------------------
# Validation and the canonicalizer


def _valid(text: str, aliases: AliasMap = EMPTY_ALIASES) -> Proposal:
    result = validate_answer(text, config=DEFAULTS, aliases=aliases)
    assert isinstance(result, Proposal), result
    return result


def test_a_wrapped_answer_from_a_thinking_model_is_read() -> None:
    text = "<think>The user wants JSON.</think>\n```json\n" + answer() + "\n```"
    proposal = _valid(text)
    assert proposal.title == "Fix the token refresh"
    assert proposal.topics == ("auth", "token-refresh")


@pytest.mark.parametrize(("text", "problem"), [
    ("Sure, here it is: the chapter fixed auth.", "no JSON object"),
    ('{"title": "x", "summary": "y", "topics": ["a"],}', "not valid JSON"),
    ('["title"]', "no JSON object"),
    ('{"summary": "y", "topics": ["a"]}', '"title" is missing'),
    ('{"title": "  ", "summary": "y", "topics": ["a"]}', '"title" is empty'),
    ('{"title": "Fix auth. Add tests.", "summary": "y", "topics": ["a"]}', "2 sentences"),
    ('{"title": "x", "summary": 3, "topics": ["a"]}', "not a string"),
    ('{"title": "x", "summary": "y", "topics": "auth"}', "not a list of strings"),
    ('{"title": "x", "summary": "y", "topics": ["!!", "--"]}', "no label with a word"),
    (json.dumps({"title": "x", "summary": "y", "topics": [f"t{i}" for i in range(11)]}),
     "11 labels, at most 10"),
])
def test_invalid_answers_say_what_is_wrong(text: str, problem: str) -> None:
    result = validate_answer(text, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert isinstance(result, Invalid) and problem in result.problem


def test_topics_enter_only_through_the_canonicalizer_and_unknown_ones_are_unvetted() -> None:
    aliases = AliasMap.from_pairs([("auth", "authentication")])
    proposal = _valid(answer(topics=("Auth", "authentication", "Token Refresh", "auth")), aliases)
    assert proposal.topics == ("authentication", "token-refresh")  # canonical, distinct
    assert proposal.unvetted == ("token-refresh",)
    assert _valid(answer(topics=("auth",))).unvetted == ("auth",)  # §6.3: first runs


def test_long_titles_and_summaries_are_capped_like_the_deterministic_ones() -> None:
    proposal = _valid(answer(title="word " * 60, summary="word " * 200))
    assert len(proposal.title) <= DEFAULTS.title_max_chars
    assert len(proposal.summary) <= DEFAULTS.summary_max_chars


# ---------------------------------------------------------------------------------------------
# The ladder


def _chapter(corpus: Corpus):
    path = corpus.archive()[0]
    chapter = parse_chapter_file(path, corpus.store.files[path])
    assert chapter is not None
    return chapter


def test_a_valid_first_answer_is_one_call() -> None:
    door = ScriptedDoor(script=[answer()])
    result = ask_model(_chapter(Corpus()), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.proposal is not None and result.calls == 1 and len(door.calls) == 1


def test_an_invalid_answer_is_retried_once_with_the_problem_said() -> None:
    door = ScriptedDoor(script=["no json here", answer()])
    result = ask_model(_chapter(Corpus()), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.proposal is not None and result.calls == 2
    retry = door.calls[1]
    assert [m.role for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert retry.messages[2].content == "no json here"
    assert "no JSON object" in retry.messages[3].content


def test_twice_invalid_gives_up_with_the_last_problem() -> None:
    door = ScriptedDoor(script=["no json", '{"title": "x"}'])
    result = ask_model(_chapter(Corpus()), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.proposal is None and result.calls == 2
    assert result.failure is EnrichReason.INVALID_TWICE and '"summary"' in result.detail


def test_a_malformed_answer_counts_as_invalid_and_is_retried() -> None:
    door = ScriptedDoor(script=[ModelError(ModelFailure.MALFORMED, "no choices"), answer()])
    result = ask_model(_chapter(Corpus()), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.proposal is not None and result.calls == 2


@pytest.mark.parametrize(("failure", "reason"), [
    (ModelFailure.DOWN, EnrichReason.DOWN),
    (ModelFailure.TIMEOUT, EnrichReason.TIMEOUT),
    (ModelFailure.AUTH, EnrichReason.AUTH),
    (ModelFailure.HTTP, EnrichReason.HTTP),
])
def test_a_server_failure_is_never_retried(failure: ModelFailure, reason: EnrichReason) -> None:
    door = ScriptedDoor(script=[ModelError(failure, "boom"), answer()])
    result = ask_model(_chapter(Corpus()), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.proposal is None and result.calls == 1 and result.failure is reason


def test_the_slice_reaches_the_model_and_nothing_else_does() -> None:
    door = ScriptedDoor(script=[answer()])
    ask_model(_chapter(Corpus()), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    sent = user_text(door.calls[0])
    assert "Fix the token refresh in src/auth/middleware.py" in sent
    assert "projectKey" not in sent and "sha256" not in sent  # no frontmatter is sent


# ---------------------------------------------------------------------------------------------
# The new frontmatter


def test_the_write_changes_only_model_owned_fields_and_prepends_provenance() -> None:
    corpus = Corpus()
    chapter = _chapter(corpus)
    proposal = _valid(answer())
    block = enriched_frontmatter(chapter, proposal, route=ROUTE, vocab_key="v1",
                                 at="2026-11-30T09:00:00Z")
    after = parse_chapter_file(chapter.path, block + chapter.body)
    assert after is not None and split_frontmatter(block + chapter.body)[1] == chapter.body
    changed = {k for k in set(after.fields) | set(chapter.fields)
               if after.fields.get(k) != chapter.fields.get(k)}
    assert changed == {"title", "summary", "topics", "unvetted", "generated"}
    assert after.fields["sha256"] == chapter.claimed_sha256
    for field_class in ("title", "summary", "topics"):
        chain = after.chain(field_class)
        assert [(p.by, p.model) for p in chain] == [("model", ROUTE), ("deterministic", "")]
    assert after.head_link("topics")["vocabulary"] == "v1"
    assert block == dump_frontmatter(dict(after.fields))  # deterministic bytes


def test_staleness_names_why_a_chapter_needs_a_pass() -> None:
    corpus = Corpus()
    chapter = _chapter(corpus)
    assert stale_reason(chapter, ROUTE, "v1") is EnrichReason.NEW
    block = enriched_frontmatter(chapter, _valid(answer()), route=ROUTE, vocab_key="v1",
                                 at="2026-11-30T09:00:00Z")
    done = parse_chapter_file(chapter.path, block + chapter.body)
    assert done is not None
    assert stale_reason(done, ROUTE, "v1") is None
    assert stale_reason(done, "fake/enricher-2", "v1") is EnrichReason.NEWER_MODEL
    assert stale_reason(done, ROUTE, "v2") is EnrichReason.NEWER_VOCABULARY


def test_the_plan_guards_ownership_and_the_body_hash() -> None:
    corpus = Corpus()
    chapter = _chapter(corpus)
    text = chapter.frontmatter + chapter.body
    kwargs = {"route": ROUTE, "vocab_key": "v", "harness_id": HERE, "session_owner": HERE}
    assert plan_chapter(chapter.path, None, **kwargs).reason is EnrichReason.MISSING  # type: ignore[union-attr]
    foreign = plan_chapter(chapter.path, text, **{**kwargs, "harness_id": "desktop"})
    assert foreign.reason is EnrichReason.NOT_OURS  # type: ignore[union-attr]
    adopted = plan_chapter(chapter.path, text, **{**kwargs, "session_owner": "desktop"})
    assert adopted.reason is EnrichReason.NOT_OURS  # type: ignore[union-attr]
    edited = plan_chapter(chapter.path, chapter.frontmatter + chapter.body + "more\n", **kwargs)
    assert edited.reason is EnrichReason.BODY_CHANGED  # type: ignore[union-attr]
    hand = plan_chapter(chapter.path, "---\ntitle: x\n---\nbody\n", **kwargs)
    assert hand.reason is EnrichReason.UNREADABLE  # type: ignore[union-attr]
