"""Redaction (§9): families, marker, prefix-keeping, idempotence, bytes outside secrets."""

from __future__ import annotations

import hashlib

import pytest
from dsh_chapters_core.errors import ConfigError
from dsh_chapters_core.redact import FAMILIES, Redaction, marker, merge_counts, redact
from hypothesis import example, given, settings
from hypothesis import strategies as st

AWS = "AKIA" + "Q3R4S5T6U7V8W9X2"  # not the AWS docs' example key, which stays (see below)
OPENAI = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
GHP = "ghp_" + "a1B2c3D4e5" * 4
GHO = "gho_" + "Z9y8X7w6V5" * 4
PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
BEARER = "abcDEF123._~+/=-xyz"
URL_TOKEN = "s3cr3tV4lue"
PEM_BODY = "MIIEowIBAAKCAQEA1234567890abcdef\nQWERTYUIOPasdfghjkl+/=="
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzQ8vN3tLs2Hk"  # 40 chars, as in the fixture
JWT_SECRET = "3f9c1e7a5b2d8f04"
PASSWORD = "p@ss w0rd!!"  # quoted: spaces and punctuation belong to it


def m(secret: str) -> str:
    return f"⟦redacted:credential sha256={hashlib.sha256(secret.encode()).hexdigest()[:8]}⟧"


@pytest.mark.parametrize(
    ("text", "expected", "family"),
    [
        (f"key {AWS} end", f"key {m(AWS)} end", "aws-access-key"),
        (f"OPENAI_API_KEY={OPENAI}\n", f"OPENAI_API_KEY={m(OPENAI)}\n", "openai-key"),
        (f"push with {GHP}.", f"push with {m(GHP)}.", "github-token"),
        (f"oauth {GHO}", f"oauth {m(GHO)}", "github-token"),
        (f"pat={PAT} ", f"pat={m(PAT)} ", "github-token"),
        (f"jwt: {JWT}", f"jwt: {m(JWT)}", "jwt"),
        (
            f"curl -H 'Authorization: Bearer {BEARER}' https://api",
            f"curl -H 'Authorization: Bearer {m(BEARER)}' https://api",
            "authorization-header",
        ),
        (
            f'{{"authorization": "bearer {BEARER}"}}',
            f'{{"authorization": "bearer {m(BEARER)}"}}',
            "authorization-header",
        ),
        (
            f"GET https://h/api?x=1&token={URL_TOKEN}&y=2",
            f"GET https://h/api?x=1&token={m(URL_TOKEN)}&y=2",
            "url-token",
        ),
        (
            f"https://h/cb?access_token={URL_TOKEN}#frag",
            f"https://h/cb?access_token={m(URL_TOKEN)}#frag",
            "url-token",
        ),
        (
            f"clone https://oauth2:{URL_TOKEN}@gitlab.example/org/repo.git",
            f"clone https://oauth2:{m(URL_TOKEN)}@gitlab.example/org/repo.git",
            "url-credentials",
        ),
        (
            f"key:\n{PEM}\ndone",
            f"key:\n-----BEGIN RSA PRIVATE KEY-----\n{m(PEM_BODY)}\n"
            "-----END RSA PRIVATE KEY-----\ndone",
            "pem-private-key",
        ),
        (
            f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n",
            f"AWS_SECRET_ACCESS_KEY={m(AWS_SECRET)}\n",
            "aws-secret-key",
        ),
    ],
)
def test_each_family(text: str, expected: str, family: str) -> None:
    got = redact(text)
    assert got.text == expected
    assert got.counts == ((family, 1),)
    assert redact(got.text) == Redaction(text=expected, counts=())


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain prose about tokens, keys and the task-skill list",
        "sk-short",  # too short to be a key
        "AKIA123",  # too short
        "Authorization: Bearer ${TOKEN}",  # a placeholder is no secret
        "the token= parameter is documented",  # not in a URL query
        "mail adrian@example.com, see https://example.com/a@b",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----",
        "ghost highlight github_pat_ ghp_",
        "my-task-abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_no_false_positive(text: str) -> None:
    assert redact(text) == Redaction(text=text, counts=())


def test_marker_is_deterministic_per_secret() -> None:
    assert marker(AWS) == m(AWS)
    got = redact(f"{AWS} and again {AWS}, other {GHP}")
    assert got.text == f"{m(AWS)} and again {m(AWS)}, other {m(GHP)}"
    assert got.counts == (("aws-access-key", 2), ("github-token", 1))
    assert got.total == 3


