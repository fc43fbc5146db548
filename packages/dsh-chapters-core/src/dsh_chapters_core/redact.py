"""Credential redaction (§9): credentials only, deterministic patterns, everything else intact.

Applied once, at the archive chokepoint, to chapters and artifacts alike. Each secret becomes
`⟦redacted:credential sha256=<8 hex>⟧`, deterministic per secret so diffs and greps stay
stable. Where a credential has a visible prefix (`Authorization: Bearer`, `token=`, a URL's
`user:`), only the secret value is replaced. Redaction is idempotent: a marker never matches.
Honest limit (§9): pattern redaction is a speed bump, not a guarantee.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

from dsh_chapters_core.errors import ConfigError

CUSTOM = "custom"

MARKER_PATTERN = re.compile(r"⟦redacted:credential sha256=[0-9a-f]{8}⟧")


@dataclass(frozen=True, slots=True)
class Family:
    """One built-in pattern family. The `secret` group (or the whole match) is replaced."""

    name: str
    patterns: tuple[re.Pattern[str], ...]
    # A cheap substring test run before the regex: most text holds no credential at all.
    may_match: Callable[[str, str], bool]
    # Characters that may not sit right before a match (a word boundary, checked in Python:
    # a leading look-behind would cost Python's regex engine its fast literal-prefix scan).
    not_after: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Redaction:
    text: str
    counts: tuple[tuple[str, int], ...]  # (family, matches), sorted by family, non-zero only

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)


_WORD_CHARS = frozenset(string.ascii_letters + string.digits)

# Secret bodies never contain whitespace or the marker brackets, which keeps a second pass
# from matching its own output.
BUILTIN_FAMILIES: tuple[Family, ...] = (
    Family(
        "aws-access-key",
        (re.compile(r"(?P<secret>A[KS]IA[0-9A-Z]{16})(?![A-Za-z0-9])"),),
        lambda text, lower: "KIA" in text or "SIA" in text,
        _WORD_CHARS,
    ),
    Family(
        "openai-key",
        (re.compile(r"(?P<secret>sk-[A-Za-z0-9_-]{20,})"),),
        lambda text, lower: "sk-" in text,
        _WORD_CHARS | {"_", "-"},
    ),
    Family(
        "github-token",
        (re.compile(r"(?P<secret>g(?:h[pousr]_[A-Za-z0-9]{20,}|ithub_pat_[A-Za-z0-9_]{20,}))"),),
        lambda text, lower: "h" in text,
        _WORD_CHARS | {"_"},
    ),
    Family(
        "jwt",
        (re.compile(
            r"(?P<secret>eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,})"
        ),),
        lambda text, lower: "eyJ" in text,
        _WORD_CHARS | {"_", "-"},
    ),
    Family(
        "bearer",
        (re.compile(
            r"(?i)authorization[\"']?\s*[:=]\s*[\"']?bearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"
        ),),
        lambda text, lower: "bearer" in lower,
    ),
    Family(
        "url-token",
        (
            re.compile(r"(?i)[?&;#](?:[a-z]+_)?token=(?P<secret>[^\s&#\"'<>⟦⟧]+)"),
            re.compile(r"://[^/\s:@⟦⟧]+:(?P<password>[^/\s@⟦⟧]+)@"),
        ),
        lambda text, lower: "token=" in lower or ("://" in text and "@" in text),
    ),
    Family(
        "pem-private-key",
        (re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----\s*"
            r"(?P<secret>(?:(?!-----)\S)(?:(?!-----)[\s\S])*?)"
            r"\s*-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
        ),),
        lambda text, lower: "PRIVATE KEY-----" in text,
    ),
)

# The family names, in report order: the built-ins, then "custom" (config patterns).
FAMILIES: tuple[str, ...] = (*(f.name for f in BUILTIN_FAMILIES), CUSTOM)
FAMILY_NAMES = FAMILIES


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


def redact(text: str, extra_patterns: tuple[str, ...] = ()) -> Redaction:
    """Replace every credential in `text` by its marker; count matches per family."""
    lower = text.lower()
    candidates: list[tuple[int, int, str]] = []
    for family in BUILTIN_FAMILIES:
        if not family.may_match(text, lower):
            continue
        for pattern in family.patterns:
            for match in pattern.finditer(text):
                begin = match.start()
                if begin and text[begin - 1] in family.not_after:
                    continue
                start, end = _secret_span(match)
                if end > start:
                    candidates.append((start, end, family.name))
    for pattern in _custom(extra_patterns):
        for match in pattern.finditer(text):
            start, end = _secret_span(match)
            if end > start:
                candidates.append((start, end, CUSTOM))
    if not candidates:
        return Redaction(text=text, counts=())
    # A marker already in the text is never redacted again (idempotence).
    protected = [m.span() for m in MARKER_PATTERN.finditer(text)] if "⟦" in text else []
    # Earliest first; at one start the longest wins; overlapping later candidates drop.
    candidates.sort(key=lambda c: (c[0], -c[1], FAMILIES.index(c[2])))
    pieces: list[str] = []
    counts: dict[str, int] = {}
    cursor = 0
    for start, end, name in candidates:
        if start < cursor or _overlaps((start, end), protected):
            continue
        pieces.append(text[cursor:start])
        pieces.append(marker(text[start:end]))
        counts[name] = counts.get(name, 0) + 1
        cursor = end
    if not counts:
        return Redaction(text=text, counts=())
    pieces.append(text[cursor:])
    return Redaction(text="".join(pieces), counts=tuple(sorted(counts.items())))


def merge_counts(*counts: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """Sum per-family counts of several redactions (a chapter's many texts)."""
    total: dict[str, int] = {}
    for pairs in counts:
        for name, n in pairs:
            total[name] = total.get(name, 0) + n
    return tuple(sorted(total.items()))
