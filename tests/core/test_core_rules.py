"""Rules (§7, amendment 2026-09-20): write-once proposals, per-machine approval facts, and the
one selector with its budget that refuses with numbers instead of clipping."""

from __future__ import annotations

import ast
import json
import pathlib

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.curation import FactType, parse_facts
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.errors import ChaptersError, NextStep, UsageError
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.rules import (
    Rule,
    RuleAuthor,
    RuleProposal,
    RuleStatus,
    approve_rule,
    body_sha256,
    category_matches,
    effective_statuses,
    find_rule,
    load_rules,
    parse_rule_path,
    propose_rule,
    resolve_rules,
    revoke_rule,
    rule_facts_path,
    select_rules,
)
from dsh_chapters_core.testing.fakes_rules import TreeShelf, parse_core_frontmatter
from dsh_chapters_core.testing.fakes_transport import FakeClock, MemoryTree
from hypothesis import given
from hypothesis import strategies as st

REPO = pathlib.Path(__file__).resolve().parents[2]


def _propose(tree: MemoryTree, category: str, text: str, *, harness: str = "hostA",
             session: str = "", author: RuleAuthor = RuleAuthor.USER) -> Rule:
    result = propose_rule(
        tree, RuleProposal(category, text, source_session=session, author=author),
        harness_id=harness, project_key="pk-1", clock=FakeClock(), config=DEFAULTS,
    )
    return result.rule


def _rules(tree: MemoryTree, harness: str) -> tuple[Rule, ...]:
    return load_rules(tree, TreeShelf(tree), harness)


# -- proposals ----------------------------------------------------------------------------------


def test_a_proposal_is_a_write_once_rule_file_with_the_record_frontmatter() -> None:
    tree = MemoryTree()
    rule = _propose(tree, "Git Workflow", "Rebase, never merge, on feature branches.",
                    session="sess-9", author=RuleAuthor.AGENT)
    assert rule.id == "hostA/001"
    assert rule.path == "rules/hostA/001-git-workflow-rebase-never-merge-on-feature-branches.md"
    yaml_text, body = split_frontmatter(tree.files[rule.path].decode())
    fm = parse_core_frontmatter(yaml_text)
    assert fm["kind"] == "rule"
    assert fm["category"] == "git-workflow"
    assert fm["title"] == "Rebase, never merge, on feature branches."
    assert fm["status"] == "proposed"
    assert fm["sourceSession"] == "sess-9"
    assert fm["authoredAt"] == "2026-11-30T08:50:00Z"
    assert fm["author"] == "agent"
    assert fm["sha256"] == body_sha256(body)
    assert body == "Rebase, never merge, on feature branches.\n"


def test_numbers_grow_per_machine_and_are_never_reused() -> None:
    tree = MemoryTree()
    first = _propose(tree, "testing", "Run the suite with -x.")
    second = _propose(tree, "testing", "Name tests after behaviour.")
    other = _propose(tree, "testing", "A rule from B.", harness="hostB")
    assert (first.id, second.id, other.id) == ("hostA/001", "hostA/002", "hostB/001")
    del tree.files[second.path]  # even a lost file never frees its number for a new rule
    assert _propose(tree, "docs", "Docs use the user's words.").id == "hostA/003"


def test_the_same_rule_proposed_twice_is_written_once() -> None:
    tree = MemoryTree()
    first = _propose(tree, "testing", "Run the suite with -x.")
    again = propose_rule(
        tree, RuleProposal("Testing", "Run the suite   with -x.\n"), harness_id="hostA",
        project_key="pk-1", clock=FakeClock(), config=DEFAULTS, existing=_rules(tree, "hostA"),
    )
    assert not again.created
    assert again.rule.id == first.id
    assert len([p for p in tree.files if p.startswith("rules/")]) == 1


@pytest.mark.parametrize(("category", "text"), [("", "text"), ("!!!", "text"), ("ok", "  \n ")])
def test_a_proposal_without_category_or_text_is_a_usage_error(category: str, text: str) -> None:
    with pytest.raises(UsageError):
        _propose(MemoryTree(), category, text)