def test_custom_patterns_redact_the_group_or_the_match() -> None:
    text = "employee id EMP-778812 and pin=4455 here"
    got = redact(text, (r"EMP-\d{6}", r"pin=(\d+)"))
    assert got.text == f"employee id {m('EMP-778812')} and pin={m('4455')} here"
    assert got.counts == (("custom", 2),)
    named = redact("x acct:998877 y", (r"acct:(?P<secret>\d+)",))
    assert named.text == f"x acct:{m('998877')} y"


def test_custom_pattern_never_eats_a_marker() -> None:
    once = redact(f"a {AWS} b", (r"[0-9a-f]{8}", r"credential"))
    assert once.text == f"a {m(AWS)} b"
    assert redact(once.text, (r"[0-9a-f]{8}", r"credential")).text == once.text


def test_invalid_custom_pattern_is_config_error_naming_its_index() -> None:
    with pytest.raises(ConfigError, match=r"redactionPatterns\[2\]"):
        redact("x", ("ok", "(unclosed"))


def test_merge_counts() -> None:
    merged = merge_counts((("jwt", 1),), (("bearer", 2), ("jwt", 3)), ())
    assert merged == (("bearer", 2), ("jwt", 4))


def test_family_names_are_the_contract() -> None:
    # The names `chapters redact --report`, the archive report and `chapters scan` print.
    assert FAMILIES == (
        "aws-access-key", "openai-key", "anthropic-key", "github-token", "gitlab-token",
        "slack-token", "stripe-key", "sendgrid-key", "huggingface-token", "twilio-key",
        "pypi-token", "vault-token", "doppler-token", "age-secret-key", "google-api-key",
        "google-oauth", "npm-token", "shopify-token", "digitalocean-token", "databricks-token",
        "linear-key", "postman-key", "newrelic-key", "grafana-token", "sentry-token",
        "flyio-token", "planetscale-token", "supabase-token", "pulumi-token", "alibaba-key",
        "dynatrace-token", "easypost-key", "facebook-token", "square-token", "atlassian-token",
        "notion-token", "ai-service-key", "registry-token", "mail-service-key",
        "onepassword-token", "heroku-key", "cloudflare-key", "openshift-token",
        "pem-private-key", "putty-private-key", "jwt", "url-credentials", "slack-webhook",
        "chat-webhook", "telegram-bot-token", "terraform-token", "airtable-token",
        "command-line-password", "secret-assignment", "high-entropy-secret", "aws-secret-key",
        "azure-key", "docker-auth", "authorization-header", "url-token", "custom",
    )


# --- secret-assignment ------------------------------------------------------------------------


_FAMILY_OF = {AWS_SECRET: "aws-secret-key", "abc12345xyz": "url-token"}


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        # the fixture's `cat .env.production`
        (
            "# production settings (DO NOT COMMIT)\n"
            "DATABASE_URL=postgresql://acme@db.internal:5432/acme\n"
            f"JWT_SECRET={JWT_SECRET}\n"
            f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"
            "RATE_LIMIT_PER_MINUTE=100\n",
            (JWT_SECRET, AWS_SECRET),
        ),
        (f"export JWT_SECRET={JWT_SECRET}; make deploy", (JWT_SECRET,)),
        (f'DB_PASSWORD="{PASSWORD}"', (PASSWORD,)),
        (f"DB_PASSWORD='{PASSWORD}'", (PASSWORD,)),
        (f'export DB_PASSWORD="{PASSWORD}"', (PASSWORD,)),
        ('SECRET_KEY = "django-insecure-4b9x"', ("django-insecure-4b9x",)),
        ("api_key: 0123abcd4567ef\nport: 8080", ("0123abcd4567ef",)),
        ("curl -H 'X-Api-Key: 0123abcd4567ef' https://h", ("0123abcd4567ef",)),
        ('{"password": "hunter2hunter2", "user": "adrian"}', ("hunter2hunter2",)),
        ('{"clientSecret":"a1b2c3d4e5f6","id":7}', ("a1b2c3d4e5f6",)),
        ("{'private_key': 'MIIEvQIBADAN'}", ("MIIEvQIBADAN",)),
        ("auth_token: Zm9vYmFy1mF6\n", ("Zm9vYmFy1mF6",)),
        ("ACCESS_TOKEN=abc123def456ghi", ("abc123def456ghi",)),
        ("STRIPE_APIKEY=rk_test_51Habc", ("rk_test_51Habc",)),
        ("SMTP_PASSWD=Tr0ub4dor3xyz", ("Tr0ub4dor3xyz",)),
        ("AWS_SECRET_KEY_ID=abcd1234efgh", ("abcd1234efgh",)),  # holds _SECRET_
        ("db-password: n0t-so-s3cret", ("n0t-so-s3cret",)),
        ("PASSWORD=abcd1234efgh, next", ("abcd1234efgh",)),  # the comma is punctuation
        ("mysql --password=s3cretpass1 -u root", ("s3cretpass1",)),
        ("GET https://h/api?api_key=abc12345xyz&page=2#top", ("abc12345xyz",)),
        # raw JSONL: the .env text and a JSON object inside a JSON string
        (
            f'"text":"JWT_SECRET={JWT_SECRET}\\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\\n"',
            (JWT_SECRET, AWS_SECRET),
        ),
        ('"content":"{\\"password\\": \\"hunter2hunter2\\"}"', ("hunter2hunter2",)),
        ("İstanbul password=abc123xyz99", ("abc123xyz99",)),  # `İ` lowers to 2 characters
    ],
)
def test_secret_assignment_redacts_the_value_only(text: str, secrets: tuple[str, ...]) -> None:
    expected = text
    for secret in secrets:
        expected = expected.replace(secret, m(secret), 1)
    got = redact(text)
    assert got.text == expected
    families: dict[str, int] = {}
    for secret in secrets:
        family = _FAMILY_OF.get(secret, "secret-assignment")
        families[family] = families.get(family, 0) + 1
    assert got.counts == tuple(sorted(families.items()))
    assert redact(got.text) == Redaction(text=expected, counts=())


