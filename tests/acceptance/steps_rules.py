"""Steps of `features/rules.feature`: proposing, approving per machine, and the notice.

Machines, the pool and syncing are the shared steps of `steps_common`. Every step here runs
`chapters` through the composition root in the machine's own workspace; rule texts are read
back from the proposing machine's store, so no step keeps state of its own.
"""

from __future__ import annotations

import json
from typing import Any

from dsh_chapters_core.config import DEFAULTS
from pytest_bdd import given, parsers, then, when

from tests.acceptance.steps_common import Machine, MakeMachine


def _rule(machine: Machine, rule_id: str) -> dict[str, Any]:
    rules = machine.ok("rule", "list", "--all", "--json").json()["rules"]
    found = [r for r in rules if r["id"] == rule_id]
    assert found, f"machine {machine.name} has no rule {rule_id}: {[r['id'] for r in rules]}"
    rule: dict[str, Any] = found[0]
    return rule


def _authored(machines: dict[str, Machine], rule_id: str) -> dict[str, Any]:
    """The rule as its author's store holds it (the harness id names the machine)."""
    return _rule(machines[rule_id.split("/", 1)[0]], rule_id)


def _notice(machine: Machine) -> dict[str, Any]:
    data: dict[str, Any] = machine.ok("notice", "--json").json()
    return data


def _shows(notice_text: str, rule: dict[str, Any]) -> bool:
    lines = rule["text"].split("\n")
    entry = "\n".join([f"- [{rule['category']}] {lines[0]}", *(f"  {x}" for x in lines[1:]),
                       f"  ({rule['id']})"])
    return entry in notice_text


def _mentions(notice_text: str, rule: dict[str, Any]) -> bool:
    return rule["text"] in notice_text or rule["id"] in notice_text or rule["path"] in notice_text


@given(parsers.parse('machine "{name}" caps its core rules at {budget:d} tokens'))
def caps_core_rules(make_machine: MakeMachine, name: str, budget: int) -> None:
    make_machine(name).set_config(f"coreRulesBudgetTokens = {budget}")


@when(parsers.parse('machine "{name}" proposes the rule "{text}" in category "{category}"'))
def proposes(make_machine: MakeMachine, name: str, text: str, category: str) -> None:
    result = make_machine(name).ok("rule", "add", category, text, "--json").json()
    assert result["created"] is True
    assert result["rule"]["status"] == "proposed"


@when(parsers.parse('machine "{name}" approves the rule "{rule_id}"'))
def approves(machines: dict[str, Machine], name: str, rule_id: str) -> None:
    result = machines[name].ok("rule", "approve", rule_id, "--json").json()
    assert result["after"] == "core" and result["changed"] is True


@when(parsers.parse('machine "{name}" revokes the rule "{rule_id}"'))
def revokes(machines: dict[str, Machine], name: str, rule_id: str) -> None:
    result = machines[name].ok("rule", "revoke", rule_id, "--json").json()
    assert result["after"] == "revoked" and result["changed"] is True


@then(parsers.parse('machine "{name}" lists the rule "{rule_id}" as "{status}"'))
def lists_as(machines: dict[str, Machine], name: str, rule_id: str, status: str) -> None:
    assert _rule(machines[name], rule_id)["status"] == status


@then(parsers.parse('the rule "{rule_id}" is in the notice of no machine'))
def in_no_notice(machines: dict[str, Machine], rule_id: str) -> None:
    rule = _authored(machines, rule_id)
    for machine in machines.values():
        data = _notice(machine)
        assert not _mentions(data["notice"], rule), f"machine {machine.name}: {data['notice']}"
        assert data["coreRules"]["count"] == 0


@then(parsers.parse('the rule "{rule_id}" is not in the notices of machines "{a}" and "{b}"'))
def not_in_notices(machines: dict[str, Machine], rule_id: str, a: str, b: str) -> None:
    rule = _authored(machines, rule_id)
    for name in (a, b):
        text = _notice(machines[name])["notice"]
        assert not _mentions(text, rule), f"machine {name}: {text}"


@then(parsers.parse("machine \"{name}\"'s notice shows the rule \"{rule_id}\" verbatim"))
def notice_shows(machines: dict[str, Machine], name: str, rule_id: str) -> None:
    rule = _authored(machines, rule_id)
    data = _notice(machines[name])
    assert not data["refused"]
    assert _shows(data["notice"], rule), data["notice"]


@then(parsers.parse('the rule file of "{rule_id}" is byte-identical on machines "{a}" and "{b}"'))
def rule_file_unchanged(machines: dict[str, Machine], rule_id: str, a: str, b: str) -> None:
    path = _authored(machines, rule_id)["path"]
    first = (machines[a].store / path).read_bytes()
    assert first == (machines[b].store / path).read_bytes()
    assert b'\nstatus: "proposed"\n' in first  # approval is a fact, never a rewrite


@then(parsers.parse("machines \"{a}\" and \"{b}\" hold machine \"{approver}\"'s approval in "
                    "their stores"))
def approval_travelled(machines: dict[str, Machine], a: str, b: str, approver: str) -> None:
    own = machines[approver].store / "edits" / approver / "curation.jsonl"
    facts = [json.loads(line) for line in own.read_text(encoding="utf-8").splitlines()]
    assert [f["status"] for f in facts if f["type"] == "rule-status"] == ["core"]
    for name in (a, b):
        copy = machines[name].store / "edits" / approver / "curation.jsonl"
        assert copy.read_bytes() == own.read_bytes(), f"machine {name} lacks {approver}'s facts"


@then(
    parsers.parse("machine \"{name}\"'s notice refuses its {count:d} core rules over the budget "
                  "of {budget:d} tokens"),
    target_fixture="refused_notice",
)
def notice_refuses(machines: dict[str, Machine], name: str, count: int,
                   budget: int) -> dict[str, Any]:
    result = machines[name].ok("notice")
    assert "core rules refused: " in result.err  # a human at a terminal is told too
    data = _notice(machines[name])
    core = data["coreRules"]
    assert data["refused"] is True and core["refused"] is True
    assert (core["count"], core["budget"]) == (count, budget)
    assert core["tokens"] > budget
    assert "## Core rules: refused, over budget" in data["notice"]
    return data


@then("the refusal gives each core rule's size and the total")
def refusal_numbers(refused_notice: dict[str, Any]) -> None:
    core = refused_notice["coreRules"]
    text = refused_notice["notice"]
    assert sum(s["tokens"] for s in core["sizes"]) == core["tokens"]
    for size in core["sizes"]:
        assert f"- {size['id']} [" in text and f"] {size['tokens']} tokens\n" in text
    assert f"Total: {core['tokens']} tokens · budget: {core['budget']} tokens." in text
    assert f"{core['tokens'] - core['budget']} over" in text
    assert "chapters rule revoke <id>" in text and "split" in text


@then(parsers.parse("no core rule's text is in machine \"{name}\"'s notice"))
def nothing_clipped(
    machines: dict[str, Machine], name: str, refused_notice: dict[str, Any]
) -> None:
    text = refused_notice["notice"]
    for size in refused_notice["coreRules"]["sizes"]:
        rule = _rule(machines[name], size["id"])
        # Refused whole: neither the text nor any prefix of it (no clipping) is inlined.
        assert rule["text"][:20] not in text
        assert size["tokens"] >= len(rule["text"]) // DEFAULTS.chars_per_token
