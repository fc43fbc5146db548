"""Values assigned to credential-named keys, in every config syntax (§9).

`.env` and `export` (`KEY=value`), INI and TOML (`key = value`, spaces allowed), YAML and HTTP
headers (`key: value`), JSON and Python dicts (`"key": "value"`, also escaped once or twice
inside a JSON string), PHP and Ruby arrows (`'key' => 'value'`), Go's `:=`, XML elements
(`<password>value</password>`), URL query parameters (`?api_key=…`), connection strings
(`…;AccountKey=…;`), and the space-separated forms (`set -x KEY value`, `aws configure set`,
`npm config set`, `ENV KEY value`, a `.netrc` entry).

Only the key's name says that a value is a credential, so both sides are narrow:
- a strong name (`…PASSWORD`, `…SECRET`, `…TOKEN`, `…API_KEY`, `…PRIVATE_KEY`, `…_PASS`,
  `…PWD`, a name holding `_SECRET_`) redacts any value that is not a placeholder, a type, a
  reference, a path or a short flag;
- a weak name (`…KEY`, `…AUTH`, `…CREDENTIALS`, `…SIGNATURE`, `…SIG`) redacts only a value that
  reads as random: token characters, letters and digits mixed, 16 or more of them, and
  3 bits of entropy per character or more (the generic high-entropy rule).
The family a value counts under says why it was redacted: `aws-secret-key`, `azure-key`,
`docker-auth`, `authorization-header`, `url-token`, `secret-assignment` (a strong name) or
`high-entropy-secret` (a weak one).
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Iterator

from dsh_chapters_core.redaction.model import (
    Family,
    Span,
    Trigger,
    char_classes,
    entropy,
    literal_trigger,
    starts_word,
)

# -- names --------------------------------------------------------------------------------


class Kind(enum.Enum):
    STRONG = "strong"
    WEAK = "weak"
    AWS = "aws"
    AZURE = "azure"
    AUTHORIZATION = "authorization"
    AUTH = "auth"  # exactly `auth` / `_auth`: a docker or npm `user:password` blob, or weak
    BARE_KEY = "key"  # exactly `key`: weak, and a hex digest or a UUID under it is an id
    WEAK_KEY = "weak key"  # `…_KEY` (`ENCRYPTION_KEY`): weak, and a hex value may be a key


_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_STRONG_ENDINGS = (
    "password", "passwd", "passphrase", "secret", "token", "apikey", "privatekey",
    "secretkey", "clientsecret", "dockercfg", "dockerconfigjson", "pwd", "storepass",
    "keypass",
)
_STRONG_WORDS = frozenset({"pass", "pw", "pwd"})
_WEAK_ENDINGS = ("key", "credential", "credentials", "creds", "signature")
_WEAK_WORDS = frozenset({"sig"})
# `…_SECRET_…` names a secret unless the last word says it names something else.
_NOT_THE_SECRET = frozenset({
    "name", "names", "file", "files", "path", "dir", "ref", "arn", "type", "version", "count",
    "length", "len", "prefix", "suffix", "provider", "manager", "store", "url", "uri", "env",
    "enabled", "rotation",
})
_NEVER = ("publickey", "pubkey", "publictoken", "sshkeys", "keyid")
# `…_key` names that name an identifier, not a secret: a cache key, a sort key, a map's key.
_NOT_SECRET_KEYS = frozenset({
    "cache", "sort", "partition", "primary", "foreign", "object", "idempotency", "routing",
    "row", "hash", "lookup", "dedup", "dedupe", "group", "message", "map", "dict", "index",
    "unique", "composite", "natural", "surrogate", "shard", "sharding", "i18n", "translation",
    "list", "search", "storage", "bucket", "s3", "file", "path", "state", "query", "hotkey",
    "shortcut", "lock", "session", "event", "record", "entry", "item", "label", "field",
})
_SHELL_VARIABLES = frozenset({"PWD", "OLDPWD"})


def name_kind(name: str) -> Kind | None:
    """What a key's name says of its value; None when it names no credential."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words or name in _SHELL_VARIABLES:
        return None
    joined = "".join(words)
    if "secret" in words[:-1] and words[-1] not in _NOT_THE_SECRET and not joined.endswith(
            ("secretaccesskey", "secretkey")):
        return Kind.STRONG
    if joined.endswith(_NEVER):
        return None
    if "aws" in words and joined.endswith(("secretaccesskey", "sessiontoken", "secretkey")):
        return Kind.AWS
    if joined.endswith(("secretaccesskey", "sessiontoken")):
        return Kind.AWS
    if joined.endswith(("accountkey", "sharedaccesskey")):
        return Kind.AZURE
    if joined.endswith("authorization"):
        return Kind.AUTHORIZATION
    if (joined.endswith(_STRONG_ENDINGS) and joined not in ("pwd",)) or (
            words[-1] in _STRONG_WORDS and len(words) > 1):
        # `pass`, `pw`, `pwd` alone are a test's status (`--- PASS: TestX`) and the shell's
        # working directory: they name a credential only in a compound (`DB_PASS`, `dbPwd`).
        return Kind.STRONG
    if words[-1] == "key" and len(words) > 1 and words[-2] in _NOT_SECRET_KEYS:
        return None
    if words == ["key"]:
        return Kind.BARE_KEY
    if joined == "auth":
        return Kind.AUTH
    if joined.endswith("key"):
        return Kind.WEAK_KEY
    if joined.endswith(_WEAK_ENDINGS) or words[-1] in _WEAK_WORDS or words[-1] == "auth":
        return Kind.WEAK
    return None