@pytest.mark.parametrize(
    "text",
    [
        "the password field is required",
        "Password: see the vault",
        "Secret: remember the milk",
        "set API_KEY in your environment, then run the PASSWORD reset",
        "PASSWORD=short",  # fewer than 8 characters
        "POSTGRES_PASSWORD: ci",
        # placeholders
        "PASSWORD=********",
        "API_KEY=xxxxxxxxxxxx",
        "API_KEY=XXXX-XXXX-XXXX",
        "JWT_SECRET=${JWT_SECRET}",
        "JWT_SECRET=$JWT_SECRET_VALUE",
        'DB_PASSWORD="$(cat /run/secrets/db)"',
        "PASSWORD=changeme",
        'PASSWORD="change-me"',
        "PASSWORD=<your-password>",
        '{"api_key": "<YOUR_API_KEY>"}',
        'password: "{{ .Values.dbPassword }}"',
        "PASSWORD=[REDACTED]",
        "JWT_SECRET=⟦redacted:credential sha256=eb165e21⟧",
        'JWT_SECRET="⟦redacted:credential sha256=eb165e21⟧"',
        # code: a reference is not a secret
        "login(user, password=password)",
        "client = OpenAI(api_key=settings.openai_api_key)",
        'SECRET_KEY = os.environ["SECRET_KEY"]',
        "SECRET_KEY = load_secret_from_vault",
        "api_key: Optional[str] = None",
        "password: SecretStr",
        "if password == 'hunter2hunter2':",
        # names that are not credentials, and paths
        "PASSWORD_MIN_LENGTH=12345678",
        "MY_PASSWORD_FILE=/run/secrets/db_password",
        "tokens: abc12345678",
        "GITHUB_TOKEN_SCOPE=repo-read-1",
        "cat /etc/passwd: root:x:0:0:root:/root:/bin/bash",
        "PRIVATE_KEY=-----BEGIN",  # a PEM block is pem-private-key's
    ],
)
def test_secret_assignment_leaves_prose_placeholders_and_code(text: str) -> None:
    assert redact(text) == Redaction(text=text, counts=())


def test_secret_assignment_defers_to_the_specific_family_on_the_same_value() -> None:
    got = redact(f"OPENAI_API_KEY={OPENAI}\nACCESS_TOKEN={JWT}\nDB_PASSWORD={AWS}")
    assert got.text == f"OPENAI_API_KEY={m(OPENAI)}\nACCESS_TOKEN={m(JWT)}\nDB_PASSWORD={m(AWS)}"
    assert got.counts == (("aws-access-key", 1), ("jwt", 1), ("openai-key", 1))


def test_secret_assignment_scans_long_runs_in_linear_time() -> None:
    # Each rejected name or value is passed over once (a quadratic scan would take minutes).
    text = "password=$x=" * 20_000 + "k=" * 50_000 + " password=$y" * 20_000
    assert redact(text) == Redaction(text=text, counts=())


# --- properties -------------------------------------------------------------------------------

