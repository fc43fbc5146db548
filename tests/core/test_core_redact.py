"""Redaction (§9): families, marker, prefix-keeping, idempotence, bytes outside secrets."""

from __future__ import annotations

import hashlib

import pytest
from dsh_chapters_core.errors import ConfigError
from dsh_chapters_core.redact import FAMILIES, Redaction, marker, merge_counts, redact
from hypothesis import given, settings
from hypothesis import strategies as st

AWS = "AKIAIOSFODNN7EXAMPLE"
OPENAI = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
GHP = "ghp_" + "a1B2c3D4e5" * 4
GHO = "gho_" + "Z9y8X7w6V5" * 4
PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
BEARER = "abcDEF123._~+/=-xyz"
URL_TOKEN = "s3cr3tV4lue"
PEM_BODY = "MIIEowIBAAKCAQEA1234567890abcdef\nQWERTYUIOPasdfghjkl+/=="
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"


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
            "bearer",
        ),
        (
            f'{{"authorization": "bearer {BEARER}"}}',
            f'{{"authorization": "bearer {m(BEARER)}"}}',
            "bearer",
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
            "url-token",
        ),
        (
            f"key:\n{PEM}\ndone",
            f"key:\n-----BEGIN RSA PRIVATE KEY-----\n{m(PEM_BODY)}\n"
            "-----END RSA PRIVATE KEY-----\ndone",
            "pem-private-key",
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
    assert FAMILIES == (
        "aws-access-key",
        "openai-key",
        "github-token",
        "jwt",
        "bearer",
        "url-token",
        "pem-private-key",
        "custom",
    )


# --- properties -------------------------------------------------------------------------------

# Prose that can never form a credential: no uppercase, no '-', '_', '=', '@', '⟦'.
_safe = st.text(
    alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyz0123456789 .,;:!?()\n\té漢🙂")),
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
        list("aAkKiIsS-_=@:/?&.#'\" \nBbeEaArReEyYJj0123456789⟦⟧ghpotPRIVATEKY")
    ),
    max_size=80,
)


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(_noisy, _secret_forms.map(lambda f: f[0]), st.text(max_size=20)), max_size=10
    )
)
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