# -- values -------------------------------------------------------------------------------

# A pattern shape, like the token families' lengths, not a setting: every machine must redact
# the same bytes. Shorter values are flags, types and examples (`true`, `str`, `none`).
MIN_SECRET = 8
MIN_RANDOM = 16  # a weak name's value, or an unquoted value with spaces around `=`
MIN_ENTROPY = 3.0
MAX_VALUE = 4096

# A bare value shaped like code is a reference, not a secret: a name without digits
# (`password)`, `SecretStr`), a dotted name, a call or an index (`settings.api_key`,
# `os.environ[`, `get_secret()`, `Optional[str]`). Matched from the value's start only.
_CODE_REFERENCE = re.compile(
    r"[(\[{!]|await\b"
    r"|[A-Za-z_]+[)\]}]*\Z"
    r"|[A-Za-z_$][\w$]*(?:(?:[?!]?\.|::|->)[A-Za-z_$][\w$]*)+[)\]}]*\Z"
    r"|[A-Za-z_$][\w$]*(?:(?:[?!]?\.|::|->)[A-Za-z_$][\w$]*)*[(\[<{]"
)
_FILLER = re.compile(r"[*•·.#_xX?-]+")
_BRACKETED = frozenset({("<", ">"), ("{", "}"), ("[", "]"), ("(", ")")})
_PLACEHOLDER_WORDS = frozenset({
    "none", "null", "nil", "true", "false", "undefined", "string", "str", "bytes", "password",
    "secret", "token", "redacted", "hidden", "masked", "dummy", "placeholder", "changeme",
    "change-me", "change_me", "replaceme", "replace-me", "replace_me", "required", "optional",
    "default", "empty", "value", "todo", "tbd", "notset", "not-set", "unset", "secretstr",
    "invalid", "expired", "wrong", "incorrect", "bad", "fake", "test", "testing",
})
_PLACEHOLDER_PARTS = re.compile(
    r"(?i)example|(?:^|[^a-z])your[ _-]|^(?:my|insert|enter|replace|put|add|paste)[ _-]"
    r"|\*{3}|x{4}|•{3}|^(?:test|dummy|fake|mock|sample|placeholder)[ _-]|^#\{|redacted"
    r"|\$\{|(?:\.\.\.|…)$"
    r"|[ _-]here$|^xxx|^\.\.\."
    r"|^process\.env|^os\.environ|^env[.:(\[]|^secrets?\.|^vault:|^\{\{|^<%|^ref\+"
    r"|^%\(\w+\)s|^%[A-Za-z_]\w*%$|^@@|^\*\*\*|^•••|^\$[({\w]"
)
# A file the value names (`PRIVATE_KEY=keys/deploy.pem`, `private_key: ~/.ssh/id_ed25519`).
_PATH = re.compile(
    r"(?:~|\.{1,2})?/[^\s:]*\Z|[A-Za-z]:\\[^\s]*\Z"
    r"|[\w./-]*\.(?:pem|key|crt|cer|der|p12|pfx|jks|json|txt|env|ya?ml|toml|ini|cfg|conf|asc"
    r"|gpg|pub|kdbx)\Z"
)
# `privateKey: Uint8Array;`, `api_key: Optional[str] = None`, `token?: string | null`: a type.
_TYPE_WORDS = frozenset({
    "str", "string", "String", "bytes", "int", "number", "bool", "boolean", "any", "unknown",
    "object", "Object", "Buffer", "Uint8Array", "ArrayBuffer", "CryptoKey", "KeyObject",
    "SecretStr", "SecretBytes", "Optional", "Union", "None", "null", "undefined", "Secret",
    "Token", "Key", "PrivateKey", "Password", "char", "byte", "Vec", "Option", "Box", "Arc",
})
_TYPE_LIKE = re.compile(r"[A-Z][a-z]{2,}(?:[A-Z][a-z]+|\d+)*(?:<[^>\n]*>|\[\])?[?!]?")
_TYPE_FOLLOWERS = frozenset(";,|&>)=[<{")


