"""The enrich use cases on fakes (§6.1–6.2): queue, drain, idempotence, fallback, the guard."""

from __future__ import annotations

import json

import pytest
from dsh_chapters_core.curation import FactType, make_fact
from dsh_chapters_core.enrich.chapter import parse_chapter_file
from dsh_chapters_core.enrich.outcome import EnrichAction, EnrichReason
from dsh_chapters_core.enrich.queue import (
    STATE_PATH,
    DrainCause,
    ModelRoute,
    drain_decision,
    effective_route,
    launch_after_archive,
    read_state,
    write_model_override,
)
from dsh_chapters_core.enrich.run import (
    drain,
    enqueue_archived,
    enqueue_own_chapters,
    enrichment_report,
)
from dsh_chapters_core.errors import BodyChangedError
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.ports.model import ModelCall, ModelError, ModelFailure
from dsh_chapters_core.testing.fakes_model import ScriptedDoor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.enrich_corpus import HERE, ROUTE, Corpus, answer


def _queue(corpus: Corpus, paths: list[str]) -> int:
    return enqueue_archived(store_tree=corpus.tree, lock=corpus.lock, clock=corpus.clock,
                            config=corpus.config, paths=paths)


def _drain(corpus: Corpus, door: ScriptedDoor, cause: DrainCause = DrainCause.MANUAL,
           progress: list[tuple[int, int, str]] | None = None):
    def opener(route: ModelRoute) -> ScriptedDoor:
        assert route.route == door.route
        return door

    def note(index: int, total: int, outcome) -> None:
        if progress is not None:
            progress.append((index, total, str(outcome.action)))

    return drain(store=corpus.store, store_tree=corpus.tree, lock=corpus.lock,
                 clock=corpus.clock, config=corpus.config, open_door=opener, harness_id=HERE,
                 cause=cause, progress=note)


def _archived(corpus: Corpus, session: str = "sess-1") -> list[str]:
    paths = corpus.archive(session)
    assert _queue(corpus, paths) == len(paths)
    return paths


def test_an_archive_only_queues_and_a_drain_enriches_with_progress() -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    assert read_state(corpus.tree).queued == tuple(paths)
    door = ScriptedDoor(route=ROUTE, script=[answer()])
    steps: list[tuple[int, int, str]] = []
    report = _drain(corpus, door, progress=steps)
    assert steps == [(i, len(paths), "enriched") for i in range(1, len(paths) + 1)]
    assert report.summary is not None and report.summary.enriched == len(paths)
    assert report.summary.calls == len(paths) and report.summary.left == 0
    assert door.closed == 1
    for path in paths:
        fields = corpus.fields(path)
        assert fields["title"] == "Fix the token refresh"
        assert fields["topics"] == ["auth", "token-refresh"]
        assert fields["unvetted"] == ["auth", "token-refresh"]
    assert read_state(corpus.tree).queued == ()


def test_the_body_is_never_touched() -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    bodies = {p: corpus.body(p) for p in paths}
    _drain(corpus, ScriptedDoor(route=ROUTE, script=[answer()]))
    assert {p: split_frontmatter(corpus.store.files[p])[1] for p in paths} == bodies


def test_enriching_twice_changes_no_byte_and_calls_no_model() -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    _drain(corpus, ScriptedDoor(route=ROUTE, script=[answer()]))
    first = corpus.chapters()
    corpus.clock.advance(3_600_000)
    door = ScriptedDoor(route=ROUTE, script=[answer(title="Something else")])
    assert enqueue_own_chapters(store=corpus.store, store_tree=corpus.tree, lock=corpus.lock,
                                clock=corpus.clock, config=corpus.config,
                                harness_id=HERE) == len(paths)
    report = _drain(corpus, door)
    assert door.calls == [] and report.summary is not None
    assert report.summary.skipped == len(paths)
    assert corpus.chapters() == first