# Prose that can never form a credential: no uppercase, no '-', '_', '=', ':', '@', '⟦'.
_safe = st.text(
    alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyz0123456789 .,;!?()\n\té漢🙂")),
    max_size=40,
)
_secret_forms = st.sampled_from(
    [
        (AWS, m(AWS)),
        (OPENAI, m(OPENAI)),
        (GHP, m(GHP)),
        (PAT, m(PAT)),
        (JWT, m(JWT)),
        (f"Authorization: Bearer {BEARER}", f"Authorization: Bearer {m(BEARER)}"),
        (f"https://h/p?token={URL_TOKEN}", f"https://h/p?token={m(URL_TOKEN)}"),
        (f"https://u:{URL_TOKEN}@h/p", f"https://u:{m(URL_TOKEN)}@h/p"),
        (PEM, PEM.replace(PEM_BODY, m(PEM_BODY))),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", f"AWS_SECRET_ACCESS_KEY={m(AWS_SECRET)}"),
        (f"export JWT_SECRET={JWT_SECRET}", f"export JWT_SECRET={m(JWT_SECRET)}"),
        (f'DB_PASSWORD="{PASSWORD}"', f'DB_PASSWORD="{m(PASSWORD)}"'),
        (f'{{"password": "{PASSWORD}"}}', f'{{"password": "{m(PASSWORD)}"}}'),
        (f"api_key: {JWT_SECRET}", f"api_key: {m(JWT_SECRET)}"),
        # left alone: a placeholder and a short value
        ("JWT_SECRET=${JWT_SECRET}", "JWT_SECRET=${JWT_SECRET}"),
        ("PASSWORD=short", "PASSWORD=short"),
    ]
)


@given(st.lists(st.one_of(_safe.map(lambda s: (s, s)), _secret_forms), max_size=12))
def test_bytes_outside_a_secret_are_unchanged(parts: list[tuple[str, str]]) -> None:
    # Secrets are delimited by whitespace, as they are in real text.
    text = " ".join(original for original, _ in parts)
    expected = " ".join(redacted for _, redacted in parts)
    assert redact(text).text == expected


_noisy = st.text(
    alphabet=st.sampled_from(
        list("aAkKiIsS-_=@:/?&.#'\" \nBbeEaArReEyYJj0123456789⟦⟧ghpotPRIVATEKY$<>{}*\\;,`xX")
    ),
    max_size=80,
)
# Pieces that make noisy text assign to credential names in every form.
_assignment_bits = st.sampled_from(
    [
        "PASSWORD",
        "api_key",
        "JWT_SECRET",
        "export ",
        "=",
        ": ",
        '"',
        "'",
        '\\"',
        "\\n",
        "xxx",
        "${",
        "⟦redacted:credential sha256=eb165e21⟧",
        "changeme",
        "-----BEGIN",
    ]
)


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(
            _noisy, _assignment_bits, _secret_forms.map(lambda f: f[0]), st.text(max_size=20)
        ),
        max_size=10,
    )
)
# A credential glued to a key's name, after a `/`: the first pass redacts the token and leaves
# the name's tail; the second must read that tail as the first read the whole name.
@example(["/", "ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5",
          "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8vN3tLs2Hk"])
def test_redaction_is_idempotent(parts: list[str]) -> None:
    once = redact("".join(parts))
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.counts == ()


@given(st.text())
def test_arbitrary_text_round_trips_outside_markers(text: str) -> None:
    got = redact(text)
    if not got.counts:
        assert got.text == text
    else:
        # Every untouched piece between markers appears in order in the original.
        cursor = 0
        for piece in got.text.split("⟦"):
            piece = piece.split("⟧", 1)[-1]
            found = text.find(piece, cursor)
            assert found >= 0
            cursor = found + len(piece)


_SECRET_NAMES = (
    "JWT_SECRET",
    "aws_secret_access_key",
    "DB_PASSWORD",
    "apiKey",
    "x-api-key",
    "ACCESS_TOKEN",
    "authToken",
    "PRIVATE_KEY",
    "SMTP_PASSWD",
    "MY_SECRET_ID",
)
# Values that are neither placeholders nor code: they hold a digit and start with one.
_secret_values = st.builds(
    lambda digit, rest: digit + rest,
    st.sampled_from("0123456789"),
    st.text(alphabet=st.sampled_from(list("abcdefXYZ0123456789/+.-!@%")), min_size=7, max_size=40),
)


@given(
    _safe,
    st.sampled_from(_SECRET_NAMES),
    st.sampled_from(["{k}={v}", 'export {k}="{v}"', "{k}: {v}", '"{k}": "{v}"', "{k}='{v}'"]),
    _secret_values,
    _safe,
)
def test_secret_assignment_replaces_exactly_the_value(
    before: str, name: str, form: str, value: str, after: str
) -> None:
    text = f"{before} {form.format(k=name, v=value)} {after}"
    got = redact(text)
    assert got.text == f"{before} {form.format(k=name, v=m(value))} {after}"
    family = "aws-secret-key" if name == "aws_secret_access_key" else "secret-assignment"
    assert got.counts == ((family, 1),)
    assert redact(got.text).counts == ()