def is_placeholder(value: str) -> bool:
    """Text standing for a secret: `***`, `xxxx…`, `<your key>`, `${VAR}`, `$VAR`, `$(cmd)`,
    `{{ .Values.x }}`, `[REDACTED]`, `changeme`, `your_api_key`, `…example…`, `sk-abc…`, and
    a slug naming what it stands for (`local-dev-key`, `runtime-operator-token`)."""
    if len(value) < 2:
        return True
    if _SLUG.fullmatch(value) and _wordy(value) and _CREDENTIAL_WORD.search(value):
        return True
    if (value[0], value[-1]) in _BRACKETED or _FILLER.fullmatch(value) is not None:
        return True
    if value.lower() in _PLACEHOLDER_WORDS:
        return True
    return _PLACEHOLDER_PARTS.search(value) is not None or "⟦" in value or "⟧" in value


def is_path(value: str) -> bool:
    """A file the value names, unless it reads as random (base64 may start with `/`)."""
    if _PATH.match(value) is None or " " in value:
        return False
    return not (len(value) >= 16 and entropy(value) >= 4.0 and any(c.isdigit() for c in value)
                and any(c.isupper() for c in value) and any(c.islower() for c in value))


def is_type(value: str, after: str) -> bool:
    """`value` is a type annotation: a known type name, or a type-shaped name (`Uint8Array`)
    followed by what follows types (`;`, `,`, ` |`, ` =`, `>`, `)`)."""
    head = value.rstrip("?!").split("<", 1)[0].split("[", 1)[0]
    if head in _TYPE_WORDS:
        return True
    return _TYPE_LIKE.fullmatch(value) is not None and (not after or after in _TYPE_FOLLOWERS)


def looks_random(value: str) -> bool:
    """Reads as generated, not written: token characters, letters and digits mixed, long,
    and high in entropy."""
    return (
        len(value) >= MIN_RANDOM
        and char_classes(value) >= 2
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and entropy(value) >= MIN_ENTROPY
        and _TOKEN_VALUE.fullmatch(value) is not None
    )


