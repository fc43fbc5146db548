"""The redaction's patterns that judge one value or one word answer in time linear in its
length: each was rewritten so a run of letters, digits or backslashes has one way to match.

The earlier spellings accepted the same strings, but a failing match tried every way of cutting
a run into pieces (twice as long for each more character): one 24-letter value took 2 s, and
the values a real 400 MB import met cost it 15 s of its 52. The property tests hold the new
spellings to the old ones on short strings (where the old ones are still quick); the long
inputs below would not finish under the old ones.
"""

from __future__ import annotations

import re

from dsh_chapters_core.redact import redact
from dsh_chapters_core.redaction import assignments, commands, structures
from dsh_chapters_core.redaction.assignments import identifier_like
from hypothesis import given, settings
from hypothesis import strategies as st

# The spellings before the rewrite: the reference for which strings match.
OLD_CAMEL = re.compile(r"(?:[A-Z]{2,}(?=[A-Z][a-z]{2}|\d|_|\Z)|[A-Z]?[a-z]+|\d{1,3}|_)+")
OLD_CONTINUATION = re.compile(r"(?:\\+n?)+")
OLD_SPACE_OR_BREAK = re.compile(r"(?:\s|(?:\r?\n|\\r\\n|\\n|\\\\r\\\\n|\\\\n))*")


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="abzAZY019_-x", max_size=12))
def test_identifier_pattern_accepts_what_it_accepted(value: str) -> None:
    assert (assignments._CAMEL.fullmatch(value) is None) == (OLD_CAMEL.fullmatch(value) is None)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="\\nr x", max_size=12))
def test_continuation_pattern_accepts_what_it_accepted(word: str) -> None:
    assert (commands._CONTINUATION.fullmatch(word) is None) == (
        OLD_CONTINUATION.fullmatch(word) is None)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=" \t\r\n\\rnx", max_size=14), st.integers(min_value=0, max_value=4))
def test_space_or_break_takes_what_it_took(text: str, start: int) -> None:
    new = structures._SPACE_OR_BREAK.match(text, start)
    old = OLD_SPACE_OR_BREAK.match(text, start)
    assert new is not None and old is not None
    assert new.end() == old.end()


def test_a_long_lower_case_value_is_judged_at_once() -> None:
    # 2**60 ways to cut under the old spelling; one under the new.
    assert identifier_like("ey" * 30 + "!") is False
    assert identifier_like("a" * 5000 + "Z") is False
    assert identifier_like("clientSecret" * 400) is True
    assert identifier_like("1" * 5000 + "x!") is False


def test_a_long_run_of_backslashes_is_judged_at_once() -> None:
    assert commands._CONTINUATION.fullmatch("\\" * 5000 + "!") is None
    assert commands._CONTINUATION.fullmatch("\\n" * 5000) is not None


def test_redacting_text_full_of_long_values_still_redacts_and_finishes() -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    # An authorization header's value is judged as a name first (`accessTokenAuthorization`).
    long_name = "ey" * 40 + "-x"
    text = "\n".join([f"authorization: {long_name}", f"password: {'q' * 3000}#",
                      "echo " + "\\" * 4000 + "!", f"GITHUB_TOKEN={secret}"])
    out = redact(text)
    assert secret not in out.text
    assert "echo " + "\\" * 4000 + "!" in out.text
