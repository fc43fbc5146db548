"""Rules: chapters of `kind: rule` (§7), approved per machine (amendment 2026-09-20).

A proposal is a file written once under `rules/<harnessId>/NNN-<category>-<slug>.md`; its
frontmatter says `status: proposed` forever. Approval and revocation are `rule-status` facts
appended to THIS machine's own `edits/<harnessId>/curation.jsonl`; the effective status on a
machine is the last such fact in its own file, else `proposed`. Other machines' facts arrive
by sync and never count (§11.3: a rule affects no machine until that machine's human approves).

`select_rules` is the one selector of what the notice renders (search has its own single
ranker, `rank_entries`; there is no third rule-picker). Over budget it refuses with numbers and
never clips (§1 invariant 2).
"""

from __future__ import annotations

from dsh_chapters_core.rules.facts import (
    StatusFact,
    effective_statuses,
    find_rule,
    load_rules,
    nearest_ids,
    read_own_facts,
    resolve_rules,
    rule_facts_path,
    rule_from_document,
    rule_paths,
)
from dsh_chapters_core.rules.model import (
    EDITS_DIR,
    NUMBER_WIDTH,
    RULES_DIR,
    STATE_DIR,
    Rule,
    RuleAuthor,
    RuleStatus,
    body_sha256,
    category_slug,
    core_rule_ids,
    format_rule_id,
    parse_rule_path,
    rule_json,
    rule_title,
    rules_of_category,
    status_counts,
)
from dsh_chapters_core.rules.proposals import (
    ProposalResult,
    RuleProposal,
    StatusChange,
    add_rule,
    approve_rule,
    change_rule_status,
    next_rule_number,
    propose_rule,
    render_rule_file,
    revoke_rule,
    set_rule_status,
)
from dsh_chapters_core.rules.selection import (
    CategoryLine,
    RuleBlock,
    RuleSelection,
    SizedRule,
    category_essence,
    category_matches,
    render_rule_entry,
    select_rules,
)

__all__ = [
    "EDITS_DIR",
    "NUMBER_WIDTH",
    "RULES_DIR",
    "STATE_DIR",
    "CategoryLine",
    "ProposalResult",
    "Rule",
    "RuleAuthor",
    "RuleBlock",
    "RuleProposal",
    "RuleSelection",
    "RuleStatus",
    "SizedRule",
    "StatusChange",
    "StatusFact",
    "add_rule",
    "approve_rule",
    "body_sha256",
    "category_essence",
    "category_matches",
    "category_slug",
    "change_rule_status",
    "core_rule_ids",
    "effective_statuses",
    "find_rule",
    "format_rule_id",
    "load_rules",
    "nearest_ids",
    "next_rule_number",
    "parse_rule_path",
    "propose_rule",
    "read_own_facts",
    "render_rule_entry",
    "render_rule_file",
    "resolve_rules",
    "revoke_rule",
    "rule_facts_path",
    "rule_from_document",
    "rule_json",
    "rule_paths",
    "rule_title",
    "rules_of_category",
    "select_rules",
    "set_rule_status",
    "status_counts",
]