_TOKEN_VALUE = re.compile(r"[A-Za-z0-9+/=_%~-]+(?:\.[A-Za-z0-9+/=_%~-]+)*")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_SHA1 = re.compile(r"[0-9a-f]{40}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_ONE_WORD = re.compile(r"[A-Za-z0-9+/=_]+")
_CODE_PUNCTUATION = re.compile(r"[()\[\]{}<>,;]|::|->")


def _wordy(value: str) -> bool:
    """Made of words (`1-3-page-shell-with-layout`, `RAW_PROVIDER_SECRET`, a cache key's
    parts): half or more of its characters in runs of four lower-case letters (read in one
    case when it is all one case), which random mixed-case text rarely holds."""
    if value.isupper() or value.islower():
        value = value.lower()
    return sum(len(run) for run in _LETTER_RUNS.findall(value)) * 2 >= len(value)


_LETTER_RUNS = re.compile(r"[a-z]{4,}")
_SLUG = re.compile(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)+")
_CREDENTIAL_WORD = re.compile(
    r"(?i)(?:^|[-_.])(?:token|secret|key|password|passwd|pass|pwd|credential|credentials|apikey"
    r"|auth|value|stale|current|refreshed|leaked)(?:$|[-_.\d])")


def identifier_like(value: str, name: str = "") -> bool:
    """Reads as a program's name for something (`clientSecret`, `PostHogAPIKey`,
    `googleIdToken`), not as generated text: camelCase words (a capital, then lower case) or
    acronyms; or the key's own name. Random mixed case leaves lone capitals."""
    if name and value.lower().strip("_$") in name.lower():
        return True
    return _CAMEL.fullmatch(value) is not None


# Each piece takes its whole run of lower case letters or digits (the look-aheads): a run
# that could be cut into pieces in many ways made a failing match try every cut, twice as
# long for each more letter (a 24-letter value took 2 s).
_CAMEL = re.compile(r"(?:[A-Z]{2,}(?=[A-Z][a-z]{2}|\d|_|\Z)|[A-Z]?[a-z]+(?![a-z])|\d+(?!\d)|_)+")


def _weak_value(value: str, *, hex_ok: bool = True) -> bool:
    """A weak name's value: random, and not an id everyone shares (a UUID, a git SHA), words
    (a slug), or, unless the name ends in KEY, a hex digest (a signature, a checksum)."""
    return (looks_random(value) and _UUID.fullmatch(value) is None
            and _SHA1.fullmatch(value) is None and not _wordy(value)
            and (hex_ok or _HEX.fullmatch(value) is None))


def _docker_auth(value: str) -> bool:
    """A base64 `user:password` (docker's config.json `auth`, npm's `_auth`)."""
    if len(value) < MIN_SECRET or len(value) % 4 or not _BASE64.fullmatch(value):
        return False
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    user, colon, password = raw.partition(b":")
    return bool(colon and user and password) and all(32 <= b < 127 for b in raw)


_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


# -- the assignment finder ----------------------------------------------------------------

_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-$")
_MAX_NAME = 120
# A quoted value runs to its closing quote on the same line; never through a marker bracket.
_QUOTED_VALUE = re.compile(
    r"\"(?P<dq>(?:[^\"\\\n⟦⟧]|\\[^\n⟦⟧])*+)\""
    r"|'(?P<sq>(?:[^'\\\n⟦⟧]|\\[^\n⟦⟧])*+)'"
    r"|\\\"(?P<edq>(?:[^\"\\\n⟦⟧]|\\[^\"\n⟦⟧])*+)\\\""
    r"|(?P<bs>\\{2,})\"(?P<mdq>[^\"\\\n⟦⟧]*+)(?P=bs)\""
    r"|`(?P<bq>[^`\\\n⟦⟧]*+)`"
)
# A bare value runs to whitespace, a quote, `\` (an escaped newline in raw JSONL), `&` (the
# next query parameter), `;` (a connection string's next pair, a shell command's end), `<`
# (an XML element's end) or a marker.
_BARE_VALUE_END = re.compile(r"[\s\"'`⟦⟧\\&;<]")
_NAME_QUOTES = ("\\\\\\\"", "\\\"", '"', "'", "\\'")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9_-]{1,30})[ \t]+(?=\S)")
_CREDENTIAL_END = frozenset(",\\\"'`;)")


def _name_before(text: str, end: int) -> int:
    begin = end
    floor = max(0, end - _MAX_NAME)
    while begin > floor and text[begin - 1] in _KEY_CHARS:
        begin -= 1
    return begin