def test_an_agent_proposal_names_its_source_session() -> None:
    with pytest.raises(UsageError) as info:
        _propose(MemoryTree(), "testing", "Run the suite.", author=RuleAuthor.AGENT)
    assert "source session" in info.value.message
    rule = _propose(MemoryTree(), "testing", "Run the suite.", author=RuleAuthor.AGENT,
                    session="s-1")
    assert (rule.author, rule.source_session, rule.status) == ("agent", "s-1", RuleStatus.PROPOSED)


def test_a_long_first_line_makes_a_capped_title_and_the_body_stays_verbatim() -> None:
    text = "word " * 60 + "\nsecond line"
    rule = _propose(MemoryTree(), "style", text)
    assert len(rule.title) <= DEFAULTS.title_max_chars
    assert rule.title.endswith("…")
    assert rule.text == text.strip() + "\n"
    name = rule.path.rsplit("/", 1)[1]
    assert len(name) <= len("001-style-.md") + DEFAULTS.slug_max_chars


def test_rule_paths_parse_in_the_store_and_in_the_mirror() -> None:
    assert parse_rule_path("rules/hostA/007-testing-x.md") == ("hostA", 7)
    assert parse_rule_path("rules/pk-1/hostB/012-docs-y.md") == ("hostB", 12)
    assert parse_rule_path("rules/hostA/notes.md") is None
    assert parse_rule_path("chapters/pk/s/001-x.md") is None


# -- approval is a per-machine fact --------------------------------------------------------------


def test_approval_appends_a_fact_to_this_machines_file_and_never_touches_the_rule() -> None:
    tree = MemoryTree()
    rule = _propose(tree, "testing", "Run the suite with -x.")
    before = tree.files[rule.path]
    change = approve_rule(tree, _rules(tree, "hostB"), "hostA/001", harness_id="hostB",
                          clock=FakeClock())
    assert change.changed and change.after is RuleStatus.CORE
    assert tree.files[rule.path] == before
    assert [p for p in tree.files if p.startswith("edits/")] == ["edits/hostB/curation.jsonl"]
    line = json.loads(tree.files["edits/hostB/curation.jsonl"].decode())
    assert line == {"type": "rule-status", "rule": "hostA/001", "status": "core",
                    "sha256": rule.digest, "author": "user", "at": "2026-11-30T08:50:00Z"}


def test_no_fact_means_proposed_and_other_machines_facts_never_count() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    approve_rule(tree, _rules(tree, "hostB"), "hostA/001", harness_id="hostB", clock=FakeClock())
    # Sync copies B's edits file into every store; A and C still see the rule as proposed.
    assert [r.status for r in _rules(tree, "hostA")] == [RuleStatus.PROPOSED]
    assert [r.status for r in _rules(tree, "hostC")] == [RuleStatus.PROPOSED]
    assert [r.status for r in _rules(tree, "hostB")] == [RuleStatus.CORE]


def test_revoke_is_another_fact_and_the_last_fact_wins() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    clock = FakeClock()
    approve_rule(tree, _rules(tree, "hostA"), "hostA/1", harness_id="hostA", clock=clock)
    change = revoke_rule(tree, _rules(tree, "hostA"), "hostA/001", harness_id="hostA", clock=clock)
    assert (change.before, change.after) == (RuleStatus.CORE, RuleStatus.REVOKED)
    assert [r.status for r in _rules(tree, "hostA")] == [RuleStatus.REVOKED]
    approve_rule(tree, _rules(tree, "hostA"), "hostA/001", harness_id="hostA", clock=clock)
    assert [r.status for r in _rules(tree, "hostA")] == [RuleStatus.CORE]
    log = parse_facts("hostA", tree.files[rule_facts_path("hostA")].decode())
    assert [f.get("status") for f in log.facts] == ["core", "revoked", "core"]


def test_approving_an_approved_rule_writes_nothing() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    approve_rule(tree, _rules(tree, "hostA"), "hostA/001", harness_id="hostA", clock=FakeClock())
    size = len(tree.files[rule_facts_path("hostA")])
    again = approve_rule(tree, _rules(tree, "hostA"), "hostA/001", harness_id="hostA",
                         clock=FakeClock())
    assert not again.changed and again.fact is None
    assert len(tree.files[rule_facts_path("hostA")]) == size