def test_a_newer_model_re_annotates_and_records_its_provenance() -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    _drain(corpus, ScriptedDoor(route=ROUTE, script=[answer()]))
    newer = "fake/enricher-2"
    corpus.config = corpus.config.replace(enrichment_model=newer)
    corpus.clock.advance(60_000)
    enqueue_own_chapters(store=corpus.store, store_tree=corpus.tree, lock=corpus.lock,
                         clock=corpus.clock, config=corpus.config, harness_id=HERE)
    report = _drain(corpus, ScriptedDoor(route=newer, script=[answer(title="Better title")]))
    assert {o.reason for o in report.outcomes} == {EnrichReason.NEWER_MODEL}
    chapter = parse_chapter_file(paths[0], corpus.store.files[paths[0]])
    assert chapter is not None and chapter.fields["title"] == "Better title"
    assert [(p.by, p.model) for p in chapter.chain("title")] == [
        ("model", newer), ("model", ROUTE), ("deterministic", "")]
    assert chapter.chain("title")[0].at > chapter.chain("title")[1].at


def test_a_newer_vocabulary_re_annotates_and_vets_known_labels() -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    _drain(corpus, ScriptedDoor(route=ROUTE, script=[answer()]))
    fact = make_fact(FactType.TOPIC_ALIAS, author="plugin", at="2026-11-30T09:00:00Z",
                     **{"from": "auth", "to": "authentication"})
    corpus.tree.write(f"edits/{HERE}/curation.jsonl", (fact.to_line() + "\n").encode())
    enqueue_own_chapters(store=corpus.store, store_tree=corpus.tree, lock=corpus.lock,
                         clock=corpus.clock, config=corpus.config, harness_id=HERE)
    report = _drain(corpus, ScriptedDoor(route=ROUTE, script=[answer()]))
    assert {o.reason for o in report.outcomes} == {EnrichReason.NEWER_VOCABULARY}
    fields = corpus.fields(paths[0])
    assert fields["topics"] == ["authentication", "token-refresh"]
    assert fields["unvetted"] == ["token-refresh"]


def test_twice_invalid_keeps_the_deterministic_values_and_provenance_says_so() -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    before = corpus.chapters()
    report = _drain(corpus, ScriptedDoor(route=ROUTE, script=["nope", '{"title": 1}']))
    assert {(o.action, o.reason) for o in report.outcomes} == {
        (EnrichAction.FALLBACK, EnrichReason.INVALID_TWICE)}
    assert corpus.chapters() == before  # never blanked, never half-written
    for path in paths:
        chapter = parse_chapter_file(path, corpus.store.files[path])
        assert chapter is not None and chapter.fields["title"]
        assert [p.by for p in chapter.chain("title")] == ["deterministic"]
    assert read_state(corpus.tree).queued == ()  # the chapter's own fault: not retried
    rows = enrichment_report(store=corpus.store, store_tree=corpus.tree, harness_id=HERE)
    assert {r.status for r in rows} == {"fallback"}
    assert {r.values_by for r in rows} == {"deterministic"}


@pytest.mark.parametrize("failure", [ModelFailure.DOWN, ModelFailure.TIMEOUT])
def test_a_down_or_slow_server_is_asked_once_and_the_rest_waits(failure: ModelFailure) -> None:
    corpus = Corpus()
    paths = _archived(corpus) + _archived(corpus, "sess-2")
    before = corpus.chapters()
    door = ScriptedDoor(route=ROUTE, script=[ModelError(failure, "no answer")])
    report = _drain(corpus, door)
    assert len(door.calls) == 1
    assert report.summary is not None and report.summary.fallback == 1
    assert report.summary.deferred == len(paths) - 1
    assert read_state(corpus.tree).queued == tuple(paths)  # all stay queued
    assert corpus.chapters() == before
    again = _drain(corpus, ScriptedDoor(route=ROUTE, script=[answer()]))
    assert again.summary is not None and again.summary.enriched == len(paths)


def test_the_writer_lock_is_never_held_across_a_model_call() -> None:
    corpus = Corpus()
    _archived(corpus)

    def respond(call: ModelCall) -> str:
        assert not corpus.lock.held, "a model call under the writer lock would block archives"
        return answer()

    report = _drain(corpus, ScriptedDoor(route=ROUTE, responder=respond))
    assert report.summary is not None and report.summary.enriched == 2


