"""`rank_entries`: the ONE scorer, for every door and every kind (§8, search.md "Two doors").

Lexical, deterministic, inspectable. Per distinct query term: a topic hit scores
`searchTopicWeight` (2), a title hit `searchTitleWeight` (1), a summary hit
`searchSummaryWeight` (1) (a rule's body is its summary). A category hit adds
`searchCategoryBonus` (1.5) once. A rule that is core on THIS machine gets `rulesCoreBonus`
(0.15) at query time only, never in a shared shard. An entry that matches no term never ranks.
With `searchBodyWeight` > 0 a chapter's body counts too: its best passage's BM25 score
(passages.py: saturation, length normalization, coordination, phrases), times the weight, is
added to the frontmatter score, and a chapter whose body alone holds a query word ranks.
At weight 0 the body is not read and the ranking is the frontmatter's alone, exactly.
Order: score, then recency (newest first; it only breaks ties), then path: a total order, so
the same corpus and query give the same list on every machine.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dsh_chapters_core.config import Config
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.search.aliases import EMPTY_ALIASES, AliasMap
from dsh_chapters_core.search.curated import NO_RANK_FACTS, RankFacts
from dsh_chapters_core.search.dates import TimeWindow
from dsh_chapters_core.search.entries import SearchEntry, date_key, entry_from_document
from dsh_chapters_core.search.passages import (
    NO_BODY_MATCH,
    Anchor,
    BodyMatch,
    BodyStats,
    Passage,
    PassageRules,
    best_passage,
    body_passages,
    body_stats,
    cut_anchor,
)
from dsh_chapters_core.search.terms import STOPWORDS, query_words

_SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class LexicalWeights:
    """The scorer's weights, for a cache that bounds scores before `rank_entries` decides."""

    topic: float
    title: float
    summary: float
    category: float

    @classmethod
    def of(cls, config: Config) -> LexicalWeights:
        return cls(config.search_topic_weight, config.search_title_weight,
                   config.search_summary_weight, config.search_category_bonus)


@dataclass(frozen=True, slots=True)
class ScoredEntry:
    """An entry with its score and the hits that make it up (the score is inspectable)."""

    score: float
    entry: SearchEntry
    topic_hits: int = 0
    title_hits: int = 0
    summary_hits: int = 0
    category_hit: bool = False
    core_bonus: float = 0.0
    recency: float = 0.0  # 2^(-age/half-life) against `now_hint`; reported, never ranked on
    body_score: float = 0.0  # the best passage's score, before `searchBodyWeight`
    anchor: Anchor | None = None  # where the body matched, once cut from the file
    body: BodyMatch = NO_BODY_MATCH  # the best passage (its body lines), when the body matched
    date_bonus: float = 0.0  # added because the match is dated when the question says

    @property
    def sort_key(self) -> tuple[float, float, str]:
        return (-self.score, -self.entry.date_key, self.entry.path)


def is_core_rule(entry: SearchEntry, core_rule_ids: frozenset[str]) -> bool:
    """Core on this machine: the rule's id (`<harnessId>/<NNN>`) or its path is in the set."""
    return entry.kind is DocumentKind.RULE and (
        entry.rule_id in core_rule_ids or entry.path in core_rule_ids
    )


def body_terms(query: str, config: Config) -> tuple[str, ...]:
    """The query's body terms (search/terms.py), none when the body is weighted out."""
    if config.search_body_weight <= 0 or not query:
        return ()
    return tuple(next(iter(word.terms)) for word in query_words(query))


def frontmatter_terms(terms: Sequence[str], config: Config) -> tuple[str, ...]:
    """The query terms matched against frontmatter. With the body read, a stopword is dropped
    here as the body drops it (a `the` in nearly every title made every chapter a match worth
    the same point, and at 100,000 chapters cost the search a pass over all of them), unless
    every term is one: a question of function words still asks. With the body weighted out
    (`searchBodyWeight: 0`), every term counts, as in the record's ranking (§8)."""
    if config.search_body_weight <= 0:
        return tuple(terms)
    kept = tuple(t for t in terms if t not in STOPWORDS)
    return kept or tuple(terms)


def passage_rules(config: Config) -> PassageRules:
    return PassageRules(config.search_bm25_k1, config.search_bm25_b,
                        config.search_passage_lines, config.search_snippet_chars,
                        config.search_phrase_bonus, config.search_phrase_terms,
                        config.search_chapter_share, config.search_second_passage_share)


def frontmatter_score(topic: float, title: int, summary: int, category: bool, core: float,
                      weights: LexicalWeights) -> float:
    """§8's lexical score of the frontmatter hits (`topic` may be weighted by curation), the
    core-rule bonus included. One fixed expression, one fixed order: the same float on every
    machine and in every engine (the index's top-k computes it with this function too)."""
    score = topic * weights.topic + title * weights.title + summary * weights.summary
    if category:
        score += weights.category
    return round(score + core, 9)


def recency(key: float, now_hint: str, half_life_days: float) -> float:
    """2^(-age/half-life) of a date key against `now_hint`: reported, never ranked on."""
    now = date_key(now_hint) if now_hint else 0.0
    if not now or not key:
        return 0.0
    return math.pow(2.0, -max(0.0, now - key) / (half_life_days * _SECONDS_PER_DAY))


def total_score(front: float, body: BodyMatch, body_weight: float) -> float:
    """A match's score: its frontmatter score plus the weighted best passage, if any."""
    return round(front + body_weight * body.score, 9) if body.matched else front


def dated_score(score: float, bonus: float) -> float:
    """A match dated when the question says: its score plus `searchDateBonus`."""
    return round(score + bonus, 9) if bonus else score