def _value_at(text: str, at: int) -> tuple[int, int, bool] | None:
    """(start, end, quoted) of the value at `at`; None when a marker stands there, or when
    it runs on past `MAX_VALUE` (no credential is that long; the bound keeps a text of many
    names in one long run linear)."""
    quoted = _QUOTED_VALUE.match(text, at, at + MAX_VALUE)
    if quoted is not None:
        group = next(g for g in ("dq", "sq", "edq", "mdq", "bq") if quoted.start(g) >= 0)
        return quoted.start(group), quoted.end(group), True
    found = _BARE_VALUE_END.search(text, at, at + MAX_VALUE)
    if found is None:
        return None if len(text) > at + MAX_VALUE else (at, len(text), False)
    stop = found.start()
    if text[stop] in "⟦⟧":
        return None  # runs into a marker: no value
    while stop > at and text[stop - 1] in ",):]}":  # punctuation after the value
        stop -= 1
    return at, stop, False


def _authorization(text: str, start: int, stop: int) -> Iterator[Span]:
    """`Bearer <t>`, `Basic <b64>`, `token <t>`, `Bot <t>`: the credential after the scheme;
    a value with no scheme is the credential itself. Digest and AWS signatures are lists of
    fields the other families read."""
    scheme = _SCHEME.match(text, start, stop)
    begin = scheme.end() if scheme is not None else start
    if scheme is not None and scheme.group(1).lower() in ("digest", "aws4-hmac-sha256"):
        return
    end = begin
    while end < stop and not text[end].isspace() and text[end] not in _CREDENTIAL_END:
        end += 1
    value = text[begin:end]
    if scheme is None and (end - begin < MIN_SECRET or identifier_like(value)
                           or _CODE_REFERENCE.match(value)):
        return  # `authorization: accessTokenAuthorization,`: a variable, not a header's value
    if end - begin >= MIN_SECRET and not is_placeholder(value):
        yield begin, end, "authorization-header"


def _decide(kind: Kind, value: str, *, quoted: bool, spaced: bool, colon: bool,
            after: str, config_line: bool = False, name: str = "") -> str | None:
    """The family `value` counts under, or None when it is not a secret."""
    if len(value) < MIN_SECRET or is_placeholder(value):
        return None
    if kind is Kind.AUTH:
        return "docker-auth" if _docker_auth(value) else (
            "high-entropy-secret" if _weak_value(value) else None)
    if colon and not quoted and is_type(value, after):
        return None
    if is_path(value):
        return None
    if not quoted and after == " " and _SLUG.fullmatch(value) and _wordy(value):
        return None  # `id_token: JWT-signed user information`: prose after a colon
    if quoted and identifier_like(value) and _CREDENTIAL_WORD.search(
            re.sub(r"([a-z])([A-Z])", r"\1_\2", value)):
        return None  # `PASSWORD: 'passwordFactor'`: a constant's name, not its value
    if not quoted and not config_line and _CODE_REFERENCE.match(value) is not None:
        return None
    if not quoted and config_line and _CODE_REFERENCE.match(value) is not None and (
            not value.isalpha() or len(value) < 12 or value.islower() or value.isupper()
            or identifier_like(value, name)):
        return None  # a config line's letters-only value is a secret only when it is random
    if kind is Kind.BARE_KEY:
        # a bare `key` holds ids as often as secrets: only one random word (no `-`, no `.`)
        return "high-entropy-secret" if (_weak_value(value, hex_ok=False)
                                         and _ONE_WORD.fullmatch(value)) else None
    if kind is Kind.WEAK_KEY:
        return "high-entropy-secret" if _weak_value(value) else None
    if kind is Kind.WEAK:
        return "high-entropy-secret" if _weak_value(value, hex_ok=False) else None
    if spaced and not quoted and not (looks_random(value) or (
            char_classes(value) >= 3 and not _CODE_PUNCTUATION.search(value))):
        return None  # `SECRET_KEY = settings_value`, `key = Zeroizing::new(`: code
    if kind is Kind.AWS:
        return "aws-secret-key"
    if kind is Kind.AZURE:
        return "azure-key"
    if value.startswith(("http://", "https://")):
        return None  # a URL: the url-credentials family reads its userinfo
    return "secret-assignment"


def _in_expression(text: str, begin: int) -> bool:
    """The name is an argument or an element (`f(a, password=value)`, `[token=t]`): a bare
    value there is a reference to a variable, not data."""
    j = begin
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    return j > 0 and text[j - 1] in "(,[{|&!"


