"""The emergent vocabulary (§6.3): signals, thresholds, the fact it becomes, vocabulary.json."""

from __future__ import annotations

import json

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.curation import FactType, parse_facts
from dsh_chapters_core.search import AliasMap
from dsh_chapters_core.search.vocabulary import (
    alias_pattern,
    label_overlap,
    vocabulary_candidates,
    vocabulary_document,
)


def test_signals() -> None:
    assert alias_pattern("auth", "authentication", min_chars=3) == "prefix"
    assert alias_pattern("test", "tests", min_chars=3) == "plural"
    assert alias_pattern("query", "queries", min_chars=3) == "plural"
    assert alias_pattern("au", "authentication", min_chars=3) == ""
    assert alias_pattern("auth", "auth-middleware", min_chars=3) == ""  # narrower, not an alias
    assert label_overlap("auth-token", "auth-tokens") == 1.0
    assert label_overlap("auth-middleware", "auth") == 0.5
    assert label_overlap("deploy", "cache") == 0.0


def test_candidates_need_co_occurrence_and_a_look_alike() -> None:
    docs = [("auth", "authentication", "middleware")] * 3 + [("authentication",)] * 2
    (candidate,) = vocabulary_candidates(docs, config=DEFAULTS)
    # auth and middleware co-occur 3 times too, but share no form: never merged.
    assert (candidate.source, candidate.target) == ("auth", "authentication")
    assert candidate.co_occurrences == 3 and candidate.pattern == "prefix"
    assert candidate.reason == (
        "co-occurrence in 3 chapters; alias pattern prefix; token overlap 0.00")
    assert vocabulary_candidates(docs[:2], config=DEFAULTS) == ()  # below vocabCoMin
    assert vocabulary_candidates(docs[:2], config=DEFAULTS.replace(vocab_co_min=2))


def test_overlap_threshold_is_the_config_value() -> None:
    docs = [("auth-middleware", "auth-layer")] * 3  # Jaccard 1/3
    assert vocabulary_candidates(docs, config=DEFAULTS) == ()
    assert vocabulary_candidates(docs, config=DEFAULTS.replace(vocab_overlap_min=0.3))


def test_an_applied_candidate_is_a_plugin_fact_with_its_reason() -> None:
    docs = [("test", "tests")] * 4 + [("tests",)]
    (candidate,) = vocabulary_candidates(docs, config=DEFAULTS)
    fact = candidate.to_fact("2026-11-30T08:50:00Z")
    (parsed,) = parse_facts("h1", fact.to_line()).facts
    assert parsed.type is FactType.TOPIC_ALIAS and parsed.author == "plugin"
    assert (parsed.get("from"), parsed.get("to")) == ("test", "tests")
    assert "co-occurrence in 4 chapters" in parsed.get("reason")


def test_vocabulary_json_is_derived_from_the_alias_facts_alone() -> None:
    aliases = AliasMap.from_pairs([("authn", "auth"), ("auth", "authentication")])
    data = json.loads(vocabulary_document(aliases))
    assert data == {"version": 1,
                    "aliases": {"auth": "authentication", "authn": "authentication"},
                    "canonical": {"authentication": ["auth", "authn"]}}
    assert vocabulary_document(aliases) == vocabulary_document(
        AliasMap.from_pairs([("auth", "authentication"), ("authn", "auth")]))
