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
import string
from collections.abc import Callable, Iterator
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
    # A family whose shape a single pattern cannot say finds its secret spans itself, from
    # (text, lowered text); its `patterns` stay empty.
    find: Callable[[str, str], Iterator[tuple[int, int]]] | None = None


@dataclass(frozen=True, slots=True)
class Redaction:
    text: str
    counts: tuple[tuple[str, int], ...]  # (family, matches), sorted by family, non-zero only

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)


_WORD_CHARS = frozenset(string.ascii_letters + string.digits)

# --- secret-assignment: `JWT_SECRET=…`, `"password": "…"`, `api_key: …` -----------------------
# Only the key's name says a value is a credential, so the family is narrow on both sides: a
# closed list of name endings, and a value that is neither short, a placeholder nor code.

# A key name (upper-cased, `-` read as `_`) that ends so, or holds `_SECRET_`, names a secret.
# `_?` lets `apiKey`, `api-key` and `API_KEY` be one name.
_SECRET_KEY_NAME = re.compile(
    r"(?:SECRET(?:_?(?:ACCESS_?)?KEY)?|PASSW(?:OR)?D|API_?KEY|(?:ACCESS|AUTH)_?TOKEN"
    r"|PRIVATE_?KEY)\Z|_SECRET_"
)
# Where such a name may be, found on the lowered text with a plain (fast) literal scan.
_SECRET_KEY_HINT = re.compile(r"secret|passw|api[_-]?key|token|private[_-]?key")
_KEY_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# A pattern shape, like the other families' `{8,}`, not a setting: the pool's markers must
# agree on every machine. Shorter values are flags, types and examples (`true`, `str`, `none`).
_MIN_ASSIGNED_SECRET = 8

# After a bare name: KEY=…, export KEY=…, --password=…, KEY = "…", KEY: … (YAML, headers).
_SEPARATOR = re.compile(r"[ \t]*=[ \t]*|:[ \t]+")
# After a quoted name's closing quote: "key": … (JSON, Python dicts, `\"key\": \"…\"` in JSONL).
_QUOTED_NAME_SEPARATOR = re.compile(r"[ \t]*:[ \t]*")
# Escaped once (\", JSON) or twice (\\\", JSON inside a JSON string: a tool input).
_NAME_QUOTES = ('"', "'", '\\"', "\\'", '\\\\\\"')
# A quoted value runs to its closing quote on the same line; never through a marker bracket.
_QUOTED_VALUE = re.compile(
    r"\"(?P<dq>(?:[^\"\\\n⟦⟧]|\\[^\n⟦⟧])*+)\""
    r"|'(?P<sq>(?:[^'\\\n⟦⟧]|\\[^\n⟦⟧])*+)'"
    r"|\\\"(?P<edq>(?:[^\"\\\n⟦⟧]|\\[^\"\n⟦⟧])*+)\\\""
    r"|(?P<bs>\\{2,})\"(?P<mdq>[^\"\\\n⟦⟧]*+)(?P=bs)\""
)
# A bare value runs to whitespace, a quote, `\` (an escaped newline in raw JSONL) or `&` (the
# next query parameter). One that runs into a marker is no value (idempotence).
_BARE_VALUE_END = re.compile(r"[\s\"'`⟦⟧\\&]")

# A bare value shaped like code is a reference, not a secret: a name without digits
# (`password)`, `SecretStr`), a dotted name, a call or an index (`settings.api_key`,
# `os.environ[`, `get_secret()`, `Optional[str]`). Matched from the value's start only, so a
# long value costs no more than its first characters.
_CODE_REFERENCE = re.compile(
    r"[A-Za-z_]+[)\]}]*\Z"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+[)\]}]*\Z"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*[(\[]"
)
_FILLER = re.compile(r"[*•·.#_xX?-]+")
_BRACKETED = frozenset({("<", ">"), ("{", "}"), ("[", "]")})


def _is_placeholder(text: str, start: int, end: int) -> bool:
    """Text standing for a secret: `***`, `xxxx…`, `<your key>`, `${VAR}`, `$VAR`, `$(cmd)`,
    `{{ .Values.x }}`, `[REDACTED]`, `changeme`. Looks at the ends of the value only."""
    first, second = text[start], text[start + 1]
    if text[start : start + 3] in ("***", "xxx", "XXX") or (first, text[end - 1]) in _BRACKETED:
        return True
    if first == "$" and (second.isalpha() or second in "_{("):
        return True
    if end - start <= len("change_me") and (
        text[start:end].lower().replace("-", "").replace("_", "") == "changeme"
    ):
        return True
    return _FILLER.fullmatch(text, start, end) is not None


