"""Seeded credentials of every redaction family (§9), and benign look-alikes, all made here
from a seed (no real secret, no third-party text)."""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
FAMILIES = ("aws-access-key", "openai-key", "github-token", "jwt", "bearer", "url-token",
            "pem-private-key", "secret-assignment")


@dataclass(frozen=True)
class Credential:
    family: str
    secret: str  # what must never appear in any output
    context: str  # the secret as a person or tool would write it (plain form)

    def probes(self) -> tuple[str, ...]:
        """Substrings that prove a leak: the secret, or each long line of a multi-line one."""
        if "\n" in self.secret:
            return tuple(line for line in self.secret.splitlines() if len(line) >= 16)
        return (self.secret,)


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64(rng: random.Random, n: int) -> str:
    raw = base64.urlsafe_b64encode(bytes(rng.randrange(256) for _ in range(n))).decode()
    return raw.rstrip("=")


def make(family: str, rng: random.Random) -> Credential:
    if family == "aws-access-key":
        s = "AKIA" + _pick(rng, UPPER, 16)
        return Credential(family, s, f"the deploy user's key {s} is in the CI settings")
    if family == "openai-key":
        s = "sk-" + _pick(rng, ALNUM, 40)
        return Credential(family, s, f"set OPENAI to {s} for the eval run")
    if family == "github-token":
        s = rng.choice(["ghp_", "gho_", "ghs_"]) + _pick(rng, ALNUM, 36)
        if rng.random() < 0.3:
            s = "github_pat_" + _pick(rng, ALNUM + "_", 60)
        return Credential(family, s, f"push with {s} as the password")
    if family == "jwt":
        head = "eyJ" + _b64(rng, 24)
        body = "eyJ" + _b64(rng, 48)
        s = f"{head}.{body}.{_b64(rng, 32)}"
        return Credential(family, s, f"the session cookie was {s} before logout")
    if family == "bearer":
        s = _pick(rng, ALNUM + "._-", 40)
        return Credential(family, s, f"Authorization: Bearer {s}")
    if family == "url-token":
        s = _pick(rng, ALNUM, 32)
        name = rng.choice(["token", "access_token", "auth_token"])
        return Credential(family, s, f"https://api.example.test/v2/items?page=3&{name}={s}")
    if family == "pem-private-key":
        body = "\n".join(_pick(rng, ALNUM + "+/", 64) for _ in range(6))
        kind = rng.choice(["RSA ", "EC ", ""])
        ctx = f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"
        return Credential(family, body, ctx)
    s = _pick(rng, ALNUM, 28)
    name = rng.choice(["DB_PASSWORD", "JWT_SECRET", "STRIPE_API_KEY", "client_secret",
                       "apiKey", "AUTH_TOKEN"])
    form = rng.choice(["{n}={s}", 'export {n}="{s}"', '"{n}": "{s}"', "{n}: {s}"])
    return Credential("secret-assignment", s, form.format(n=name, s=s))


def corpus(count: int, seed: int) -> list[Credential]:
    rng = random.Random(seed)
    return [make(FAMILIES[i % len(FAMILIES)], rng) for i in range(count)]


def json_escaped(text: str) -> str:
    """The text as it stands inside a JSON string (`\\"`, `\\n`), e.g. a tool result's JSON."""
    return json.dumps({"value": text})[len('{"value": "'):-2]


def unicode_escaped(text: str) -> str:
    """The JSON-escaped text with its quotes written `\\u0022` (what some encoders emit)."""
    return json_escaped(text).replace('\\"', "\\u0022")


def benign_lines(count: int, seed: int) -> list[str]:
    """Lines that look like credentials to a careless pattern and are not."""
    rng = random.Random(seed)
    makers = [
        lambda: f"commit {_pick(rng, '0123456789abcdef', 40)} (HEAD -> main)",
        lambda: f"sha256: {_pick(rng, '0123456789abcdef', 64)}",
        lambda: f"request id {_pick(rng, HEX, 8)}-{_pick(rng, HEX, 4)}"
                f"-4{_pick(rng, HEX, 3)}-a{_pick(rng, HEX, 3)}",
        lambda: f"AKIA{_pick(rng, UPPER, rng.randrange(4, 15))} is too short to be a key",
        lambda: f"task-{_pick(rng, string.ascii_lowercase, 8)} and sk-{_pick(rng, ALNUM, 6)}",
        lambda: "password: ***",
        lambda: "api_key = settings.api_key",
        lambda: 'token = os.environ["GITHUB_TOKEN"]',
        lambda: "export API_KEY=${API_KEY}",
        lambda: f"client_secret: <your client secret {rng.randrange(100)}>",
        lambda: f"https://example.test/search?q={_pick(rng, string.ascii_lowercase, 6)}&page=2",
        lambda: "Bearer tokens are sent in the Authorization header",
        lambda: f"the bearer of this note owes {rng.randrange(1000)} coins",
        lambda: f"eyJ is how base64 JSON starts; {_pick(rng, ALNUM, 12)} is not one",
        lambda: "-----BEGIN CERTIFICATE----- is public, not a private key",
        lambda: f"def get_secret(name: str) -> str:  # line {rng.randrange(900)}",
        lambda: f"SECRET_KEY = get_secret('{_pick(rng, string.ascii_lowercase, 6)}')",
        lambda: "/etc/passwd: No such file or directory",
        lambda: f"ghp_ prefix tokens rotate every {rng.randrange(2, 90)} days",
        lambda: f"git@github.com:acme/{_pick(rng, string.ascii_lowercase, 7)}.git",
        lambda: f"version = \"{rng.randrange(9)}.{rng.randrange(30)}.{rng.randrange(30)}\"",
        lambda: f"{{\"tokens\": {rng.randrange(9000)}, \"passwordless\": true}}",
        lambda: f"    assert response.status_code == {rng.choice([200, 401, 403, 503])}",
        lambda: f"Authorization: Basic realm={_pick(rng, string.ascii_lowercase, 5)}",
    ]
    return [makers[i % len(makers)]() for i in range(count)]
