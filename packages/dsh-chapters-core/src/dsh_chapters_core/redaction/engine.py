"""The one scan behind every family (§9): a combined pre-filter, then the families' finders.

Every family's triggers are joined into one regular expression, grouped by pivot character
(`_(?:(?<=ghp_)(?=…)()|…)|-(?:…)|…`). Python's regex engine skips every position whose
character is no pivot without entering the pattern, and a pivot enters only its own group's
look-arounds, so ordinary text costs one pass at C speed; a finder runs only where its own
trigger fired, and knows which one by the empty group closing it (`lastindex`). A few forms
with no rare character in them (`set -x KEY value`) are found by gated scans that run only
when a cheap substring test says their keyword is there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dsh_chapters_core.redaction.assignments import (
    ASSIGNMENT_FAMILIES,
    GATED_FORMS,
    SPACED_TRIGGERS,
)
from dsh_chapters_core.redaction.commands import COMMAND_FAMILIES
from dsh_chapters_core.redaction.model import Family, Span, Trigger, pivot_rank
from dsh_chapters_core.redaction.structures import EXTRA_TRIGGERS, STRUCTURE_FAMILIES
from dsh_chapters_core.redaction.tokens import TOKEN_FAMILIES

# Report order, which is also the order of preference when two families find the very same
# span: a provider's own shape first, the generic key-named rules last.
BUILTIN_FAMILIES: tuple[Family, ...] = (
    *TOKEN_FAMILIES, *STRUCTURE_FAMILIES, *COMMAND_FAMILIES, *ASSIGNMENT_FAMILIES,
)
TRIGGERS: tuple[Trigger, ...] = (
    *(t for family in BUILTIN_FAMILIES for t in family.triggers), *EXTRA_TRIGGERS,
    *SPACED_TRIGGERS,
)
# Scans gated by a substring test: (the word, the finder run only when a text holds it).
GATED: tuple[tuple[str, Callable[[str], Iterable[Span]]], ...] = GATED_FORMS


@dataclass(frozen=True, slots=True)
class Scan:
    """Every family's triggers compiled for one pass: the combined pattern, each trigger alone, the
    later triggers of each pivot, and the gated forms."""

    pattern: re.Pattern[str]
    triggers: tuple[Trigger, ...]  # by capture group number - 1
    alone: tuple[re.Pattern[str], ...]  # each trigger by itself
    later: tuple[tuple[int, ...], ...]  # triggers of the same pivot after each one
    gated: tuple[tuple[str, re.Pattern[str], Trigger], ...]  # (gate, pattern, trigger)


def _group_pattern(pivot: str, group: list[Trigger]) -> tuple[str, list[Trigger]]:
    """One pivot's branch, and its triggers in the order their groups stand in it.

    Triggers whose text before the pivot is known sit behind one look-behind on its last two
    characters (one alternation, which the regex compiler factors): a pivot in ordinary text
    fails that single check instead of each trigger's own."""
    by_width: dict[int, list[Trigger]] = {}
    others: list[Trigger] = []
    for trigger in group:
        if trigger.behind:
            by_width.setdefault(min(2, len(trigger.behind)), []).append(trigger)
        else:
            others.append(trigger)
    ordered: list[Trigger] = []
    branches: list[str] = []
    escaped = re.escape(pivot)
    for width, members in sorted(by_width.items(), reverse=True):
        tails = sorted({re.escape(t.behind[-width:]) for t in members if t.behind})
        gate = f"(?<=(?:{'|'.join(tails)}){escaped})"
        branches.append(gate + "(?:" + "|".join(f"{t.around}()" for t in members) + ")")
        ordered.extend(members)
    branches.extend(f"{t.around}()" for t in others)
    ordered.extend(others)
    return f"{escaped}(?:{'|'.join(branches)})", ordered


@functools.cache
def combined_scan() -> Scan:
    """The combined pattern, compiled once per process on first use."""
    by_pivot: dict[str, list[Trigger]] = {}
    gated: list[tuple[str, re.Pattern[str], Trigger]] = []
    for trigger in TRIGGERS:
        if not trigger.pivot and trigger.gate:
            gated.append((trigger.gate, re.compile(trigger.around), trigger))
            continue
        if len(trigger.pivot) != 1:
            raise ValueError(f"a trigger pivots on one character, not {trigger.pivot!r}")
        if re.compile(trigger.around).groups:
            raise ValueError(f"a trigger's look-arounds capture nothing: {trigger.around!r}")
        by_pivot.setdefault(trigger.pivot, []).append(trigger)
    ordered: list[Trigger] = []
    later: list[tuple[int, ...]] = []
    branches: list[str] = []
    # The most frequent pivots first: at a pivot, the alternation skips the others' branches.
    for pivot, group in sorted(by_pivot.items(), key=lambda item: pivot_rank(item[0])):
        branch, members = _group_pattern(pivot, group)
        first = len(ordered)
        ordered.extend(members)
        later.extend(tuple(range(first + k + 1, first + len(members)))
                     for k in range(len(members)))
        branches.append(branch)
    return Scan(
        pattern=re.compile("|".join(branches)),
        triggers=tuple(ordered),
        alone=tuple(re.compile(re.escape(t.pivot) + t.around) for t in ordered),
        later=tuple(later),
        gated=tuple(gated),
    )


def find_builtin(text: str) -> list[Span]:
    """Every built-in family's candidates in `text`, overlapping ones included."""
    scan = _SCAN or _compiled()
    found: list[Span] = []
    for match in scan.pattern.finditer(text):
        index = match.lastindex - 1  # type: ignore[operator]
        at = match.start()
        found.extend(scan.triggers[index].find(text, at))
        for other in scan.later[index]:
            if scan.alone[other].match(text, at):
                found.extend(scan.triggers[other].find(text, at))
    for gate, pattern, trigger in scan.gated:
        if gate in text:
            for match in pattern.finditer(text):
                found.extend(trigger.find(text, match.start()))
    for word, finder in GATED:
        if word in text:
            found.extend(finder(text))
    return found


_SCAN: Scan | None = None


def _compiled() -> Scan:
    global _SCAN
    _SCAN = combined_scan()
    return _SCAN
