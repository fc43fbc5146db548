"""Passwords on a command line (§9): `curl -u user:pass`, `mysql -pSECRET`, `sshpass -p pw`,
`docker login -p pw`, `redis-cli -a pw`, `ldapsearch -w pw`, `--password pw`, `--token t`,
`keytool -storepass pw`, `openssl … -passin pass:pw`.

A short flag means a password only for the commands that say so (`-p` is a port to docker
run and a flag to mkdir), so the finder reads the command the flag belongs to: the first word
of its command line (after `sudo`, `env`, `VAR=…`; across `\\` line continuations; inside a
JSON string as a tool call records it). A long flag is read by its name, like a config key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from dsh_chapters_core.redaction.assignments import Kind, is_placeholder, looks_random, name_kind
from dsh_chapters_core.redaction.model import Family, Span, Trigger, char_classes

MIN_PASSWORD = 4  # a command line's context is unambiguous; shorter is a flag or a typo

# command -> {flag letter: how its value is given}: "space" (`-p pw`), "attached" (`-ppw`),
# "either", "userpass" (`-u user:pass`, the password after the colon).
_SHORT_FLAGS: dict[str, dict[str, str]] = {
    "curl": {"u": "userpass"},
    "http": {"a": "userpass"},
    "https": {"a": "userpass"},
    "xh": {"a": "userpass"},
    "wget": {},
    "sshpass": {"p": "either"},
    "redis-cli": {"a": "either"},
    "ldapsearch": {"w": "space"},
    "ldapadd": {"w": "space"},
    "ldapmodify": {"w": "space"},
    "ldapdelete": {"w": "space"},
    "ldappasswd": {"w": "space", "s": "space"},
    "ldapwhoami": {"w": "space"},
    "sqlcmd": {"P": "space"},
    "bcp": {"P": "space"},
    "zip": {"P": "space"},
    "unzip": {"P": "space"},
    "7z": {"p": "attached"},
    "7za": {"p": "attached"},
    "smbclient": {"U": "userpercent"},
    "ssh-keygen": {"N": "space", "P": "space"},
    "mongo": {"p": "space"},
    "mongosh": {"p": "space"},
    "mongodump": {"p": "space"},
    "mongorestore": {"p": "space"},
    "mongoexport": {"p": "space"},
    "mongoimport": {"p": "space"},
    "docker login": {"p": "either"},
    "podman login": {"p": "either"},
    "nerdctl login": {"p": "either"},
    "buildah login": {"p": "either"},
    "skopeo login": {"p": "either"},
    "helm registry": {"p": "either"},
    "oras login": {"p": "either"},
    "az login": {"p": "either"},
    "security add-generic-password": {"w": "space"},
    "security add-internet-password": {"w": "space"},
}
for _mysql in ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck",
               "mysqlpump", "mysqlsh", "mariadb", "mariadb-dump", "mariadb-admin"):
    _SHORT_FLAGS[_mysql] = {"p": "attached"}
_TWO_WORD = frozenset(c.split(" ", 1)[0] for c in _SHORT_FLAGS if " " in c)
_PREFIX_WORDS = frozenset({"sudo", "env", "time", "exec", "nohup", "command", "nice", "doas",
                           "xargs", "watch", "timeout", "!", "then", "do", "else"})
_FLAG_LETTERS = "".join(sorted({f for flags in _SHORT_FLAGS.values() for f in flags}))
# The last three letters of the long flags read as credential names (any case).
_FLAG_ENDINGS = "(?:" + "|".join(sorted({
    v for e in ("ass", "swd", "ord", "ase", "sin", "out", "pwd", "ken", "ret", "key", "ser",
                "uth")
    for v in (e, e.upper(), e.capitalize())})) + ")"
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*\Z")
_QUOTED = re.compile(r"\"([^\"\\\n]*)\"|'([^'\\\n]*)'|\\\"((?:[^\"\\\n]|\\[^\"\n])*)\\\"")
_BARE_END = re.compile(r"[\s\"'`;|&()<>\\]")
# Where a command line starts, looking back from a flag (a `"` only when it opens a JSON
# string value: quotes inside a command line quote its arguments).
_BREAKS = ("\n", "\\n", ";", "|", "&", "(", "`", '"')
# Backslashes, each run maybe followed by `n`; written so a run has one way to match.
_CONTINUATION = re.compile(r"\\+(?:n\\+)*n?")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})


def _opens_json_string(text: str, cut: int, floor: int) -> bool:
    """The `"` at `cut` (maybe escaped) opens a JSON string value: `: "`, `["`, `, "`."""
    j = cut
    while j > floor and text[j - 1] == "\\":
        j -= 1
    while j > floor and text[j - 1] in " \t":
        j -= 1
    return j > floor and text[j - 1] in ":[,{"


def _line_start(text: str, at: int) -> int:
    """Start of the command line holding `at`: after the last separator, across `\\`
    continuations (plain and JSON-escaped), and inside a JSON string."""
    floor = max(0, at - 4000)
    end = at
    while True:
        cut = max(text.rfind(b, floor, end) for b in _BREAKS)
        if cut < 0:
            return floor
        if text.startswith("\\n", cut) and text.endswith("\\\\", floor, cut):
            end = cut - 2  # `\\\n` in JSON: an escaped backslash before a newline escape
            continue
        if text[cut] == "\n" and text.endswith("\\", floor, cut):
            end = cut - 1
            continue
        if text[cut] == '"' and not _opens_json_string(text, cut, floor):
            end = cut
            continue
        return cut + (2 if text.startswith("\\n", cut) else 1)


def _commands_of(text: str, at: int) -> list[str]:
    """The commands `text[at]` (a flag) may belong to: its command line's first word
    (`mysql`, `docker login`, …), then any command quoted inside that line (`ssh host
    'mysql -p…'`, `echo "curl -u …"`), innermost last."""
    words = [w for w in text[_line_start(text, at) : at].split()
             if not _CONTINUATION.fullmatch(w)]
    found: list[str] = []
    starts = [0] + [i for i, w in enumerate(words) if w[:1] in ("'", '"', "`") or
                    w.startswith(("$(", "\\\"", '\\"'))]
    for first_index in starts:
        command = _command_at(words, first_index)
        if command:
            found.append(command)
    return found


def _command_at(words: list[str], index: int) -> str:
    while index < len(words) and (words[index] in _PREFIX_WORDS
                                  or _ASSIGNMENT.match(words[index]) or
                                  (index and words[index - 1] == "sudo" and
                                   words[index].startswith("-"))):
        index += 1
    if index + 2 < len(words) and words[index] in _SHELLS and words[index + 1] in ("-c", "-lc"):
        index += 2
    if index >= len(words):
        return ""
    first = words[index].lstrip("'\"`$(\\").rsplit("/", 1)[-1]
    if first in _TWO_WORD:
        rest = [w for w in words[index + 1 :] if not w.startswith("-")]
        return f"{first} {rest[0]}" if rest else first
    return first


def _command_of(text: str, at: int) -> str:
    """The innermost command holding `text[at]` that this module knows flags of, else the
    command line's first word."""
    commands = _commands_of(text, at)
    known = [c for c in commands if c in _SHORT_FLAGS]
    if known:
        return known[-1]
    return commands[0] if commands else ""


