"""Topic-sequential composition (§4.2): a greedy sequential merge of signed turns.

Open a chapter at the first turn; each next turn merges when its weighted overlap with the
chapter's running signature reaches τ (`mergeThreshold`), or its primary path matches a
member's (r28), or it is a continuation (a turn that names no file and says little, like "now
run the tests": too thin to name a task of its own); and the chapter stays within
`chapterLimit`. Otherwise the chapter closes and a new one opens. The running signature is
the union of the chapter's last `overlapWindowTurns` members, so a long chapter does not
dilute the overlap of its next turn (the r28 measurement). Deterministic, O(turns), and
every decision records the rule that fired (§4.4: any merge or split is inspectable after
the fact).
"""

from __future__ import annotations

import posixpath
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from dsh_chapters_core.config import Config
from dsh_chapters_core.signature import Signature
from dsh_chapters_core.text import is_noise_path, names_file

ACTIONS: tuple[str, ...] = ("open", "merge", "split")
RULES: tuple[str, ...] = (
    "first", "overlap", "primary-match", "continuation", "below-threshold", "chapter-limit",
)


@dataclass(frozen=True, slots=True)
class Decision:
    """Why one turn merged into the open chapter or opened a new one: the rule that fired, the
    overlap it had and the chapter's size with it."""

    turn_index: int
    action: str  # one of ACTIONS
    rule: str  # one of RULES: the rule that fired
    overlap: float  # weighted overlap with the running signature (0.0 for the first turn)
    size: int  # the open chapter's estimated tokens once this turn is in it


@dataclass(frozen=True, slots=True)
class ChapterPlan:
    """One chapter the composition planned: the indices of the turns it is made of, in order."""

    turn_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Composition:
    """The chapters a composition planned, and one decision per turn saying which rule fired."""

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


def primary_of(signature: Signature) -> str:
    """The stem of what a turn is about (`paths[0]`), or "" when it has none.

    A signature puts project files first, so `paths[0]` is a directory only when the turn
    touched no file; tooling noise (`.venv/bin/python`, `/dev/null`) is never a primary.
    """
    if not signature.paths or is_noise_path(signature.paths[0]):
        return ""
    return primary_stem(signature.paths[0])


def is_continuation(signature: Signature, config: Config) -> bool:
    """A turn too thin to name a task of its own: no file, at most `continuationMaxTerms` terms."""
    return len(signature.terms) <= config.continuation_max_terms and not any(
        names_file(path) and not is_noise_path(path) for path in signature.paths
    )


def _kinds(signature: Signature) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    return signature.paths, signature.commands, signature.terms


class _Running:
    """The open chapter: every member's primary, and the union the overlap reads.

    The union covers the last `overlapWindowTurns` members (0: all of them), kept as counts
    so a member leaving the window costs its own items only: O(turns) over a span.
    """

    __slots__ = ("pools", "primaries", "recent", "size", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self.primaries: set[str] = set()
        self.recent: deque[Signature] = deque()
        self.pools: tuple[Counter[str], Counter[str], Counter[str]] = (
            Counter(), Counter(), Counter(),
        )
        self.size = 0

    def add(self, signature: Signature) -> None:
        self.recent.append(signature)
        for pool, items in zip(self.pools, _kinds(signature), strict=True):
            pool.update(set(items))
        if self.window and len(self.recent) > self.window:
            leaving = self.recent.popleft()
            for pool, items in zip(self.pools, _kinds(leaving), strict=True):
                pool.subtract(set(items))
                for item in set(items):
                    if pool[item] <= 0:
                        del pool[item]
        primary = primary_of(signature)
        if primary:
            self.primaries.add(primary)
        self.size += signature.size

    def overlap(self, signature: Signature, config: Config) -> float:
        """Shared items over the union, each kind weighted (paths heaviest, §4.2 rule 3)."""
        weights = (config.overlap_path_weight, config.overlap_command_weight,
                   config.overlap_term_weight)
        shared = union = 0.0
        for pool, items, weight in zip(self.pools, _kinds(signature), weights, strict=True):
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
    running = _Running(config.overlap_window_turns)
    for index, signature in enumerate(signatures):
        if not members:
            running.add(signature)
            members.append(index)
            decisions.append(Decision(index, "open", "first", 0.0, running.size))
            continue
        overlap = round(running.overlap(signature, config), 6)
        primary = primary_of(signature)
        if overlap >= config.merge_threshold:
            rule = "overlap"
        elif primary and primary in running.primaries:
            rule = "primary-match"
        elif is_continuation(signature, config):
            rule = "continuation"
        else:
            rule = "below-threshold"
        fits = running.size + signature.size <= config.chapter_limit
        if rule != "below-threshold" and fits:
            running.add(signature)
            members.append(index)
            decisions.append(Decision(index, "merge", rule, overlap, running.size))
            continue
        chapters.append(ChapterPlan(tuple(members)))
        running = _Running(config.overlap_window_turns)
        running.add(signature)
        members = [index]
        split_rule = "below-threshold" if rule == "below-threshold" else "chapter-limit"
        decisions.append(Decision(index, "split", split_rule, overlap, running.size))
    if members:
        chapters.append(ChapterPlan(tuple(members)))
    return Composition(chapters=tuple(chapters), decisions=tuple(decisions))