def test_a_body_changed_during_the_call_is_refused() -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    target = paths[0]

    def respond(call: ModelCall) -> str:
        # Someone edits the body while the model thinks (the file is not ours to overwrite).
        corpus.store.files[target] = corpus.store.files[target] + "edited\n"
        return answer()

    report = _drain(corpus, ScriptedDoor(route=ROUTE, responder=respond))
    refused = [o for o in report.outcomes if o.path == target]
    assert refused[0].action is EnrichAction.REFUSED
    assert refused[0].reason is EnrichReason.BODY_CHANGED
    assert corpus.store.files[target].endswith("edited\n")


def test_the_store_write_itself_refuses_another_body() -> None:
    corpus = Corpus()
    path = corpus.archive()[0]
    fm, _ = split_frontmatter(corpus.store.files[path])
    with corpus.lock.hold(1), pytest.raises(BodyChangedError):
        corpus.store.rewrite_frontmatter(path, f"---\n{fm}---\n", "0" * 64)


def test_a_machine_enriches_only_the_chapters_it_authored() -> None:
    corpus = Corpus()
    ours = corpus.archive("sess-1")
    theirs = corpus.archive("sess-2", harness_id="desktop")
    _queue(corpus, ours + theirs)
    door = ScriptedDoor(route=ROUTE, script=[answer()])
    report = _drain(corpus, door)
    actions = {o.path: (o.action, o.reason) for o in report.outcomes}
    assert {actions[p] for p in theirs} == {(EnrichAction.SKIPPED, EnrichReason.NOT_OURS)}
    assert {actions[p] for p in ours} == {(EnrichAction.ENRICHED, EnrichReason.NEW)}
    assert len(door.calls) == len(ours)
    assert enqueue_own_chapters(store=corpus.store, store_tree=corpus.tree, lock=corpus.lock,
                                clock=corpus.clock, config=corpus.config, harness_id=HERE) == 2


def test_the_kill_switch_is_a_pure_no_op() -> None:
    corpus = Corpus()
    corpus.config = corpus.config.replace(enrichment_enabled=False)
    paths = corpus.archive()
    assert _queue(corpus, paths) == 0
    assert not corpus.tree.exists(STATE_PATH)
    door = ScriptedDoor(route=ROUTE, script=[answer()])
    report = _drain(corpus, door)
    assert not report.decision.run and door.calls == [] and door.closed == 0
    assert "enrichmentEnabled" in report.decision.reason
    assert not corpus.tree.exists(STATE_PATH)


def test_without_a_model_nothing_is_queued() -> None:
    corpus = Corpus()
    corpus.config = corpus.config.replace(enrichment_model="")
    assert _queue(corpus, corpus.archive()) == 0


def test_the_durable_override_wins_over_the_config() -> None:
    corpus = Corpus()
    assert effective_route(corpus.config, corpus.tree) == ModelRoute(ROUTE, "", "config")
    write_model_override(corpus.tree, "ollama/qwen3:8b", "http://127.0.0.1:9/v1")
    assert effective_route(corpus.config, corpus.tree) == ModelRoute(
        "ollama/qwen3:8b", "http://127.0.0.1:9/v1", "override")
    write_model_override(corpus.tree, "", "")  # `chapters enrich model clear`
    assert effective_route(corpus.config, corpus.tree).origin == "config"


# ---------------------------------------------------------------------------------------------
# Triggers (§6.2)


def _state(corpus: Corpus):
    return read_state(corpus.tree)