def _value(text: str, at: int) -> tuple[int, int] | None:
    """The argument starting at `at`: a quoted one's inside, else up to its end."""
    quoted = _QUOTED.match(text, at)
    if quoted is not None:
        index = next(i for i in (1, 2, 3) if quoted.start(i) >= 0)
        return quoted.start(index), quoted.end(index)
    found = _BARE_END.search(text, at)
    end = len(text) if found is None else found.start()
    return (at, end) if end > at else None


def _password(text: str, start: int, end: int) -> Iterator[Span]:
    value = text[start:end]
    if len(value) >= MIN_PASSWORD and not is_placeholder(value) and not value.startswith("-"):
        yield start, end, "command-line-password"


def _userpass(text: str, start: int, end: int, sep: str) -> Iterator[Span]:
    """`user:pass` (the password), `token:` (the token as the user: Stripe, Mailgun)."""
    value = text[start:end]
    user, colon, password = value.partition(sep)
    if not colon:
        return
    if password:
        if password == user or password.isdigit() or password in ("users", "staff", "wheel"):
            return  # `-u 1000:1000`, `-u www-data:www-data`: a user and a group
        yield from _password(text, start + len(user) + 1, end)
    elif len(user) >= 8 and not is_placeholder(user):
        yield start, start + len(user), "command-line-password"


