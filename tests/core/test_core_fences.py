"""Fences: render, then parse, gives back the exact text, even with backtick runs inside."""

from __future__ import annotations

import pytest
from dsh_chapters_core.fences import fence, fence_length, parse_fenced_blocks
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("text", "info", "rendered"),
    [
        ("hello", "text", "```text\nhello\n```"),
        ("", "", "```\n\n```"),
        ("a\n", "", "```\na\n\n```"),
        ("use ``` here", "", "````\nuse ``` here\n````"),
        ("`````", "md", "``````md\n`````\n``````"),
        ("~~~\nx", "", "```\n~~~\nx\n```"),
    ],
)
def test_fence_shape(text: str, info: str, rendered: str) -> None:
    assert fence(text, info) == rendered
    assert parse_fenced_blocks(rendered) == [(info, text)]


def test_fence_length_beats_the_longest_run() -> None:
    assert fence_length("no ticks") == 3
    assert fence_length("a ` b `` c") == 3
    assert fence_length("x ```` y") == 5


@pytest.mark.parametrize("info", ["a`b", "a\nb", "a\rb"])
def test_info_cannot_break_the_fence(info: str) -> None:
    with pytest.raises(ValueError):
        fence("x", info)


def test_parse_skips_prose_and_handles_an_unclosed_block() -> None:
    doc = "**User:**\n\n" + fence("q", "text") + "\n\nprose\n\n```python\nopen"
    assert parse_fenced_blocks(doc) == [("text", "q"), ("python", "open")]


_texts = st.lists(
    st.one_of(st.sampled_from(["`", "``", "```", "````", "\n", "~~~", " ", "\r", "\t"]),
              st.characters()),
    max_size=40,
).map("".join)
_infos = st.text(alphabet=st.characters(blacklist_characters="`\n\r"), max_size=10).map(str.strip)


@given(_texts, _infos)
def test_round_trip_is_exact(text: str, info: str) -> None:
    assert parse_fenced_blocks(fence(text, info)) == [(info, text)]


@given(st.lists(st.tuples(_infos, _texts), max_size=6), st.sampled_from(["\n", "\n\n", "\nx\n"]))
def test_many_blocks_round_trip_in_order(blocks: list[tuple[str, str]], glue: str) -> None:
    doc = glue.join(fence(text, info) for info, text in blocks)
    assert parse_fenced_blocks(doc) == blocks