@pytest.mark.parametrize(("trigger", "after_push", "idle"), [
    ("both", True, True), ("afterPush", True, False), ("idle", False, True),
    ("manual", False, False),
])
def test_triggers_decide_which_automatic_drain_runs(trigger: str, after_push: bool,
                                                    idle: bool) -> None:
    corpus = Corpus()
    corpus.config = corpus.config.replace(enrichment_trigger=trigger, enrichment_idle_ms=1000,
                                          enrichment_batch_cap=2)
    _archived(corpus)
    _archived(corpus, "sess-2")
    route = effective_route(corpus.config, corpus.tree)
    push = drain_decision(DrainCause.AFTER_PUSH, config=corpus.config, route=route,
                          state=_state(corpus), now=corpus.clock.now())
    assert push.run is after_push and (not push.run or push.limit == 2)
    corpus.clock.advance(1000)
    quiet = drain_decision(DrainCause.IDLE, config=corpus.config, route=route,
                           state=_state(corpus), now=corpus.clock.now())
    assert quiet.run is idle
    manual = drain_decision(DrainCause.MANUAL, config=corpus.config, route=route,
                            state=_state(corpus), now=corpus.clock.now())
    assert manual.run and manual.limit is None
    expected = (DrainCause.AFTER_PUSH if after_push else DrainCause.IDLE if idle else None)
    assert launch_after_archive(config=corpus.config, route=route, pushed=True) is expected


def test_idle_waits_out_the_window_after_the_last_archive() -> None:
    corpus = Corpus()
    corpus.config = corpus.config.replace(enrichment_trigger="idle", enrichment_idle_ms=60_000)
    _archived(corpus)
    route = effective_route(corpus.config, corpus.tree)
    corpus.clock.advance(30_000)
    _archived(corpus, "sess-2")  # activity resets the window
    corpus.clock.advance(40_000)
    early = drain_decision(DrainCause.IDLE, config=corpus.config, route=route,
                           state=_state(corpus), now=corpus.clock.now())
    assert not early.run and early.due_at == "2026-11-30T08:51:30Z"
    corpus.clock.advance(20_000)
    assert drain_decision(DrainCause.IDLE, config=corpus.config, route=route,
                          state=_state(corpus), now=corpus.clock.now()).run


def test_an_automatic_drain_takes_one_batch() -> None:
    corpus = Corpus()
    corpus.config = corpus.config.replace(enrichment_trigger="both", enrichment_batch_cap=3)
    paths = _archived(corpus) + _archived(corpus, "sess-2")
    report = _drain(corpus, ScriptedDoor(route=ROUTE, script=[answer()]), DrainCause.AFTER_PUSH)
    assert report.summary is not None and report.summary.enriched == 3
    assert read_state(corpus.tree).queued == tuple(paths[3:])
    assert report.summary.left == len(paths) - 3


def test_state_survives_a_reread_and_an_unreadable_file_is_an_empty_queue() -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    _drain(corpus, ScriptedDoor(route=ROUTE, script=["x", "y"]))
    state = read_state(corpus.tree)
    assert state.last_run is not None and state.last_run.fallback == len(paths)
    assert json.loads(corpus.tree.read(STATE_PATH))["lastRun"]["cause"] == "manual"
    corpus.tree.write(STATE_PATH, b"{not json")
    assert read_state(corpus.tree).queued == ()


# ---------------------------------------------------------------------------------------------
# Never blank, never the body: whatever a model answers


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.one_of(
    st.text(max_size=200),
    st.builds(lambda t, s, ts: json.dumps({"title": t, "summary": s, "topics": ts}),
              st.text(max_size=120), st.text(max_size=300),
              st.lists(st.text(max_size=30), max_size=12)),
), min_size=2, max_size=2))
def test_no_answer_blanks_a_chapter_or_touches_its_body(answers: list[str]) -> None:
    corpus = Corpus()
    paths = _archived(corpus)
    bodies = {p: corpus.body(p) for p in paths}
    _drain(corpus, ScriptedDoor(route=ROUTE, script=answers))
    for path in paths:
        chapter = parse_chapter_file(path, corpus.store.files[path])
        assert chapter is not None, "the frontmatter must stay in the archive's form"
        assert chapter.body == bodies[path] and chapter.claimed_sha256 == chapter.body_sha256
        assert str(chapter.fields["title"]).strip() and str(chapter.fields["summary"]).strip()
        assert chapter.fields["topics"]