def find_short_flag(text: str, at: int) -> Iterator[Span]:
    """`text[at]` is the `-` of a short flag (`-p`, `-u`, …)."""
    letter = text[at + 1]
    how = _SHORT_FLAGS.get(_command_of(text, at), {}).get(letter)
    if how is None:
        return
    after = at + 2
    attached = after < len(text) and not text[after].isspace()
    if attached and how == "space":
        return
    if not attached:
        if how == "attached":
            return  # mysql's `-p` then a space prompts for the password; the next word is a db
        while after < len(text) and text[after] in " \t":
            after += 1
    elif text[after] == "=":
        after += 1
    found = _value(text, after)
    if found is None:
        return
    if how == "userpass":
        yield from _userpass(text, *found, ":")
    elif how == "userpercent":
        yield from _userpass(text, *found, "%")
    else:
        yield from _password(text, *found)


_LONG_FLAG = re.compile(r"(-{1,2})([A-Za-z][A-Za-z0-9_-]*)(?:[ \t]+|=(?=[\"']))")


def find_long_flag(text: str, at: int) -> Iterator[Span]:
    """`--password pw`, `--token t`, `--api-key k`, `-storepass pw`, `--user user:pass`
    (`--password=pw` is a key's assignment, found by the assignment finder)."""
    match = _LONG_FLAG.match(text, at)
    if match is None:
        return
    flag = match.group(2)
    value = _value(text, match.end())
    if value is None:
        return
    if flag in ("user", "proxy-user", "http-user", "basic"):
        if _command_of(text, at) in ("curl", "wget", "http", "https", "xh"):
            yield from _userpass(text, *value, ":")
        return
    if flag.endswith(("pass", "passin", "passout")) and text.startswith("pass:", value[0]):
        yield from _password(text, value[0] + 5, value[1])  # openssl `-passin pass:pw`
        return
    kind = name_kind(flag)
    if kind is None or kind is Kind.AUTHORIZATION:
        return
    start, end = value
    secret = text[start:end]
    if "=" in secret or secret.startswith("\\") or any(c.isspace() for c in secret):
        return  # `--secret id=X,src=…` (a spec), an escape, a quoted phrase: no password
    if kind in (Kind.WEAK, Kind.AUTH, Kind.BARE_KEY, Kind.WEAK_KEY):
        if looks_random(secret):
            yield start, end, "command-line-password"
        return
    if secret.startswith(("/", "./", "~/", "http", "@", "file:", "env:")) or (
        len(secret) < 6 or (char_classes(secret) < 2 and len(secret) < 12)
    ):
        return  # a file, a URL, a prompt option or a word, not the secret itself
    yield from _password(text, start, end)


def find_flag(text: str, at: int) -> Iterator[Span]:
    yield from find_short_flag(text, at)
    if text[at + 1] == "-" or _LONG_FLAG.match(text, at):
        yield from find_long_flag(text, at)


COMMAND_FAMILIES: tuple[Family, ...] = (
    Family(
        "command-line-password",
        "passwords and tokens on a command line: `curl -u user:pass` (and `-u token:`), "
        "`mysql -pSECRET`, `sshpass -p pw`, `docker login -p pw`, `redis-cli -a pw`, "
        "`ldapsearch -w pw`, `--password pw`, `--token t`, `-storepass pw`, `pass:pw`",
        (
            Trigger(
                "-",
                # A short flag this module knows, or a long one ending like a credential's
                # name (read whole, possessively, then its last three letters checked: no
                # backtracking over a long flag's name).
                f"(?<![^\\s\"'=(]-)(?=[{_FLAG_LETTERS}]|-?[A-Za-z][A-Za-z0-9_-]{{0,60}}+"
                f"(?<={_FLAG_ENDINGS})[ \\t=])",
                find_flag,
            ),
        ),
    ),
)