def find_assignment(text: str, at: int) -> Iterator[Span]:
    """The value assigned at the separator `text[at]` (`=`, `:` or an XML `>`)."""
    sep = text[at]
    # What joins the name to the separator: spaces, then a closing quote (escaped or not).
    end = at
    while end > 0 and text[end - 1] in " \t" and at - end < 8:
        end -= 1
    spaced_before = end < at
    quote = next((q for q in _NAME_QUOTES if text.endswith(q, 0, end)), "")
    name_end = end - len(quote)
    begin = _name_before(text, name_end)
    if begin == name_end:
        return
    at_opener = begin - len(quote) - 1 if quote else begin - 1
    if quote and not text.endswith(quote, 0, begin):
        return
    if text[at_opener : at_opener + 1] == "⟧":
        # A marker stands where a credential stood, so what opens the name is what stood
        # before that credential: a second pass reads the name as the first did (§9,
        # idempotence), whether the credential was glued to the name or not.
        at_opener = text.rfind("⟦", 0, at_opener) - 1
    opener = text[at_opener : at_opener + 1] if at_opener >= 0 else ""
    if opener == "/" or (sep == ">" and opener != "<"):
        return  # a path segment (`/etc/passwd:`), or `>` that closes no element
    name = text[begin:name_end].lstrip("$.-").rstrip(".-")
    kind = name_kind(name)
    if kind is None:
        return
    # The separator itself.
    stop = at + 1
    if sep == "=":
        if text[at - 1 : at] in ("!", "<", ">", "=") or text[stop : stop + 1] == "=":
            return  # a comparison
        if text[stop : stop + 1] == ">":
            stop += 1  # `=>`
    elif sep == ":":
        following = text[stop : stop + 1]
        if following == "=":
            stop += 1  # `:=`
        elif following == ":" or text[at - 1 : at] == ":" or text.startswith("//", stop):
            return  # `::`, a URL's scheme
        elif not quote and following not in (" ", "\t") and kind is not Kind.AUTHORIZATION:
            return  # `user:password` pairs and `host:port` are not YAML
    value_at = stop
    while value_at < len(text) and text[value_at] in " \t" and value_at - stop < 8:
        value_at += 1
    spaced = spaced_before and value_at > stop and sep == "="
    if kind is Kind.AUTHORIZATION:
        if sep == "=" and text[value_at : value_at + 1] not in ('"', "'", "\\"):
            return  # `authorization = await authorize(…)`: code; a header uses `:`
        quoted_value = _QUOTED_VALUE.match(text, value_at)
        if quoted_value is not None:
            group = next(g for g in ("dq", "sq", "edq", "mdq", "bq")
                         if quoted_value.start(g) >= 0)
            yield from _authorization(text, quoted_value.start(group), quoted_value.end(group))
        else:
            line_end = text.find("\n", value_at)
            escaped_end = text.find("\\", value_at)
            limit = min(x for x in (line_end, escaped_end, len(text)) if x >= 0)
            yield from _authorization(text, value_at, limit)
        return
    if sep == ">":
        # XML: `<password>value</password>`, the value up to its own closing tag
        close = text.find(f"</{text[begin:name_end]}>", value_at, value_at + MAX_VALUE)
        if close < 0 or "<" in text[value_at:close] or "\n" in text[value_at:close]:
            return
        found: tuple[int, int, bool] | None = (value_at, close, False)
    else:
        found = _value_at(text, value_at)
    if found is None:
        return
    start, stop, quoted = found
    if text.startswith(("-----", "---- "), start):
        return  # the pem-private-key family takes the block
    value = text[start:stop]
    in_query = opener in ("?", "&", "#") and not quote
    if in_query and not quoted and "#" in value:
        cut = value.index("#")  # `?api_key=…#frag`: not the fragment
        value, stop = value[:cut], start + cut
    family = _decide(kind, value, quoted=quoted, spaced=spaced, colon=sep == ":",
                     after=text[stop : stop + 1], config_line=not _in_expression(text, begin),
                     name=name)
    if family is None:
        return
    if in_query and family in ("secret-assignment", "high-entropy-secret"):
        family = "url-token"
    yield start, stop, family


