"""The chokepoint (§9) beyond chapters: a rule's text and file name, curation facts (notes,
labels, topic names), enrichment's titles, summaries and topics, and enrichment's recorded
reasons are all redacted before they are written."""

from __future__ import annotations

import json

from dsh_chapters_core.chokepoint import redact_for_store, redact_json
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.curation import FactType, append_facts, make_fact, parse_facts
from dsh_chapters_core.enrich.outcome import ChapterOutcome, EnrichAction, EnrichReason
from dsh_chapters_core.enrich.proposal import Proposal, validate_answer
from dsh_chapters_core.redact import marker
from dsh_chapters_core.rules import RuleProposal, propose_rule
from dsh_chapters_core.search.aliases import AliasMap
from dsh_chapters_core.testing.fakes_transport import FakeClock, MemoryTree

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzQ8vN3tLs2Hk"
GHP = "ghp_" + "Zq7RkW2mXo9TfB4nLc8VyD1sHa6JpE3uGi5K"
AKIA = "AKIA" + "QX4TNB7ZLM2KWP9R"


def _everything(tree: MemoryTree) -> str:
    return "\n".join([*tree.files, *(b.decode() for b in tree.files.values())])


def test_a_rule_with_a_credential_is_stored_redacted_file_name_included() -> None:
    tree = MemoryTree()
    result = propose_rule(
        tree, RuleProposal("security", f"Never paste AWS_SECRET_ACCESS_KEY={AWS_SECRET}"),
        harness_id="hostA", project_key="pk", clock=FakeClock(), config=DEFAULTS)
    stored = _everything(tree)
    assert AWS_SECRET not in stored
    assert AWS_SECRET.lower() not in stored.lower()  # the slug lower-cases
    assert marker(AWS_SECRET) in result.rule.text
    assert marker(AWS_SECRET) in tree.files[result.rule.path].decode()
    # a key as the title's start: the file name holds the marker's words, never the key
    titled = propose_rule(tree, RuleProposal(f"ops {AKIA}", f"{AKIA} is the deploy key"),
                          harness_id="hostA", project_key="pk", clock=FakeClock(),
                          config=DEFAULTS)
    assert AKIA.lower() not in titled.rule.path.lower()
    assert "redacted-credential" in titled.rule.path
    assert AKIA not in _everything(tree)


def test_the_same_rule_with_the_same_credential_is_one_rule() -> None:
    tree = MemoryTree()
    kwargs = {"harness_id": "hostA", "project_key": "pk", "clock": FakeClock(),
              "config": DEFAULTS}
    first = propose_rule(tree, RuleProposal("ops", f"token {GHP}"), **kwargs)  # type: ignore[arg-type]
    again = propose_rule(tree, RuleProposal("ops", f"token {GHP}"), existing=[first.rule],
                         **kwargs)  # type: ignore[arg-type]
    assert first.created and not again.created


def test_custom_patterns_apply_to_rules_too() -> None:
    tree = MemoryTree()
    config = DEFAULTS.replace(redaction_patterns=(r"EMP-\d{6}",))
    propose_rule(tree, RuleProposal("hr", "Never log EMP-778812"), harness_id="hostA",
                 project_key="pk", clock=FakeClock(), config=config)
    assert "EMP-778812" not in _everything(tree)


def test_every_string_of_a_curation_fact_is_redacted_as_it_is_appended() -> None:
    tree = MemoryTree()
    facts = (
        make_fact(FactType.NOTE, path="s1/chapters/001-x.md", text=f"the key was {AKIA}"),
        make_fact(FactType.GROUP, chapters=["a", f"b {GHP}"], label=f"deploy with {GHP}"),
        make_fact(FactType.TOPIC_ALIAS, **{"from": "auth", "to": "authentication"}),
    )
    path = append_facts(tree, "hostA", facts)
    written = tree.files[path].decode()
    assert AKIA not in written and GHP not in written
    parsed = parse_facts("hostA", written).facts
    assert parsed[0].get("text") == f"the key was {marker(AKIA)}"
    assert parsed[1].get("chapters") == ["a", f"b {marker(GHP)}"]
    assert parsed[2].get("to") == "authentication"  # nothing to redact: unchanged bytes


def test_an_enrichment_answer_is_redacted_before_it_is_capped_or_slugged() -> None:
    answer = json.dumps({
        "title": f"Rotate {GHP} after the leak",
        "summary": f"The deploy used AWS_SECRET_ACCESS_KEY={AWS_SECRET} from the .env.",
        "topics": ["deploy", f"key {AKIA}"],
    })
    proposal = validate_answer(answer, config=DEFAULTS, aliases=AliasMap.from_pairs(()))
    assert isinstance(proposal, Proposal)
    text = json.dumps([proposal.title, proposal.summary, *proposal.topics, *proposal.unvetted])
    for secret in (GHP, AWS_SECRET, AKIA):
        assert secret not in text and secret.lower() not in text.lower()
    assert marker(GHP) in proposal.title


def test_enrichment_records_no_credential_a_server_quoted() -> None:
    outcome = ChapterOutcome(path="s/chapters/001-x.md", action=EnrichAction.FALLBACK,
                             reason=EnrichReason.AUTH,
                             detail=f"401: invalid key {AKIA} (Authorization: Bearer {GHP})")
    detail = outcome.to_json()["detail"]
    assert AKIA not in detail and GHP not in detail


def test_redact_json_reaches_keys_and_nested_values() -> None:
    value = {"a": [f"x {GHP}", {f"k {AKIA}": 1}], "n": 3, "t": True}
    out = redact_json(value)
    assert GHP not in json.dumps(out) and AKIA not in json.dumps(out)
    assert out["n"] == 3 and out["t"] is True
    assert redact_for_store("plain words") == "plain words"
