"""The one selector of what the notice renders (§7.3): over budget it refuses with numbers
and never clips (§1 invariant 2)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dsh_chapters_core.config import Config
from dsh_chapters_core.rules.model import (
    _TOKEN_SPLIT,
    Rule,
    RuleStatus,
)
from dsh_chapters_core.text import top_terms

# -- the one selector ---------------------------------------------------------------------------


def render_rule_entry(rule: Rule) -> str:
    """How one rule appears in the notice: its text verbatim, with category and id."""
    lines = rule.text.rstrip("\n").split("\n")
    head = f"- [{rule.category}] {lines[0]}"
    rest = [f"  {line}" if line else "" for line in lines[1:]]
    return "\n".join([head, *rest, f"  ({rule.id})"]) + "\n"


@dataclass(frozen=True, slots=True)
class SizedRule:
    """A rule with the estimated tokens of its notice entry, as the selector budgets it."""

    rule: Rule
    tokens: int  # estimated tokens of its notice entry (`charsPerToken`, §4.1)


@dataclass(frozen=True, slots=True)
class RuleBlock:
    """A budgeted set of rules: rendered whole, or refused with every number. Never clipped."""

    rules: tuple[SizedRule, ...]
    budget: int

    @property
    def total(self) -> int:
        return sum(r.tokens for r in self.rules)

    @property
    def refused(self) -> bool:
        return self.total > self.budget

    @property
    def over_by(self) -> int:
        return max(0, self.total - self.budget)


@dataclass(frozen=True, slots=True)
class CategoryLine:
    """One line of the category index: name, count, essence, an example path."""

    name: str
    count: int
    essence: str  # the category's most frequent words: a pointer, never a clipped rule
    example_path: str
    matched: bool  # this session's topics overlap the category (P3b, §7.4)


@dataclass(frozen=True, slots=True)
class RuleSelection:
    """What the notice renders of rules, decided in one place (`select_rules`).

    - `core`: every rule that is core on this machine, verbatim, under `coreRulesBudgetTokens`.
    - `topic`: P3b (§7.4). When the core block is refused, the categories that overlap this
      session's topics are inlined whole under the same budget and the same refusal rule.
      When the core block renders, those rules are already in it and `topic` is empty.
    - `categories`: the index, one line per category of the core set.
    """

    core: RuleBlock
    topic: RuleBlock
    matched_categories: tuple[str, ...]
    categories: tuple[CategoryLine, ...]

    @property
    def empty(self) -> bool:
        """No core rule: the notice is byte-identical to one from a build without rules."""
        return not self.core.rules


def _tokens(words_of: str) -> set[str]:
    return {t for t in _TOKEN_SPLIT.split(words_of.lower()) if t}


def category_matches(category: str, topics: Iterable[str]) -> bool:
    """A category overlaps the session when a word of its name is a word of some topic."""
    words = _tokens(category)
    return any(words & _tokens(topic) for topic in topics)


def category_essence(rules: Sequence[Rule], config: Config) -> str:
    """The words a category's rules use most (ties alphabetical): one line, deterministic."""
    terms = top_terms(
        (r.text for r in rules), limit=config.rule_essence_terms, min_chars=config.term_min_chars
    )
    return ", ".join(terms) or rules[0].category


def select_rules(
    rules: Iterable[Rule],
    *,
    config: Config,
    session_topics: Iterable[str] = (),
) -> RuleSelection:
    """The one selector of what the notice renders (§7.3, §7.4; search.md: one selector).

    Only rules that are `core` on this machine are ever considered: proposed and revoked
    rules affect nothing (§11.3). Sizes are estimated tokens of each rule's rendered entry.
    """
    core = sorted(
        (r for r in rules if r.status is RuleStatus.CORE),
        key=lambda r: (r.category, r.harness_id, r.number),
    )
    sized = tuple(SizedRule(r, config.estimate_tokens(render_rule_entry(r))) for r in core)
    budget = config.core_rules_budget_tokens
    core_block = RuleBlock(rules=sized, budget=budget)
    topics = tuple(session_topics)
    by_category: dict[str, list[SizedRule]] = {}
    for entry in sized:
        by_category.setdefault(entry.rule.category, []).append(entry)
    matched = tuple(c for c in sorted(by_category) if category_matches(c, topics))
    topic_rules: tuple[SizedRule, ...] = ()
    if core_block.refused:
        topic_rules = tuple(e for c in matched for e in by_category[c])
    index = tuple(
        CategoryLine(
            name=name,
            count=len(entries),
            essence=category_essence([e.rule for e in entries], config),
            example_path=entries[0].rule.path,
            matched=name in matched,
        )
        for name, entries in sorted(by_category.items())
    )
    return RuleSelection(
        core=core_block,
        topic=RuleBlock(rules=topic_rules, budget=budget),
        matched_categories=matched,
        categories=index,
    )