# The trigger: a separator whose name ends with one of these suffixes (any case, or capitalised
# as a camelCase word), joined to it by one of the joiners. Suffixes are the shortest that
# are rare in ordinary keys (`ord` for password, `zation` for authorization, not `ion`); the
# finder then reads the whole name.
_SUFFIXES = (
    ("key", "ord", "swd", "pwd", "ass", "_pw", "-pw", "ret", "ken", "uth", "eds", "sig", "cfg"),
    ("hrase", "ntial", "gjson"),
    ("zation", "nature", "ntials"),
)
# What may stand between a name and its separator, by width (each width is one look-behind).
_JOINERS: tuple[tuple[str, ...], ...] = (
    (), ('"', "'", " ", "\t"), ('\\"', '" ', "' ", "  "), ('\\\\\\"',),
)


def _cased(suffix: str) -> set[str]:
    return {suffix, suffix.upper(), suffix[0].upper() + suffix[1:]}


def _assignment_around(sep: str) -> str:
    """After `sep`: a gate of one character class for each of the name's last three letters
    (one cheap look-behind that ordinary keys such as `"type":` fail), then the suffixes."""
    variants = sorted({v for group in _SUFFIXES for s in group for v in _cased(s)})
    gate = "".join(
        "[" + re.escape("".join(sorted({v[-k] for v in variants}))) + "]" for k in (3, 2, 1)
    )
    branches = []
    for joiners in _JOINERS:
        if sep == ">" and joiners:
            continue
        joined = "(?:" + "|".join(re.escape(j) for j in joiners) + ")" if joiners else ""
        tail = f"{joined}{re.escape(sep)}"
        inner = "|".join(
            "(?<=(?:" + "|".join(sorted(re.escape(v) for s in group for v in _cased(s)))
            + f"){tail})"
            for group in _SUFFIXES
        )
        branches.append(f"(?<={gate}{tail})(?:{inner})")
    return "(?:" + "|".join(branches) + ")"


ASSIGNMENT_FAMILIES: tuple[Family, ...] = (
    Family(
        "secret-assignment",
        "a value assigned to a credential-named key in any config syntax: `KEY=value`, "
        "`export KEY=value`, `key = \"value\"`, `key: value`, `\"key\": \"value\"`, "
        "`'key' => 'value'`, `<password>value</password>`",
        tuple(Trigger(sep, _assignment_around(sep), find_assignment) for sep in "=:>"),
    ),
    Family("high-entropy-secret",
           "a random-looking value (16+ token characters, letters and digits, 3+ bits per "
           "character) assigned to a key ending in KEY, AUTH, CREDENTIALS, SIGNATURE, SIG", ()),
    Family("aws-secret-key", "`aws_secret_access_key`, `SecretAccessKey`, `aws_session_token` "
           "values (also `aws configure set`)", ()),
    Family("azure-key", "Azure storage and service bus keys: `AccountKey=…`, "
           "`SharedAccessKey=…`; Azure AD client secrets (`…Q~…`)", ()),
    Family("docker-auth", "a base64 `user:password` under an `auth` key (docker config.json, "
           "npm's `_auth`)", ()),
    Family("authorization-header", "`Authorization:` values: `Bearer …`, `Basic …`, "
           "`token …`, or a bare token (headers, JSON, curl -H)", ()),
    Family("url-token", "credential-named query parameters: `?token=`, `&access_token=`, "
           "`?api_key=`, `&sig=`, `#access_token=`", ()),
)


# -- space-separated forms ----------------------------------------------------------------

# A space-separated value: quoted (plainly or JSON-escaped), or bare to the end of the word.
_SPACED_VALUE = (r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|\\\"[^\"\\\n]*\\\""
                 r"|[^\s\"'`;|&=\\]+)")
