"""§9 in JSON-escaped text: every family matches with escaped quotes (`\\"`, `\\\\\\"`),
after a JSON escape (`\\n`, `\\u0022`) and spelt with `\\u00XX` escapes, with the same marker
as the plain form; the rendered body is redacted once more."""

from __future__ import annotations

import json

import pytest
from dsh_chapters_core.redact import marker, redact

GHP = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
CASES = {
    "bearer": ("Authorization: Bearer abcdef0123456789xyz", "abcdef0123456789xyz"),
    "aws": ("key AKIAIOSFODNN7EXAMPLQ here", "AKIAIOSFODNN7EXAMPLQ"),
    "openai": ("use sk-abcdefghijklmnopqrstuvwx1234", "sk-abcdefghijklmnopqrstuvwx1234"),
    "github": ("push " + GHP, GHP),
    "url": ("https://api.example.test/x?access_token=abcdef123456zz", "abcdef123456zz"),
    "assignment": ('"client_secret": "Zq8vLw2mNn4bPp6r"', "Zq8vLw2mNn4bPp6r"),
}


def _escaped(text: str) -> str:
    return json.dumps(text)[1:-1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_family_in_each_escaped_form(name: str) -> None:
    plain, secret = CASES[name]
    forms = {
        "plain": plain,
        "escaped": _escaped(plain),
        "twice escaped": _escaped(_escaped(plain)),
        "unicode quotes": _escaped(plain).replace('\\"', "\\u0022"),
        "after a newline escape": "line one\\n" + _escaped(plain),
        "tool input": json.dumps({"input": {"headers": {"x": plain}}}),
    }
    for form, text in forms.items():
        out = redact(text).text
        assert secret not in out, form
        assert marker(secret) in out, form


def test_the_issue_case_a_tool_input_header() -> None:
    text = '{"command": "curl", "body": "{\\"Authorization\\": \\"Bearer tok123456789abc\\"}"}'
    assert "tok123456789abc" not in redact(text).text


def test_a_secret_spelt_with_unicode_escapes_gets_the_plain_marker() -> None:
    spelt = "AKIA" + "".join(f"\\u00{ord(c):02x}" for c in "IOSFODNN7EXAMPLQ")
    out = redact(f"x {spelt} y").text
    assert out == f"x {marker('AKIAIOSFODNN7EXAMPLQ')} y"
    assert redact(out).text == out  # idempotent