def _quoted_value(text: str, at: int) -> tuple[int, int] | None:
    quoted = _QUOTED_VALUE.match(text, at)
    if quoted is None:
        return None
    return quoted.span(next(g for g in ("dq", "sq", "edq", "mdq") if quoted.start(g) >= 0))


def _is_bare_secret(text: str, start: int, end: int, *, spaced: bool) -> bool:
    return (
        end - start >= _MIN_ASSIGNED_SECRET
        # `SECRET_KEY = os.environ…`, `a == b`: spaced and unquoted is code, not config
        and not spaced
        and not _is_placeholder(text, start, end)
        and _CODE_REFERENCE.match(text, start, end) is None
        # `-----BEGIN …`: the pem-private-key family takes the block
        and not text.startswith("-----", start, end)
    )


def _find_assigned_secrets(text: str, lower: str) -> Iterator[tuple[int, int]]:
    """Values assigned to credential-named keys, found from the names' hints."""
    if len(lower) != len(text):  # `İ` lowers to two characters: keep offsets aligned
        lower = text.translate(_ASCII_LOWER)
    done = 0  # no name or value starts before this
    # Where the last bare value's run of characters ended: names inside one long unbroken run
    # share one scan, so the family stays linear however many names a run holds.
    run_start = run_end = -1
    for hint in _SECRET_KEY_HINT.finditer(lower):
        if hint.start() < done:
            continue
        begin, end = hint.start(), hint.end()
        while begin and text[begin - 1] in _KEY_CHARS:
            begin -= 1
        while end < len(text) and text[end] in _KEY_CHARS:
            end += 1
        done = end
        # The name starts a name, not a path segment (`/etc/passwd: …`).
        if (begin and text[begin - 1] == "/") or not _SECRET_KEY_NAME.search(
            text[begin:end].upper().replace("-", "_")
        ):
            continue
        separator = _SEPARATOR.match(text, end)
        for quote in _NAME_QUOTES:
            if separator is None and text.endswith(quote, 0, begin) and text.startswith(quote, end):
                separator = _QUOTED_NAME_SEPARATOR.match(text, end + len(quote))
        if separator is None:
            continue
        at = separator.end()
        quoted = _quoted_value(text, at)
        if quoted is not None:
            start, stop = quoted
            is_secret = stop - start >= _MIN_ASSIGNED_SECRET and not _is_placeholder(
                text, start, stop
            )
        else:
            if not run_start <= at < run_end:
                found = _BARE_VALUE_END.search(text, at)
                run_start, run_end = at, len(text) if found is None else found.start()
            start, stop = at, run_end
            if stop < len(text) and text[stop] in "⟦⟧":
                continue  # runs into a marker: no value
            if text[begin - 1 : begin] in ("?", "&", ";", "#"):
                cut = text.find("#", start, stop)  # `?api_key=…#frag`: not the fragment
                stop = stop if cut < 0 else cut
            while stop > start and text[stop - 1] in ",;":  # punctuation after the value
                stop -= 1
            sep = separator.group()
            is_secret = _is_bare_secret(text, start, stop, spaced=sep != "=" and "=" in sep)
        if is_secret:
            yield start, stop
        # Read on inside the value: it may hold a real assignment (`"x":"$A JWT_SECRET=…"`), and
        # when another family's earlier match takes this one's place, the assignments inside
        # must be found now, or a second pass would find them (idempotence).
        done = start


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
        # A quote around the name or the value may be escaped once or twice (`\"`, `\\\"`)
        # in JSON-encoded text (a tool call's input, a JSONL line).
        (re.compile(
            r"(?i)authorization(?:\\*[\"'])?\s*[:=]\s*(?:\\*[\"'])?bearer\s+"
            r"(?P<secret>[A-Za-z0-9._~+/=-]{8,})"
        ),),
        lambda text, lower: "bearer" in lower,
    ),
    Family(
        "url-token",
        (
            # `\` ends the value: in JSON-encoded text it starts the escape after the token
            re.compile(r"(?i)[?&;#](?:[a-z]+_)?token=(?P<secret>[^\s&#\"'<>⟦⟧\\]+)"),
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
    Family(
        "secret-assignment",
        (),
        lambda text, lower: "=" in text or ":" in text,
        find=_find_assigned_secrets,
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


# A JSON string escape right before a match (`\nAKIA…`, `\u0022sk-…`, `\tghp_…`): its last
# character is a letter or digit, but no word runs into the match.
_ESCAPE_BEFORE = re.compile(r"(?:\\[nrtbf/]|\\u[0-9a-fA-F]{4})\Z")
# `\u0022`, `\u003a`, …: printable ASCII written as a JSON \u escape. Read through them, a
# credential spelt with escaped quotes or separators is found like its plain form.
_ASCII_ESCAPE = re.compile(r"\\u00([2-7][0-9a-fA-F])")


def _escaped_before(text: str, begin: int) -> bool:
    return text[begin - 1] in "nrtbf/0123456789abcdefABCDEF" and bool(
        _ESCAPE_BEFORE.search(text, max(0, begin - 6), begin)
    )


def _candidates(text: str, extra_patterns: tuple[str, ...]) -> list[tuple[int, int, str]]:
    lower = text.lower()
    candidates: list[tuple[int, int, str]] = []
    for family in BUILTIN_FAMILIES:
        if not family.may_match(text, lower):
            continue
        if family.find is not None:
            for start, end in family.find(text, lower):
                candidates.append((start, end, family.name))
        for pattern in family.patterns:
            for match in pattern.finditer(text):
                begin = match.start()
                if (begin and text[begin - 1] in family.not_after
                        and not _escaped_before(text, begin)):
                    continue
                start, end = _secret_span(match)
                if end > start:
                    candidates.append((start, end, family.name))
    for pattern in _custom(extra_patterns):
        for match in pattern.finditer(text):
            start, end = _secret_span(match)
            if end > start:
                candidates.append((start, end, CUSTOM))
    return candidates


def _unescaped_view(text: str) -> tuple[str, list[int], list[int]] | None:
    """`text` with its printable-ASCII `\\u00XX` escapes decoded, and for each character of
    that view where it starts and ends in `text`; None when there is no such escape."""
    if "\\u00" not in text:
        return None
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    cursor = 0
    for match in _ASCII_ESCAPE.finditer(text):
        plain = text[cursor : match.start()]
        pieces.append(plain)
        starts.extend(range(cursor, match.start()))
        ends.extend(range(cursor + 1, match.start() + 1))
        pieces.append(chr(int(match.group(1), 16)))
        starts.append(match.start())
        ends.append(match.end())
        cursor = match.end()
    if not pieces:
        return None
    pieces.append(text[cursor:])
    starts.extend(range(cursor, len(text)))
    ends.extend(range(cursor + 1, len(text) + 1))
    return "".join(pieces), starts, ends


def redact(text: str, extra_patterns: tuple[str, ...] = ()) -> Redaction:
    """Replace every credential in `text` by its marker; count matches per family.

    Every family matches in JSON-escaped text as well as plain (§9): escaped quotes and
    escapes right before a secret are read as such, and a credential spelt with `\\u00XX`
    escapes is found through a decoded view, its marker hashing the decoded secret (so the
    same secret gives the same marker however it was escaped)."""
    candidates: list[tuple[int, int, str, str]] = [
        (start, end, name, text[start:end])
        for start, end, name in _candidates(text, extra_patterns)
    ]
    view = _unescaped_view(text)
    if view is not None:
        decoded, starts, ends = view
        for start, end, name in _candidates(decoded, extra_patterns):
            candidates.append((starts[start], ends[end - 1], name, decoded[start:end]))
    if not candidates:
        return Redaction(text=text, counts=())
    # A marker already in the text is never redacted again (idempotence).
    protected = [m.span() for m in MARKER_PATTERN.finditer(text)] if "⟦" in text else []
    # Earliest first; at one start the longest wins; overlapping later candidates drop.
    candidates.sort(key=lambda c: (c[0], -c[1], FAMILIES.index(c[2])))
    pieces: list[str] = []
    counts: dict[str, int] = {}
    cursor = 0
    for start, end, name, secret in candidates:
        if start < cursor or _overlaps((start, end), protected):
            continue
        pieces.append(text[cursor:start])
        pieces.append(marker(secret))
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
