"""Frontmatter: deterministic bytes, sorted keys, JSON-flow values, exact split."""

from __future__ import annotations

import json

import pytest
from dsh_chapters_core.frontmatter import dump_frontmatter, split_frontmatter
from hypothesis import given
from hypothesis import strategies as st


def test_dump_is_sorted_json_flow() -> None:
    text = dump_frontmatter(
        {
            "title": "Fix the JWT refresh: ümlaut",
            "kind": "chapter",
            "seqRange": (41, 45),
            "generated": {"title": {"by": "deterministic"}, "summary": {"by": "deterministic"}},
            "topics": ["auth", "jwt"],
            "tokens": 1830,
            "ratio": 1e-05,
            "empty": None,
            "yes": True,
        }
    )
    assert text == (
        "---\n"
        "empty: null\n"
        'generated: {"summary": {"by": "deterministic"}, "title": {"by": "deterministic"}}\n'
        'kind: "chapter"\n'
        "ratio: 1.0e-05\n"
        'seqRange: [41, 45]\n'
        "title: \"Fix the JWT refresh: ümlaut\"\n"
        "tokens: 1830\n"
        'topics: ["auth", "jwt"]\n'
        '"yes": true\n'
        "---\n"
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object(), {1: "x"}])
def test_values_frontmatter_cannot_hold(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        dump_frontmatter({"x": bad})


def test_unsafe_characters_are_escaped() -> None:
    line = dump_frontmatter({"t": "a\u2028b\x85c\x7fd\ud800"}).splitlines()[1]
    assert line == 't: "a\\u2028b\\u0085c\\u007fd\\ud800"'


@pytest.mark.parametrize(
    ("text", "block", "body"),
    [
        ("---\na: 1\n---\nbody\n", "a: 1\n", "body\n"),
        ("---\na: 1\n---\n\n**User:**", "a: 1\n", "\n**User:**"),
        ("---\n---\nbody", "", "body"),
        ("---\na: 1\n...\nbody", "a: 1\n", "body"),
        ("---\na: 1\n---", "a: 1\n", ""),
        ("no frontmatter\n---\n", "", "no frontmatter\n---\n"),
        ("---\nunclosed: 1\n", "", "---\nunclosed: 1\n"),
    ],
)
def test_split(text: str, block: str, body: str) -> None:
    assert split_frontmatter(text) == (block, body)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(min_size=1, max_size=12), _json, max_size=6), st.text(max_size=80))
def test_dump_then_split_gives_back_the_body(data: dict[str, object], body: str) -> None:
    text = dump_frontmatter(data) + body
    block, got_body = split_frontmatter(text)
    assert got_body == body
    assert dump_frontmatter(data) == "---\n" + block + "---\n"
    assert block.count("\n") == len(data)
    # Every line is `key: <JSON>`, so JSON alone reads the data back equal.
    decoder = json.JSONDecoder()
    read: dict[str, object] = {}
    for line in block.split("\n")[:-1]:
        if line.startswith('"'):
            key, end = decoder.raw_decode(line)
            value = json.loads(line[end + 2 :])
        else:
            key, _, raw = line.partition(": ")
            value = json.loads(raw)
        read[key] = value
    assert read == data


@pytest.mark.parametrize("key", ["A\n", "title\n", "a b", "", "yes", "-x"])
def test_a_key_that_is_not_a_plain_identifier_is_quoted(key: str) -> None:
    # Regression: `^...$` let a trailing newline through unquoted, which broke the YAML.
    line = dump_frontmatter({key: 1}).splitlines()[1]
    assert line == f"{json.dumps(key)}: 1"