_SET_FORM = re.compile(
    # `set` starting a word, also right after a JSON escape (`\nset -x …`)
    r"set(?:(?<![A-Za-z0-9_]set)|(?<=\\[nrt]set))(?:x)?[ \t]+"
    r"(?:(?:--?(?:profile|region|location|file|scope)[ \t=]+\S+|--?[A-Za-z][A-Za-z-]*)[ \t]+)*"
    r"(?P<name>[A-Za-z_/@][A-Za-z0-9_.:/@-]*)[ \t]+" + _SPACED_VALUE
)
_ENV_FORM = re.compile(r"ENV[ \t]+(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]+" + _SPACED_VALUE)
# A `.netrc` entry: `machine HOST [login USER] [account A] password VALUE`, on one line or many.
_NETRC = re.compile(
    r"machine[ \t]+\S+(?:\s+(?:login|account|port)[ \t]+\S+)*\s+password[ \t]+"
    r"(?P<value>[^\s\"'\\]+)")


def _spaced_value(match: re.Match[str], name: str) -> Iterator[Span]:
    """The value of a space-separated form, judged like an assignment's."""
    kind = name_kind(name.rsplit(":", 1)[-1].rsplit(".", 1)[-1].rsplit("/", 1)[-1])
    if kind is None:
        return
    start, stop = match.span("value")
    quote = next((q for q in ('\\"', '"', "'") if match.group("value").startswith(q)), "")
    quoted = bool(quote)
    if quoted:
        start, stop = start + len(quote), stop - len(quote)
    value = match.string[start:stop]
    family = _decide(kind, value, quoted=quoted, spaced=False, colon=False, after="")
    if family is not None:
        yield start, stop, family


def find_set_form(text: str, start: int) -> Iterator[Span]:
    """`set -x KEY value` (fish) at `start` (its `set`)."""
    if not starts_word(text, start):
        return
    match = _SET_FORM.match(text, start)
    if match is not None:
        yield from _spaced_value(match, match.group("name"))


_NAMED_VALUE = re.compile(r"(?P<name>[A-Za-z_]+)[ \t]+" + _SPACED_VALUE)


def find_named_value(text: str, start: int) -> Iterator[Span]:
    """`aws configure set aws_secret_access_key VALUE`, `npm config set …:_authToken VALUE`:
    a name only these tools write, then its value after a space."""
    match = _NAMED_VALUE.match(text, start)
    if match is not None:
        yield from _spaced_value(match, match.group("name"))


def find_netrc(text: str) -> Iterator[Span]:
    """`.netrc`'s `password value` in a `machine` entry (the engine runs it only when
    `machine` is in the text)."""
    for match in _NETRC.finditer(text):
        value = match.group("value")
        if len(value) >= 4 and not is_placeholder(value):
            yield match.start("value"), match.end("value"), "secret-assignment"


def find_env_form(text: str, start: int) -> Iterator[Span]:
    """A Dockerfile's legacy `ENV KEY value` (`ENV KEY=value` is an assignment)."""
    if not starts_word(text, start):
        return
    match = _ENV_FORM.match(text, start)
    if match is not None:
        yield from _spaced_value(match, match.group("name"))


def find_secret_inside(text: str, at: int) -> Iterator[Span]:
    """A name holding `SECRET` before its end (`SECRET_KEY_BASE`, `MY_SECRET_ID`): its
    separator is ahead, and the assignment finder reads the whole name from there."""
    match = _TO_SEPARATOR.match(text, at)
    if match is not None:
        yield from find_assignment(text, match.end() - 1)


_TO_SEPARATOR = re.compile(r"[A-Za-z0-9_.-]{0,120}(?:[\"']|\\\")?[ \t]*[=:]")
_SEPARATOR_AHEAD = r"[A-Za-z0-9_.-]{0,120}(?:[\"']|\\\")?[ \t]*[=:]"

SPACED_TRIGGERS: tuple[Trigger, ...] = (
    literal_trigger("ENV", find_env_form, ahead=r"[ \t]"),
    literal_trigger("set -", find_set_form),
    *(literal_trigger(name, find_named_value, ahead=r"[ \t]")
      for name in ("aws_secret_access_key", "aws_session_token", "_authToken")),
    *(literal_trigger(word, find_secret_inside, ahead=ahead)
      for word, ahead in (("SECRET_", _SEPARATOR_AHEAD), ("secret_", _SEPARATOR_AHEAD))),
)
# (the word a text must hold, the finder of the forms it starts)
GATED_FORMS = (("machine", find_netrc),)
