"""The store reads core-written frontmatter with `json` and anything else with PyYAML: both paths
must give the same Document for every file, or `show` and `search` would disagree."""

from __future__ import annotations

from typing import Any

import pytest
from dsh_chapters_core.frontmatter import (
    dump_frontmatter,
    load_core_frontmatter,
    split_frontmatter,
)
from dsh_chapters_fs.chapterfile import (
    FrontmatterProblem,
    body_digest,
    document_from_fields,
    load_frontmatter,
    parse_document,
    quarantined_document,
)
from hypothesis import given, settings
from hypothesis import strategies as st

PATH = "4b7e2c1a-90d3-4f5e-8a6b-1c2d3e4f5a6b/chapters/001-work.md"


def _yaml_only(text: str) -> Any:
    fm_text, body = split_frontmatter(text)
    digest = body_digest(body)
    try:
        data = load_frontmatter(fm_text) if fm_text else {}
    except FrontmatterProblem as exc:
        return quarantined_document(PATH, exc.reason, digest)
    return document_from_fields(PATH, data if isinstance(data, dict) else {}, body, digest)


SCALARS = (st.text(max_size=40) | st.integers(-10**12, 10**12) | st.booleans() | st.none()
           | st.floats(allow_nan=False, allow_infinity=False, width=32))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3),
                      max_leaves=8)
KEYS = st.sampled_from(["title", "summary", "topics", "date", "messages", "seqRange", "sha256",
                        "kind", "status", "cwd", "tokens"]) | st.text(min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=8), st.text(max_size=60))
def test_core_written_frontmatter_reads_the_same_both_ways(fields: dict[str, Any],
                                                           body: str) -> None:
    try:
        text = dump_frontmatter(fields) + body
    except TypeError:
        return  # a value the core never writes
    assert parse_document(PATH, text) == _yaml_only(text)


@pytest.mark.parametrize("line", [
    "title: 1e5", "title: 1.5e3", "title: NaN", "title: -Infinity", "tokens: 1.5",
    'title: "a \\u00e9 \\ud83d\\ude00 b"', "topics: [1, 2.0, true, null]", 'on: "yes"',
    "title: " + "[" * 40 + "]" * 40, "date: 2026-11-20", 'date: "2026-11-20T10:00:00Z"',
    'messages: {"user":1}', "seqRange: [1,2]", 'title: "tab\there"', 'title: "x" # note',
    "title: \"nel \u0085\"", 'Yes: 1', '"y": 2',
])
def test_hand_written_lines_read_as_yaml_reads_them(line: str) -> None:
    text = f"---\n{line}\n---\nbody\n"
    assert parse_document(PATH, text) == _yaml_only(text)


def test_the_core_format_takes_the_json_path() -> None:
    fm_text, _ = split_frontmatter(dump_frontmatter({"title": "Fix", "seqRange": [1, 9]}))
    assert load_core_frontmatter(fm_text) == {"title": "Fix", "seqRange": [1, 9]}
    assert load_core_frontmatter("title: plain words") is None  # YAML decides