def test_a_rule_whose_bytes_changed_after_approval_needs_a_new_approval() -> None:
    tree = MemoryTree()
    rule = _propose(tree, "testing", "Run the suite with -x.")
    approve_rule(tree, _rules(tree, "hostB"), rule.id, harness_id="hostB", clock=FakeClock())
    tree.files[rule.path] = tree.files[rule.path].replace(b"with -x.", b"with --force.")
    [seen] = _rules(tree, "hostB")
    assert seen.status is RuleStatus.PROPOSED
    assert seen.changed_since_approved and seen.modified
    assert select_rules([seen], config=DEFAULTS).empty


def test_malformed_edits_lines_are_skipped_not_fatal() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    approve_rule(tree, _rules(tree, "hostA"), "hostA/001", harness_id="hostA", clock=FakeClock())
    path = rule_facts_path("hostA")
    tree.files[path] = b"{not json\n" + tree.files[path] + b'{"type":"rule-status"}\n'
    assert [r.status for r in _rules(tree, "hostA")] == [RuleStatus.CORE]


@given(st.lists(st.sampled_from(["core", "revoked", "proposed"]), min_size=1, max_size=12))
def test_the_last_fact_of_this_machine_wins(statuses: list[str]) -> None:
    own = "\n".join(json.dumps({"type": "rule-status", "rule": "h/001", "status": s})
                    for s in statuses)
    other = json.dumps({"type": "rule-status", "rule": "h/001", "status": "core"})
    facts = parse_facts("me", own).facts + parse_facts("them", other).facts
    assert effective_statuses(facts, "me")["h/001"].status == RuleStatus(statuses[-1])
    assert "h/001" not in effective_statuses(parse_facts("them", own).facts, "me")


def test_resolve_reads_rule_documents_from_store_or_mirror_paths() -> None:
    docs = [
        Document(path="rules/pk/hostA/002-docs-b.md", kind=DocumentKind.RULE, title="B",
                 category="docs", body="B\n", extra=(("sourceSession", "s1"),)),
        Document(path="rules/hostA/001-docs-a.md", kind=DocumentKind.RULE, title="A",
                 category="docs", body="A\n", session_id="s0", date="2026-01-01"),
        Document(path="s/chapters/001-x.md", kind=DocumentKind.CHAPTER, title="chapter"),
    ]
    rules = resolve_rules(docs, (), "hostA")
    assert [(r.id, r.source_session) for r in rules] == [("hostA/001", "s0"), ("hostA/002", "s1")]
    assert rules[0].authored_at == "2026-01-01"


# -- unknown ids ----------------------------------------------------------------------------------


def test_an_unknown_id_lists_the_nearest_ids() -> None:
    tree = MemoryTree()
    for text in ("one", "two", "three"):
        _propose(tree, "misc", f"Rule {text}.")
    _propose(tree, "misc", "From B.", harness="hostB")
    rules = _rules(tree, "hostA")
    assert find_rule(rules, "hostA/2").id == "hostA/002"
    with pytest.raises(ChaptersError) as info:
        find_rule(rules, "hostA/009")
    assert "among 4 rules" in info.value.message
    assert "nearest: hostA/003, hostA/002, hostA/001" in info.value.message
    with pytest.raises(ChaptersError) as info:
        find_rule(rules, "hotsB/001")
    assert "hostB/001" in info.value.message
    with pytest.raises(ChaptersError) as info:
        find_rule((), "x/001")
    # The core names the next step by code; the CLI words it `chapters rule add …`.
    assert "0 rules" in info.value.message and info.value.step is NextStep.PROPOSE_RULE_OR_SYNC


# -- the one selector ---------------------------------------------------------------------------


def _core(tree: MemoryTree, harness: str, *ids: str) -> tuple[Rule, ...]:
    for rule_id in ids:
        approve_rule(tree, _rules(tree, harness), rule_id, harness_id=harness, clock=FakeClock())
    return _rules(tree, harness)


