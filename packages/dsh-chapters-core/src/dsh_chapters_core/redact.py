"""Credential redaction (§9): credentials only, deterministic patterns, everything else intact.

Applied once, at the archive chokepoint, to chapters and artifacts alike. Each secret becomes
`⟦redacted:credential sha256=<8 hex>⟧`, deterministic per secret so diffs and greps stay
stable. Where a credential has a visible prefix (`Authorization: Bearer`, `token=`, a URL's
`user:`, `JWT_SECRET=`), only the secret value is replaced. Redaction is idempotent: a marker
never matches.
Honest limit (§9): pattern redaction is a speed bump, not a guarantee.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from dataclasses import dataclass

from dsh_chapters_core.errors import ConfigError
from dsh_chapters_core.redaction.engine import BUILTIN_FAMILIES, find_builtin

CUSTOM = "custom"

MARKER_PATTERN = re.compile(r"⟦redacted:credential sha256=[0-9a-f]{8}⟧")


@dataclass(frozen=True, slots=True)
class Redaction:
    """A text with its credentials replaced by markers, and how many were replaced per family."""

    text: str
    counts: tuple[tuple[str, int], ...]  # (family, matches), sorted by family, non-zero only

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)


@dataclass(frozen=True, slots=True)
class Found:
    """One credential in a text: where it is, which family found it, and its marker's hash
    (the secret itself is never kept)."""

    start: int
    end: int
    family: str
    sha256: str  # the first 8 hex digits, as in the marker


# The family names, in report order: the built-ins, then "custom" (config patterns).
FAMILIES: tuple[str, ...] = (*(f.name for f in BUILTIN_FAMILIES), CUSTOM)
FAMILY_NAMES = FAMILIES
_ORDER = {name: i for i, name in enumerate(FAMILIES)}


def _secret_hash(secret: str) -> str:
    try:
        data = secret.encode("utf-8")
    except UnicodeEncodeError:  # text read with surrogateescape: hash the original bytes
        try:
            data = secret.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = secret.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:8]


def marker(secret: str) -> str:
    """The §9 marker: obviously not a value, deterministic per secret, leaks only a hash prefix."""
    return f"⟦redacted:credential sha256={_secret_hash(secret)}⟧"


def _compile_custom(extra_patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    compiled: list[re.Pattern[str]] = []
    for index, source in enumerate(extra_patterns, start=1):
        try:
            compiled.append(re.compile(source))
        except re.error as exc:
            raise ConfigError(
                f"redactionPatterns[{index}] is not a valid regular expression: {exc.msg} "
                f"at position {exc.pos}",
                hint="fix or remove that pattern in config.toml",
            ) from exc
    return tuple(compiled)


_custom_cache: dict[tuple[str, ...], tuple[re.Pattern[str], ...]] = {}


def _custom(extra_patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    compiled = _custom_cache.get(extra_patterns)
    if compiled is None:
        compiled = _compile_custom(extra_patterns)
        _custom_cache[extra_patterns] = compiled
    return compiled


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    """The `secret` (or `password`) group if the pattern has one and it took part, else all."""
    groups = match.re.groupindex
    for name in ("secret", "password"):
        if name in groups and match.start(name) >= 0:
            return match.span(name)
    if match.re.groups >= 1 and match.start(1) >= 0:
        return match.span(1)
    return match.span()


def _overlaps(span: tuple[int, int], protected: list[tuple[int, int]]) -> bool:
    start, end = span
    return any(start < p_end and p_start < end for p_start, p_end in protected)


# `\u0022`, `\u003a`, …: printable ASCII written as a JSON \u escape. Read through them, a
# credential spelt with escaped quotes or separators is found like its plain form.
_ASCII_ESCAPE = re.compile(r"\\u00([2-7][0-9a-fA-F])")
_ESCAPE_SHRINK = len("\\u0022") - 1  # an escape is six characters of a text, one of its view


def _candidates(text: str, extra_patterns: tuple[str, ...]) -> list[tuple[int, int, str]]:
    candidates = find_builtin(text)
    if not extra_patterns:
        return candidates
    for pattern in _custom(extra_patterns):
        for match in pattern.finditer(text):
            start, end = _secret_span(match)
            if end > start:
                candidates.append((start, end, CUSTOM))
    return candidates


@dataclass(frozen=True, slots=True)
class _EscapedView:
    """`text` with its printable-ASCII `\\u00XX` escapes decoded, and the way back: each
    escape's place in the view and in `text`. The text between two escapes is the same in
    both, so a place in the view maps back through those alone."""

    decoded: str
    at_view: tuple[int, ...]  # where each escape's character stands in `decoded`
    at_text: tuple[int, ...]  # where the escape itself starts in `text`

    def offset(self, index: int) -> int:
        """Where the view's character at `index` starts in `text` (its length past the end):
        a span `[start, end)` of the view is `[offset(start), offset(end))` of `text`."""
        k = bisect_left(self.at_view, index)
        if k < len(self.at_view) and self.at_view[k] == index:
            return self.at_text[k]
        return index + _ESCAPE_SHRINK * k


def _unescaped_view(text: str) -> _EscapedView | None:
    """The view of `text` through its `\\u00XX` escapes; None when there is no such escape."""
    if "\\u00" not in text:
        return None
    pieces: list[str] = []
    at_text: list[int] = []
    cursor = 0
    for match in _ASCII_ESCAPE.finditer(text):
        pieces += (text[cursor:match.start()], chr(int(match.group(1), 16)))
        at_text.append(match.start())
        cursor = match.end()
    if not at_text:
        return None
    pieces.append(text[cursor:])
    return _EscapedView("".join(pieces),
                        tuple(at - _ESCAPE_SHRINK * k for k, at in enumerate(at_text)),
                        tuple(at_text))


def _resolved(text: str, extra_patterns: tuple[str, ...]) -> list[tuple[int, int, str, str]]:
    """The credentials to replace, in order, none overlapping another or a marker:
    (start, end, family, secret as its marker hashes it)."""
    candidates: list[tuple[int, int, str, str]] = [
        (start, end, name, text[start:end])
        for start, end, name in _candidates(text, extra_patterns)
    ]
    view = _unescaped_view(text)
    if view is not None:
        for start, end, name in _candidates(view.decoded, extra_patterns):
            candidates.append((view.offset(start), view.offset(end), name,
                               view.decoded[start:end]))
    if not candidates:
        return []
    # A marker already in the text is never redacted again (idempotence).
    protected = [m.span() for m in MARKER_PATTERN.finditer(text)] if "⟦" in text else []
    # Earliest first; at one start the longest wins; then the more specific family (report
    # order); overlapping later candidates drop.
    candidates.sort(key=lambda c: (c[0], -c[1], _ORDER[c[2]]))
    chosen: list[tuple[int, int, str, str]] = []
    cursor = 0
    for candidate in candidates:
        start, end = candidate[0], candidate[1]
        if start < cursor or (protected and _overlaps((start, end), protected)):
            continue
        chosen.append(candidate)
        cursor = end
    return chosen


def redact(text: str, extra_patterns: tuple[str, ...] = ()) -> Redaction:
    """Replace every credential in `text` by its marker; count matches per family.

    Every family matches in JSON-escaped text as well as plain (§9): escaped quotes and
    escapes right before a secret are read as such, and a credential spelt with `\\u00XX`
    escapes is found through a decoded view, its marker hashing the decoded secret (so the
    same secret gives the same marker however it was escaped)."""
    chosen = _resolved(text, extra_patterns)
    if not chosen:
        return Redaction(text=text, counts=())
    pieces: list[str] = []
    counts: dict[str, int] = {}
    cursor = 0
    for start, end, name, secret in chosen:
        pieces.append(text[cursor:start])
        pieces.append(marker(secret))
        counts[name] = counts.get(name, 0) + 1
        cursor = end
    pieces.append(text[cursor:])
    return Redaction(text="".join(pieces), counts=tuple(sorted(counts.items())))


def find_secrets(text: str, extra_patterns: tuple[str, ...] = ()) -> tuple[Found, ...]:
    """What `redact` would replace, without replacing it: for `chapters scan`, which reports
    where credentials stand in what older versions archived, never the credentials."""
    return tuple(Found(start, end, name, _secret_hash(secret))
                 for start, end, name, secret in _resolved(text, extra_patterns))


def merge_counts(*counts: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """Sum per-family counts of several redactions (a chapter's many texts)."""
    total: dict[str, int] = {}
    for pairs in counts:
        for name, n in pairs:
            total[name] = total.get(name, 0) + n
    return tuple(sorted(total.items()))