def rank_entries(
    entries: Iterable[SearchEntry | Document],
    query: str | Iterable[str],
    *,
    config: Config,
    aliases: AliasMap = EMPTY_ALIASES,
    core_rule_ids: frozenset[str] = frozenset(),
    now_hint: str = "",
    text: str = "",
    stats: BodyStats | None = None,
    facts: RankFacts = NO_RANK_FACTS,
    bodies: Mapping[str, BodyMatch] | None = None,
    window: TimeWindow | None = None,
) -> tuple[ScoredEntry, ...]:
    """Every entry that matches at least one query term, best first (total, stable order).

    `query` is the raw query text, or terms already canonicalized with the same `aliases`
    (then `text` is the raw query, for the body's own terms). Documents are turned into
    entries under `aliases`; entries are taken as built. `stats` are the door's body
    statistics; without them they are computed from `entries` (the whole door, then).
    `bodies` are the best passages as the search index found them, by path; without them an
    entry's body text is cut into passages and scored here (the reference), and its anchor is
    cut at once.
    """
    terms = (
        frontmatter_terms(aliases.query_terms(query), config) if isinstance(query, str)
        else tuple(dict.fromkeys(query))
    )
    raw = query if isinstance(query, str) else text
    w_body = config.search_body_weight
    words = body_terms(raw, config)
    if not terms and not words:
        return ()
    rules = passage_rules(config)
    cut: dict[str, Sequence[Passage]] = {}

    def passages_of(entry: SearchEntry) -> Sequence[Passage]:
        found = cut.get(entry.path)
        if found is None:
            found = cut[entry.path] = body_passages(entry.body, rules.lines)
        return found

    if words and stats is None and bodies is None:
        built = [e if isinstance(e, SearchEntry) else entry_from_document(e, aliases=aliases)
                 for e in entries]
        stats = body_stats((passages_of(e) for e in built), words)
        entries = built
    weights = LexicalWeights.of(config)
    wanted = frozenset(terms)
    w_core = config.rules_core_bonus
    half_life = config.search_recency_half_life_days
    out: list[ScoredEntry] = []
    topic_weights = facts.topic_weights
    label_terms = {label: frozenset(aliases.label_terms(label)) for label in topic_weights}
    grouped: dict[str, SearchEntry] = {}  # unmatched entries a `group` fact may lift
    for item in entries:
        entry = (
            item if isinstance(item, SearchEntry) else entry_from_document(item, aliases=aliases)
        )
        t_topic, t_title, t_summary, t_cat = (
            entry.topic_terms, entry.title_terms, entry.summary_terms, entry.category_terms
        )
        body = NO_BODY_MATCH
        if words:
            if bodies is not None:
                # A stitched span is scored by its frontmatter, as the plain scan scores it.
                body = NO_BODY_MATCH if entry.members else bodies.get(entry.path, NO_BODY_MATCH)
            elif entry.body and stats is not None:
                body = best_passage(passages_of(entry), words, stats, rules)
        if (
            wanted.isdisjoint(t_topic)
            and wanted.isdisjoint(t_title)
            and wanted.isdisjoint(t_summary)
            and wanted.isdisjoint(t_cat)
            and not body.matched
        ):
            if facts.groups:
                grouped[entry.path] = entry
            continue  # §8: a fresh file that matched no term never ranks
        topic = title = summary = 0
        category = False
        for term in terms:
            if term in t_topic:
                topic += 1
            if term in t_title:
                title += 1
            if term in t_summary:
                summary += 1
            if term in t_cat:
                category = True
        core = w_core if is_core_rule(entry, core_rule_ids) else 0.0
        topical: float = topic
        if topic_weights and topic:  # §10.1 topic-weight: a hit on a weighted topic scales
            topical = 0.0
            for term in terms:
                if term in t_topic:
                    topical += max((topic_weights.get(lb, 1.0) for lb in entry.topics
                                    if term in label_terms.get(lb, ())), default=1.0)
        score = total_score(frontmatter_score(topical, title, summary, category, core, weights),
                            body, w_body)
        dated = (config.search_date_bonus if window and window.holds_key(entry.date_key)
                 else 0.0)
        score = dated_score(score, dated)
        anchor = None
        if body.matched and entry.body and bodies is None:
            anchor = cut_anchor(entry.body.split("\n"), body, words, body_line=entry.body_line,
                                snippet_chars=rules.snippet_chars)
        out.append(ScoredEntry(score, entry, topic, title, summary, category, core,
                               recency(entry.date_key, now_hint, half_life), body.score, anchor,
                               body, dated))
    if facts.groups:
        out = _lift_groups(out, grouped, facts, config.search_group_share)
    out.sort(key=lambda s: (-s.score, -s.entry.date_key, s.entry.path))
    return tuple(out)


def _lift_groups(scored: list[ScoredEntry], unmatched: dict[str, SearchEntry], facts: RankFacts,
                 share: float) -> list[ScoredEntry]:
    """§10.1 group: every member of a group with a matched member ranks at least at `share`
    of the best member's score."""
    from dsh_chapters_core.search.index import document_identity  # index imports the scorer

    best: dict[tuple[str, ...], float] = {}
    for s in scored:
        for members in facts.groups_of(document_identity(s.entry.path)):
            best[members] = max(best.get(members, 0.0), s.score)
    if not best:
        return scored
    out = []
    for s in scored:
        lift = max((round(share * best[m], 9) for m in facts.groups_of(
            document_identity(s.entry.path)) if m in best), default=0.0)
        out.append(dataclasses.replace(s, score=lift) if lift > s.score else s)
    for entry in unmatched.values():
        lift = max((round(share * best[m], 9) for m in facts.groups_of(
            document_identity(entry.path)) if m in best), default=0.0)
        if lift > 0:
            out.append(ScoredEntry(lift, entry))
    return out
