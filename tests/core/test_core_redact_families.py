"""§9, family by family: the shapes a security reviewer found leaking, the phrasings that
hid them, the false positives they reported, and the engine's own invariants."""

from __future__ import annotations

import json
import random
import re
import string

import pytest
from dsh_chapters_core.redact import FAMILIES, find_secrets, marker, redact
from dsh_chapters_core.redaction.engine import TRIGGERS, combined_scan
from dsh_chapters_core.redaction.model import PIVOTS

from tests.core.credential_corpus import KINDS, corpus

A62 = string.ascii_letters + string.digits
_rng = random.Random(28)


def _r(n: int, alphabet: str = A62) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


# Built at import from a seed: no literal token in this file.
STRIPE = "sk_" + "live_" + _r(24)
RK = "rk_" + "live_" + _r(24)
SLACK = "xox" + "b-" + _r(12, string.digits) + "-" + _r(13, string.digits) + "-" + _r(24)
XAPP = "xapp-1-A" + _r(10, string.ascii_uppercase) + "-" + _r(13, string.digits) + "-" + _r(20)
HOOK = "T" + _r(10, string.ascii_uppercase) + "/B" + _r(10, string.ascii_uppercase) + "/" + _r(24)
GLPAT = "glpat-" + _r(20)
SG = "SG." + _r(22) + "." + _r(43)
HF = "hf_" + _r(34, string.ascii_letters)
TWILIO = "SK" + _r(32, "0123456789abcdef")
ACCOUNT_KEY = _r(86, A62 + "+/") + "=="
SAS_SIG = _r(40) + "%3D"
PYPI = "pypi-AgEIcHlwaS5vcmc" + _r(70)
VAULT = "hvs." + _r(90)
TFC = _r(14) + ".atlasv1." + _r(67)
TELEGRAM = "4" + _r(9, string.digits) + ":AA" + _r(33)
DOPPLER = "dp.pt." + _r(43)
AGE = "AGE-SECRET-KEY-1" + _r(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")
NPM = "npm_" + _r(36)
GOOGLE = "AIza" + _r(35)
PASSWORD = _r(14)
AWS_SECRET = _r(40, A62 + "/+")


def _only(text: str, secret: str, family: str) -> None:
    got = redact(text)
    assert secret not in got.text, (family, got.text)
    assert marker(secret) in got.text, (family, got.text)
    assert family in dict(got.counts), (family, got.counts)
    assert redact(got.text).counts == ()  # idempotent


@pytest.mark.parametrize(
    ("text", "secret", "family"),
    [
        # missed entirely by the earlier rules
        (f"SLACK_BOT_TOKEN={SLACK}", SLACK, "slack-token"),
        (f"app token {XAPP}", XAPP, "slack-token"),
        (f"https://hooks.slack.com/services/{HOOK}", HOOK, "slack-webhook"),
        (f"PRIVATE-TOKEN: {GLPAT}", GLPAT, "gitlab-token"),
        (f"restricted key {RK}", RK, "stripe-key"),
        (f"SENDGRID={SG}", SG, "sendgrid-key"),
        (f"huggingface-cli login --token {HF}", HF, "huggingface-token"),
        (f"api key sid {TWILIO}", TWILIO, "twilio-key"),
        (f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={ACCOUNT_KEY};"
         "EndpointSuffix=core.windows.net", ACCOUNT_KEY, "azure-key"),
        (f"https://a.blob.core.windows.net/c/f?sv=2022-11-02&ss=b&sig={SAS_SIG}", SAS_SIG,
         "url-token"),
        (f"password = {PYPI}", PYPI, "pypi-token"),
        (f"VAULT_TOKEN={VAULT}", VAULT, "vault-token"),
        (f'token = "{TFC}"', TFC, "terraform-token"),
        (f"curl https://api.telegram.org/bot{TELEGRAM}/getMe", TELEGRAM, "telegram-bot-token"),
        (f"DOPPLER_TOKEN={DOPPLER}", DOPPLER, "doppler-token"),
        (f"# public key: age1...\n{AGE}", AGE, "age-secret-key"),
        (f'{{"auths": {{"ghcr.io": {{"auth": "{"ZGVwbG95OnM0cGVy"}c2VjcmV0UDRzcw=="}}}}}}',
         "ZGVwbG95OnM0cGVyc2VjcmV0UDRzcw==", "docker-auth"),
        (f"curl -u deploy:{PASSWORD} https://ci.acme.test", PASSWORD, "command-line-password"),
        (f"mysql -h db -u root -p{PASSWORD} app", PASSWORD, "command-line-password"),
        (f"sshpass -p {PASSWORD} ssh deploy@web-1", PASSWORD, "command-line-password"),
        (f"redis://:{PASSWORD}@cache.internal:6379/0", PASSWORD, "url-credentials"),
        (f"https://maps.googleapis.com/maps/api/js?key={GOOGLE}", GOOGLE, "google-api-key"),
        (f"DB_PASS={PASSWORD}", PASSWORD, "secret-assignment"),
        # missed by phrasing
        (f"curl -u {STRIPE}: https://api.stripe.com/v1/charges", STRIPE, "stripe-key"),
        (f"NPM_TOKEN={NPM}", NPM, "npm-token"),
        (f"[default]\naws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET, "aws-secret-key"),
        (f"aws configure set aws_secret_access_key {AWS_SECRET}", AWS_SECRET, "aws-secret-key"),
        # a key read in two chunks: the part before END, with no BEGIN in this text
        ("\n".join(_r(64, A62 + "+/") for _ in range(2)) + "\n-----END RSA PRIVATE KEY-----",
         None, "pem-private-key"),
    ],
)
def test_the_reviewers_findings_are_redacted(text: str, secret: str | None, family: str) -> None:
    if secret is None:  # the key tail: every base64 line goes
        got = redact(text)
        assert got.counts == ((family, 1),)
        assert got.text.endswith("⟧\n-----END RSA PRIVATE KEY-----")
        return
    _only(text, secret, family)
    _only(json.dumps({"output": text}), secret, family)


@pytest.mark.parametrize(
    "text",
    [
        "  privateKey: Uint8Array;",
        '  "DD_API_KEY": "your_api_key",',
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "api_key: <your api key>",
        "SLACK_BOT_TOKEN=xoxb-your-bot-token",
        "token: xxxxxxxxxxxxxxxxxxxxxxxx",
        "password: changeme",
        "docker run -p 8080:80 -u 1000:1000 acme/app",
        "mkdir -p /tmp/build && git push -u origin main",
        "mysql -u root -p",
        '"key": "5d41402abc4b2a76b9719d911017c592aa5d41402abc4b2a76b9719d911017c5"',
        "cache_key = f'user:{user_id}:profile'",
        "PWD=/home/ada/src/app",
        "https://ada@git.acme.test/acme/app.git",
        "ssh://git@github.com/acme/app.git",
    ],
)
def test_the_reviewers_false_positives_stay(text: str) -> None:
    assert redact(text).text == text
    assert redact(json.dumps(text)).text == json.dumps(text)


def test_find_secrets_names_exactly_what_redact_replaces() -> None:
    for cred in corpus(len(KINDS), 3):
        found = find_secrets(cred.context)
        assert found, cred.family
        text = cred.context
        for f in reversed(found):
            text = text[: f.start] + f"⟦redacted:credential sha256={f.sha256}⟧" + text[f.end :]
        assert text == redact(cred.context).text


def test_redaction_is_idempotent_over_the_corpus() -> None:
    for cred in corpus(2 * len(KINDS), 5):
        once = redact(cred.context).text
        assert redact(once).text == once


def test_the_engine_is_one_scan_of_rare_pivots() -> None:
    scan = combined_scan()
    pivots = {t.pivot for t in TRIGGERS if t.pivot}
    assert pivots <= PIVOTS
    assert not re.compile("|".join(t.around for t in TRIGGERS if t.pivot)).groups
    assert scan.pattern.groups == len(scan.triggers)
    assert all(t.gate for t in TRIGGERS if not t.pivot)  # a trigger without pivot is gated
    # Every family a finder reports is a family the report knows.
    names = set(FAMILIES)
    for cred in corpus(len(KINDS), 9):
        assert {f.family for f in find_secrets(cred.context)} <= names


def test_a_long_run_of_anchors_stays_linear() -> None:
    # Each trigger reads a bounded span: thousands of anchors in one unbroken run.
    text = ("ghp_" + "a" * 30 + "_") * 5000 + ("sk-" * 20000) + ("AKIA" * 20000)
    redact(text)  # must finish quickly; the slow-test budget catches a quadratic scan
