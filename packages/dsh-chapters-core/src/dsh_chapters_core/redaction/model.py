"""What a credential family is made of: triggers the combined scan finds, and finders.

A family never scans the text itself. Each of its triggers names one character (the pivot)
and the fixed-width look-behind and look-ahead that must hold around it; the engine joins
every trigger of every family into one regular expression, so a text is scanned once, at C
speed, and a family's finder (Python) runs only where its own trigger fired. The pivots are a few
rare characters (`PIVOTS`): a scan for them skips nearly every position of ordinary text
without looking further.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# (start, end, family): the secret's span and the family that found it.
Span = tuple[int, int, str]
# (text, index of the trigger's pivot character) -> the secrets found there.
Finder = Callable[[str, int], Iterable[Span]]

# Characters from the most to the least frequent in agent transcripts (measured on 57 M
# characters of public Claude Code and Codex sessions); any other character counts as rarer
# than all of these.
RARITY = (
    " etnisroacldupmh\n/g.\"f-\t:,\\bk1_y0vw(2)=`3x4SC56T{79}8*IARED;P"
    "NFUOL+[>jM'|]B#qW<GH!&%Vz@?$KJYZXQ~^"
)
_RANK = {ch: i for i, ch in enumerate(RARITY)}
# The pivots a literal anchor may use, in order of preference: a separator (the rarest the
# anchor holds), else one of a few capitals. Every pivot character makes the scan stop at
# each of its occurrences (the separators together are about 4% of all characters, these
# capitals 0.5%), so anchors share as few pivots as they can: `ABIA`, `ASIA`, `LTAI` and
# `ATBB` all pivot on their `A`, not on `B`, `S`, `L`.
SEPARATORS = "_-.:=>~/+@"
CAPITALS = "KJZXQYVGHAE"
PIVOTS = frozenset(SEPARATORS + CAPITALS)

WORD = frozenset(string.ascii_letters + string.digits)
URLSAFE = frozenset(WORD | {"_", "-"})


@dataclass(frozen=True, slots=True)
class Trigger:
    """One place a family may match: `pivot` (a single character) followed in the combined
    pattern by `around`, a regex of look-arounds only (zero width). `find` runs at a hit.

    A trigger with no pivot (`pivot == ""`) is gated instead: its `around` is a pattern of its
    own, searched only in a text holding `gate` (an anchor with no rare character, `dapi`)."""

    pivot: str
    around: str
    find: Finder
    gate: str = ""
    # The literal text every match has right before the pivot, when known: the engine checks
    # the last two characters of all such triggers of a pivot at once, before any of them.
    behind: str | None = None


@dataclass(frozen=True, slots=True)
class Family:
    """A named family: its name is what `chapters redact --report` and the archive count."""

    name: str
    what: str  # what it matches, in a user's words (docs/redaction.md)
    triggers: tuple[Trigger, ...]


def pivot_rank(char: str) -> int:
    """How common `char` is: 0 for the most frequent character of `RARITY`."""
    return _RANK.get(char, len(RARITY))


def pivot_index(anchor: str) -> int | None:
    """Where `anchor` pivots: its rarest separator, else its most preferred capital."""
    separators = [i for i, ch in enumerate(anchor) if ch in SEPARATORS]
    if separators:
        return max(separators, key=lambda i: (_RANK.get(anchor[i], len(RARITY)), -i))
    capitals = [i for i, ch in enumerate(anchor) if ch in CAPITALS]
    if capitals:
        return min(capitals, key=lambda i: (CAPITALS.index(anchor[i]), i))
    return None


def literal_trigger(anchor: str, find_at: Callable[[str, int], Iterable[Span]],
                    ahead: str = "") -> Trigger:
    """A trigger on the literal `anchor`; `find_at` gets the anchor's start. `ahead` is more
    look-ahead after the anchor (the body's shape)."""
    i = pivot_index(anchor)
    if i is None:
        return Trigger("", re.escape(anchor) + (f"(?={ahead})" if ahead else ""), find_at,
                       gate=anchor)
    before, pivot, after = anchor[:i], anchor[i], anchor[i + 1 :]
    around = ""
    if before:
        around += f"(?<={re.escape(before + pivot)})"
    if after or ahead:
        around += f"(?={re.escape(after)}{ahead})"
    offset = i

    def find(text: str, at: int) -> Iterable[Span]:
        return find_at(text, at - offset)

    return Trigger(pivot, around, find, behind=before)


# -- the shared allow-list ----------------------------------------------------------------------

# A JSON string escape right before a match (`\nAKIA…`, `\u0022sk-…`, `\tghp_…`): its last
# character is a letter or digit, but no word runs into the match.
_ESCAPE_BEFORE = re.compile(r"(?:\\[nrtbf/]|\\u[0-9a-fA-F]{4})\Z")


def starts_word(text: str, start: int, joined: frozenset[str] = WORD) -> bool:
    """True when no character of `joined` runs into `start` (a JSON escape does not count)."""
    if start == 0 or text[start - 1] not in joined:
        return True
    return text[start - 1] in "nrtbf/0123456789abcdefABCDEF" and bool(
        _ESCAPE_BEFORE.search(text, max(0, start - 6), start)
    )


def ends_word(text: str, end: int, joined: frozenset[str] = WORD) -> bool:
    return end >= len(text) or text[end] not in joined


_EXAMPLE = re.compile(r"(?i)example|x{6}|\*{4}|0{10}|(?:your|my)[_-]")


def is_example(secret: str) -> bool:
    """A documented example or an obvious filler, never a live credential: the AWS docs'
    `AKIAIOSFODNN7EXAMPLE`, `sk-xxxxxxxx…`, `ghp_000000…`, `your_token_here`."""
    return _EXAMPLE.search(secret) is not None


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    if not text:
        return 0.0
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def char_classes(text: str) -> int:
    """How many of lower case, upper case, digits and other characters `text` mixes."""
    lower = upper = digit = other = 0
    for ch in text:
        if ch.islower():
            lower = 1
        elif ch.isupper():
            upper = 1
        elif ch.isdigit():
            digit = 1
        else:
            other = 1
    return lower + upper + digit + other


def spans_of(pattern: re.Pattern[str], text: str, start: int, family: str,
             group: str = "secret") -> Iterable[Span]:
    """The `group` (else the whole match) of `pattern` matched at `start`, unless it is an
    example."""
    match = pattern.match(text, start)
    if match is None:
        return ()
    span = match.span(group) if group in pattern.groupindex and match.start(group) >= 0 else (
        match.span())
    if span[1] <= span[0] or is_example(text[span[0] : span[1]]):
        return ()
    return ((span[0], span[1], family),)
