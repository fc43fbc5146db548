"""Topic-sequential composition (§4.2): a greedy sequential merge of signed turns.

Open a chapter at the first turn; each next turn merges when its weighted overlap with the
chapter's running signature reaches τ (`mergeThreshold`) or its primary path matches a member's
(r28), and the chapter stays within `chapterLimit`; otherwise the chapter closes and a new one
opens. Deterministic, O(turns), and every decision records the rule that fired (§4.4: any merge
or split is inspectable after the fact).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field

from dsh_chapters_core.config import Config
from dsh_chapters_core.signature import Signature

ACTIONS: tuple[str, ...] = ("open", "merge", "split")
RULES: tuple[str, ...] = ("first", "overlap", "primary-match", "below-threshold", "chapter-limit")


@dataclass(frozen=True, slots=True)
class Decision:
    turn_index: int
    action: str  # one of ACTIONS
    rule: str  # one of RULES: the rule that fired
    overlap: float  # weighted overlap with the running signature (0.0 for the first turn)
    size: int  # the open chapter's estimated tokens once this turn is in it


@dataclass(frozen=True, slots=True)
class ChapterPlan:
    turn_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Composition:
    chapters: tuple[ChapterPlan, ...]
    decisions: tuple[Decision, ...]


def primary_stem(path: str) -> str:
    """The spelling-tolerant identity of a primary path: `src/render` = `src/render.ts` (r28)."""
    normal = path.strip().replace("\\", "/")
    while normal.startswith("./"):
        normal = normal[2:]
    normal = normal.rstrip("/")
    head, tail = posixpath.split(normal)
    stem = tail.rsplit(".", 1)[0] if "." in tail[1:] else tail
    return f"{head}/{stem}" if head else stem


@dataclass(slots=True)
class _Running:
    """The open chapter's running signature: the union of its members' items."""

    paths: set[str] = field(default_factory=set)
    commands: set[str] = field(default_factory=set)
    terms: set[str] = field(default_factory=set)
    primaries: set[str] = field(default_factory=set)
    size: int = 0

    def add(self, signature: Signature) -> None:
        self.paths.update(signature.paths)
        self.commands.update(signature.commands)
        self.terms.update(signature.terms)
        if signature.paths:
            self.primaries.add(primary_stem(signature.paths[0]))
        self.size += signature.size


def _weighted_overlap(signature: Signature, running: _Running, config: Config) -> float:
    """Shared items over the union, each kind weighted (paths heaviest, §4.2 rule 3)."""
    shared = union = 0.0
    for items, pool, weight in (
        (signature.paths, running.paths, config.overlap_path_weight),
        (signature.commands, running.commands, config.overlap_command_weight),
        (signature.terms, running.terms, config.overlap_term_weight),
    ):
        mine = set(items)
        common = sum(1 for item in mine if item in pool)
        shared += weight * common
        union += weight * (len(pool) + len(mine) - common)
    return shared / union if union else 0.0


def compose_chapters(signatures: Sequence[Signature], config: Config) -> Composition:
    """Group consecutive signed turns into chapters (§4.2); decisions say why."""
    chapters: list[ChapterPlan] = []
    decisions: list[Decision] = []
    members: list[int] = []
    running = _Running()
    for index, signature in enumerate(signatures):
        if not members:
            running.add(signature)
            members.append(index)
            decisions.append(Decision(index, "open", "first", 0.0, running.size))
            continue
        overlap = round(_weighted_overlap(signature, running, config), 6)
        primary = bool(signature.paths) and primary_stem(signature.paths[0]) in running.primaries
        if overlap >= config.merge_threshold:
            rule = "overlap"
        elif primary:
            rule = "primary-match"
        else:
            rule = "below-threshold"
        fits = running.size + signature.size <= config.chapter_limit
        if rule != "below-threshold" and fits:
            running.add(signature)
            members.append(index)
            decisions.append(Decision(index, "merge", rule, overlap, running.size))
            continue
        chapters.append(ChapterPlan(tuple(members)))
        running = _Running()
        running.add(signature)
        members = [index]
        split_rule = "below-threshold" if rule == "below-threshold" else "chapter-limit"
        decisions.append(Decision(index, "split", split_rule, overlap, running.size))
    if members:
        chapters.append(ChapterPlan(tuple(members)))
    return Composition(chapters=tuple(chapters), decisions=tuple(decisions))
