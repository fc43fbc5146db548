"""Credentials recognised by their structure rather than a prefix (§9): private key blocks,
JWTs, passwords in URLs, webhook URLs, and tokens whose anchor sits in their middle.

Private keys are redacted whole (the body between the BEGIN and END lines, which stay), also
when the block is JSON-escaped (`\\n` for each line break, as a service account's JSON file
holds it) and when it was cut off before its END line (`head key.pem`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from dsh_chapters_core.redaction.assignments import is_placeholder
from dsh_chapters_core.redaction.model import (
    URLSAFE,
    Family,
    Span,
    Trigger,
    ends_word,
    is_example,
    literal_trigger,
    spans_of,
    starts_word,
)

# -- private keys ---------------------------------------------------------------------------

# A line break as it stands in text, in JSON text, and in JSON inside a JSON string.
_BREAK = r"(?:\r?\n|\\r\\n|\\n|\\\\r\\\\n|\\\\n)"
_PEM_HEAD = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----"
    r"|---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----"
)
# A body with no END line: header lines (`Proc-Type: …`, `Comment: "…"`), then base64 lines.
# A base64 line, never the header line after the block (`Private-MAC: …`, `-----END`).
_B64_LINE = r"(?![A-Za-z][A-Za-z-]*:)[A-Za-z0-9+/=]+(?![A-Za-z0-9+/=]*[:-])"
_PEM_OPEN_BODY = re.compile(
    rf"(?:[ \t]*{_BREAK})+(?:[A-Za-z][A-Za-z-]*: [^\n\\]*{_BREAK}(?:[ \t]*{_BREAK})*)*"
    rf"[A-Za-z0-9+/=]{{16,}}(?:[ \t]*{_BREAK}[ \t]*{_B64_LINE})*"
)
_MAX_KEY = 1 << 16
# `\s` holds the plain breaks; the escaped ones are spelled out, so a run has one way to match.
_SPACE_OR_BREAK = re.compile(r"(?:\s|\\r\\n|\\n|\\\\r\\\\n|\\\\n)*")


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """The body without the line breaks (plain or escaped) around it."""
    start = _SPACE_OR_BREAK.match(text, start).end()  # type: ignore[union-attr]
    while end > start:
        for tail in ("\\\\r\\\\n", "\\\\n", "\\r\\n", "\\n", "\r\n", "\n", " ", "\t", "\r"):
            if text.endswith(tail, start, end):
                end -= len(tail)
                break
        else:
            break
    return start, end


def find_private_key(text: str, start: int) -> Iterator[Span]:
    head = _PEM_HEAD.match(text, start)
    if head is None:
        return
    if head.group(0).startswith("---- "):
        end_line = "---- END SSH2 ENCRYPTED PRIVATE KEY ----"
    else:
        end_line = f"-----END {head.group(1) or ''}PRIVATE KEY{head.group(2) or ''}-----"
    stop = text.find(end_line, head.end(), head.end() + _MAX_KEY)
    if stop >= 0:
        body = _trim(text, head.end(), stop)
        if body[1] > body[0] and "-----" not in text[body[0] : body[1]]:
            yield body[0], body[1], "pem-private-key"
            return
    open_body = _PEM_OPEN_BODY.match(text, head.end())
    if open_body is not None:
        body = _trim(text, head.end(), open_body.end())
        yield body[0], body[1], "pem-private-key"


_PEM_END = re.compile(r"-----END ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----")
# The base64 lines right before an END line, to the end of the window they are searched in.
# Each line starts a line: after a line break (plain or escaped), never inside a word.
_KEY_TAIL = re.compile(
    rf"(?:(?<=\\n)|(?<![A-Za-z0-9+/=\\]))(?:[A-Za-z0-9+/=]{{16,}}[ \t]*{_BREAK}[ \t]*)+\Z")
_TAIL_WINDOW = 1 << 14


def find_key_tail(text: str, start: int) -> Iterator[Span]:
    """An END line whose BEGIN is not in this text (a key read in two chunks, a paste cut
    at the top): the base64 lines right before it."""
    if _PEM_END.match(text, start) is None:
        return
    floor = max(0, start - _TAIL_WINDOW)
    tail = _KEY_TAIL.search(text, floor, start)
    if tail is not None:
        body = _trim(text, tail.start(), start)
        if body[1] > body[0]:
            yield body[0], body[1], "pem-private-key"


_PUTTY_PRIVATE = re.compile(
    rf"Private-Lines: \d+{_BREAK}(?P<secret>{_B64_LINE}(?:{_BREAK}{_B64_LINE})*)"
)


_PUTTY_MAC = re.compile(rf"{_BREAK}Private-MAC: (?P<secret>[0-9a-fA-F]{{40,64}})")


def find_putty_key(text: str, start: int) -> Iterator[Span]:
    """The private lines, and the MAC after them (derived from the key and its passphrase)."""
    match = _PUTTY_PRIVATE.match(text, start)
    if match is None:
        return
    yield match.start("secret"), match.end("secret"), "putty-private-key"
    mac = _PUTTY_MAC.match(text, match.end())
    if mac is not None:
        yield mac.start("secret"), mac.end("secret"), "putty-private-key"


# -- JWTs -------------------------------------------------------------------------------------

_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,8192}\.eyJ[A-Za-z0-9_-]{4,8192}\.[A-Za-z0-9_-]{0,8192}")


def find_jwt(text: str, start: int) -> Iterator[Span]:
    if not starts_word(text, start, URLSAFE):
        return
    match = _JWT.match(text, start)
    if match is not None and ends_word(text, match.end(), URLSAFE):
        yield start, match.end(), "jwt"


# -- URLs ---------------------------------------------------------------------------------

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\Z")
_USERINFO_STOP = frozenset(" \t\r\n\"'`<>(){}[]|\\/?#⟦⟧")
_HOST_START = re.compile(r"[A-Za-z0-9\[]")
_URL_PLACEHOLDERS = frozenset({
    "password", "pass", "passwd", "pwd", "secret", "pw", "token", "apikey", "api_key", "user",
    "username", "x", "xxx",
})


def find_url_password(text: str, colon: int) -> Iterator[Span]:
    """`scheme://user:password@host` for any scheme (`redis://:pw@host` too): the password.
    `colon` is a colon with an `@` ahead in the same word; a password holding a raw `@`
    (`p@ss@host`) runs to the last one."""
    floor = max(0, colon - 2048)
    scheme_end = text.rfind("://", floor, colon)
    if scheme_end < 0:
        return
    user = text[scheme_end + 3 : colon]
    if any(ch in _USERINFO_STOP or ch in ":@" for ch in user):
        return  # not the userinfo's first colon, or not in a URL's userinfo at all
    scheme_start = scheme_end
    while scheme_start > floor and (text[scheme_start - 1].isalnum()
                                    or text[scheme_start - 1] in "+.-"):
        scheme_start -= 1
    if scheme_start == scheme_end or not _SCHEME.match(text, scheme_start, scheme_end):
        return
    run_end = colon + 1
    limit = min(len(text), colon + 2048)
    while run_end < limit and text[run_end] not in _USERINFO_STOP:
        run_end += 1
    at = text.rfind("@", colon + 1, run_end)
    if at < 0 or not _HOST_START.match(text, at + 1):
        return
    password = text[colon + 1 : at]
    if not password or password.lower() in _URL_PLACEHOLDERS or (
        is_placeholder(password) and not password.startswith("%")
    ):
        return
    yield colon + 1, at, "url-credentials"


_SLACK_WEBHOOK = re.compile(
    r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9+/_-]{20,})"
)
_DISCORD_WEBHOOK = re.compile(
    r"discord(?:app)?\.com/api/webhooks/\d+/(?P<secret>[A-Za-z0-9_-]{40,})"
)
_TEAMS_WEBHOOK = re.compile(
    r"\.webhook\.office\.com/webhookb2/(?P<secret>[A-Za-z0-9@/_-]{40,})"
)


def _webhook(anchor: str, pattern: re.Pattern[str], family: str) -> Trigger:
    def find(text: str, start: int) -> Iterator[Span]:
        yield from spans_of(pattern, text, start, family)

    return literal_trigger(anchor, find)


# -- anchors in the middle ----------------------------------------------------------------

_TELEGRAM = re.compile(r"\d{8,10}:A[A-Za-z0-9_-]{34}")


def find_telegram(text: str, at: int) -> Iterator[Span]:
    """`<bot id>:AA…` (the bot id is 8 to 10 digits before the colon)."""
    start = at
    while start > 0 and text[start - 1].isdigit() and at - start <= 10:
        start -= 1
    if at - start < 8 or not (starts_word(text, start) or text.endswith("/bot", 0, start)):
        return  # `api.telegram.org/bot<token>/…` holds it right after `bot`
    match = _TELEGRAM.match(text, start)
    if match is not None and ends_word(text, match.end(), URLSAFE):
        yield start, match.end(), "telegram-bot-token"


_TERRAFORM = re.compile(r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}")


def find_terraform(text: str, at: int) -> Iterator[Span]:
    start = at - 14
    if start >= 0 and starts_word(text, start):
        match = _TERRAFORM.match(text, start)
        if match is not None and not is_example(match.group(0)):
            yield start, match.end(), "terraform-token"


_AIRTABLE = re.compile(r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}")


def find_airtable(text: str, at: int) -> Iterator[Span]:
    start = at - 17
    if start >= 0 and starts_word(text, start) and _AIRTABLE.match(text, start):
        yield start, start + 82, "airtable-token"


def find_mailchimp(text: str, at: int) -> Iterator[Span]:
    """`<32 hex>-us<N>`: `at` is the dash."""
    start = at - 32
    end = at + 3
    while end < len(text) and end < at + 5 and text[end].isdigit():
        end += 1
    if start >= 0 and starts_word(text, start) and ends_word(text, end):
        yield start, end, "mail-service-key"


_AZURE_AD = re.compile(r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}")


def find_azure_ad_secret(text: str, at: int) -> Iterator[Span]:
    """Azure AD client secrets: `xxx8Q~…` (`at` is the `~`)."""
    start = at - 5
    if start < 0 or not starts_word(text, start, URLSAFE | {"~", "."}):
        return
    match = _AZURE_AD.match(text, start)
    if match is not None and ends_word(text, match.end(), URLSAFE | {"~", "."}):
        yield start, match.end(), "azure-key"


STRUCTURE_FAMILIES: tuple[Family, ...] = (
    Family(
        "pem-private-key",
        "private key blocks of every kind: `-----BEGIN [RSA|EC|DSA|OPENSSH|ENCRYPTED|PGP] "
        "PRIVATE KEY[ BLOCK]-----` (plain, JSON-escaped, cut off before END, or the part "
        "before END when BEGIN is elsewhere), SSH2 keys",
        (literal_trigger("-----BEGIN ", find_private_key, ahead=r"(?:[A-Z0-9]+ )*PRIVATE KEY"),
         literal_trigger("-----END ", find_key_tail, ahead=r"(?:[A-Z0-9]+ )*PRIVATE KEY"),
         literal_trigger("---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----", find_private_key)),
    ),
    Family("putty-private-key", "the private lines and the MAC of a PuTTY `.ppk` key",
           (literal_trigger("Private-Lines: ", find_putty_key),)),
    Family("jwt", "JSON Web Tokens: `eyJ….eyJ….…`",
           (literal_trigger("eyJ", find_jwt, ahead=r"[A-Za-z0-9_-]{4,}\.eyJ"),)),
    Family("url-credentials",
           "the password in `scheme://user:password@host`, any scheme "
           "(`https`, `postgres`, `redis://:pw@`, `mongodb+srv`, `amqp`, `ftp`, …)",
           (Trigger(":", r"(?=[^\s/@\"'<>\\]{1,256}@[A-Za-z0-9\[])", find_url_password),)),
    Family("slack-webhook", "Slack webhook URLs: `hooks.slack.com/services/…`",
           (_webhook("hooks.slack.com/", _SLACK_WEBHOOK, "slack-webhook"),)),
    Family("chat-webhook", "Discord and Microsoft Teams webhook URLs (the token part)",
           (_webhook("discord.com/api/webhooks/", _DISCORD_WEBHOOK, "chat-webhook"),
            _webhook("discordapp.com/api/webhooks/", _DISCORD_WEBHOOK, "chat-webhook"),
            _webhook(".webhook.office.com/", _TEAMS_WEBHOOK, "chat-webhook"))),
    Family("telegram-bot-token", "Telegram bot tokens: `<bot id>:AA…`",
           (Trigger(":", r"(?=A[A-Za-z0-9_-]{34})(?<=[0-9]{8}:)", find_telegram),)),
    Family("terraform-token", "Terraform Cloud tokens: `<14>.atlasv1.<60+>`",
           (Trigger(".", r"(?=atlasv1\.)(?<=[A-Za-z0-9]{14}\.)", find_terraform),)),
    Family("airtable-token", "Airtable personal access tokens: `pat<14>.<64 hex>`",
           (Trigger(".", r"(?=[a-f0-9]{64})(?<=pat[A-Za-z0-9]{14}\.)", find_airtable),)),
)

# Triggers whose finders report families named elsewhere (tokens.py, assignments.py).
EXTRA_TRIGGERS: tuple[Trigger, ...] = (
    Trigger("-", r"(?=us\d)(?<=[0-9a-f]{32}-)", find_mailchimp),
    Trigger("~", r"(?<=\dQ~)(?=[A-Za-z0-9_~.-]{31})", find_azure_ad_secret),
)