def test_only_rules_core_on_this_machine_are_selected() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    _propose(tree, "docs", "Docs use the user's words.")
    _propose(tree, "style", "Short docstrings that say why.")
    rules = _core(tree, "hostA", "hostA/001", "hostA/003")
    revoke_rule(tree, rules, "hostA/003", harness_id="hostA", clock=FakeClock())
    selection = select_rules(_rules(tree, "hostA"), config=DEFAULTS)
    assert [s.rule.id for s in selection.core.rules] == ["hostA/001"]
    assert not selection.core.refused
    assert [(c.name, c.count) for c in selection.categories] == [("testing", 1)]
    assert selection.categories[0].example_path == "rules/hostA/001-testing-run-the-suite-with-x.md"


def test_no_core_rule_is_an_empty_selection() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    selection = select_rules(_rules(tree, "hostA"), config=DEFAULTS)
    assert selection.empty and not selection.categories and not selection.core.refused


def test_over_budget_the_core_block_refuses_with_every_size_and_never_clips() -> None:
    tree = MemoryTree()
    for n in range(4):
        _propose(tree, "testing", f"Rule {n}: " + "x" * 1600)
    rules = _core(tree, "hostA", *(f"hostA/00{n}" for n in range(1, 5)))
    selection = select_rules(rules, config=DEFAULTS)
    block = selection.core
    assert block.refused
    assert len(block.rules) == 4
    assert all(s.tokens > 400 for s in block.rules)
    assert block.total == sum(s.tokens for s in block.rules) > block.budget == 1200
    assert block.over_by == block.total - 1200


def test_budget_is_the_configured_one_and_exactly_full_fits() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    rules = _core(tree, "hostA", "hostA/001")
    size = select_rules(rules, config=DEFAULTS).core.total
    exact = DEFAULTS.replace(core_rules_budget_tokens=size)
    short = DEFAULTS.replace(core_rules_budget_tokens=size - 1)
    assert not select_rules(rules, config=exact).core.refused
    assert select_rules(rules, config=short).core.refused


def test_p3b_inlines_whole_matching_categories_when_the_core_block_is_refused() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    _propose(tree, "testing", "Name tests after behaviour.")
    _propose(tree, "deploy", "Deploy only from main. " + "y" * 6000)
    rules = _core(tree, "hostA", "hostA/001", "hostA/002", "hostA/003")
    fitting = select_rules(rules, config=DEFAULTS, session_topics=("testing", "auth"))
    assert fitting.core.refused
    assert fitting.matched_categories == ("testing",)
    assert [s.rule.id for s in fitting.topic.rules] == ["hostA/001", "hostA/002"]
    assert not fitting.topic.refused
    assert [c.matched for c in fitting.categories] == [False, True]
    # When the core block fits, the matching rules are in it already: nothing is doubled.
    small = select_rules(rules[:2], config=DEFAULTS, session_topics=("testing",))
    assert not small.core.refused and not small.topic.rules
    # The matching categories obey the same budget and the same refusal.
    big = select_rules(rules, config=DEFAULTS, session_topics=("deploy",))
    assert big.topic.refused and [s.rule.id for s in big.topic.rules] == ["hostA/003"]


def test_category_matching_is_by_whole_words() -> None:
    assert category_matches("git-workflow", ["git"])
    assert category_matches("testing", ["unit-testing"])
    assert not category_matches("testing", ["test"])
    assert not category_matches("docs", [])


def test_there_is_one_rule_selector() -> None:
    """search.md: one scorer for the corpus, one selector for the head; a third picker fails."""
    pickers = []
    for root in ("packages", "adapters"):
        for path in sorted((REPO / root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = node.name.lower()
                    if "rule" in name and name.startswith(("select", "pick", "choose")):
                        pickers.append(f"{path.relative_to(REPO)}:{node.name}")
    assert pickers == [
        "packages/dsh-chapters-core/src/dsh_chapters_core/rules/selection.py:select_rules"]


def test_status_facts_name_their_type() -> None:
    tree = MemoryTree()
    _propose(tree, "testing", "Run the suite with -x.")
    change = approve_rule(tree, _rules(tree, "hostA"), "hostA/001", harness_id="hostA",
                          clock=FakeClock())
    assert change.fact is not None and change.fact.type is FactType.RULE_STATUS
