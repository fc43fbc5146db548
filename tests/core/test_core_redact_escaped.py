"""§9 in JSON-escaped text: every family matches with escaped quotes (`\\"`, `\\\\\\"`),
after a JSON escape (`\\n`, `\\u0022`) and spelt with `\\u00XX` escapes, with the same marker
as the plain form; the rendered body is redacted once more."""

from __future__ import annotations

import json
import random

import pytest
from dsh_chapters_core.redact import _unescaped_view, marker, redact

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


def test_a_span_found_through_escapes_maps_back_to_the_characters_it_came_from() -> None:
    # The view is mapped back by the escapes' places alone: every character of it, escape or
    # not, must come from the text's characters the mapping names.
    rnd = random.Random(7)
    pieces = ["a", "Z", " ", "\\", "u", "0", "\\u0022", "\\u003a", "\\u007e", "\\u00ff", "\\u0000"]
    for _ in range(300):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 40))) + "\\u0041"
        view = _unescaped_view(text)
        assert view is not None
        for index, char in enumerate(view.decoded):
            source = text[view.offset(index):view.offset(index + 1)]
            assert source == char or (len(source) == 6 and chr(int(source[4:], 16)) == char)
    secret = "AKIAIOSFODNN7EXAMPLQ"
    text = "\\u0022" * 3 + "k " + "".join(f"\\u00{ord(c):02x}" for c in secret) + " \\u0026 tail"
    out = redact(text).text
    assert out == "\\u0022" * 3 + f"k {marker(secret)} \\u0026 tail"
