"""Curation facts that change ranking (§10.1): `topic-weight` and `group`.

- `topic-weight {topic, weight}`: a query word that hits a topic scores `searchTopicWeight`
  times that topic's weight (the newest fact per topic wins, by `at`, then harness id, then
  line; a weight ≤ 0 or unreadable is ignored). With no fact every weight is 1: the record's
  ranking.
- `group {chapters, label}`: sibling chapters that belong together. When a member matches,
  every other member of the group ranks too, at `searchGroupShare` of the best member's
  score (or its own score when that is higher), so the whole piece of work comes back.
  Members are named by document identity (`<session>/<file>`), as `topic-pin` paths are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dsh_chapters_core.curation import CurationFact, FactType
from dsh_chapters_core.search.aliases import AliasMap


@dataclass(frozen=True, slots=True)
class RankFacts:
    """What the curation facts say about ranking, resolved once per query."""

    topic_weights: Mapping[str, float] = field(default_factory=dict)  # canonical label -> x
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (label, member identities)

    def groups_of(self, identity: str) -> tuple[tuple[str, ...], ...]:
        return tuple(members for _, members in self.groups if identity in members)


NO_RANK_FACTS = RankFacts()


def rank_facts(facts: Iterable[CurationFact], aliases: AliasMap) -> RankFacts:
    """Resolve `topic-weight` and `group` facts deterministically (newest wins per key)."""
    from dsh_chapters_core.search.index import document_identity  # index imports this module

    ordered = sorted(facts, key=lambda f: (f.at, f.harness_id, f.line))
    weights: dict[str, float] = {}
    groups: dict[str, tuple[str, ...]] = {}
    for fact in ordered:
        if fact.type is FactType.TOPIC_WEIGHT:
            topic = aliases.canonical(str(fact.get("topic", "")))
            try:
                weight = float(fact.get("weight", 1.0))
            except (TypeError, ValueError):
                continue
            if topic and weight > 0:
                weights[topic] = weight
        elif fact.type is FactType.GROUP:
            chapters = fact.get("chapters", [])
            if not isinstance(chapters, list):
                continue
            members = tuple(sorted({document_identity(str(c)) for c in chapters if c}))
            label = str(fact.get("label", "")) or "\x1f".join(members)
            if len(members) >= 2:
                groups[label] = members
    return RankFacts({k: v for k, v in weights.items() if v != 1.0},
                     tuple(sorted(groups.items())))
