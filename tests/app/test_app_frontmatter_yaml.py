"""The core's frontmatter is valid YAML: `yaml.safe_load` at the edge reads back the data."""

from __future__ import annotations

import yaml
from dsh_chapters_core.frontmatter import dump_frontmatter, split_frontmatter
from hypothesis import given, settings
from hypothesis import strategies as st

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3),
    max_leaves=10,
)
_keys = st.text(min_size=1, max_size=12) | st.sampled_from(
    ["yes", "No", "on", "null", "~", "title", "seqRange", "key with space", "-dash"]
)


def test_a_chapter_frontmatter_loads() -> None:
    data = {
        "title": "Fix: the `auth` middleware — “quotes” and #hash",
        "kind": "chapter",
        "seqRange": [41, 45],
        "messages": {"assistant": 3, "tool": 2, "user": 1},
        "topics": ["auth", "jwt"],
        "generated": {"title": {"by": "deterministic"}},
        "tokens": 1830,
    }
    block, body = split_frontmatter(dump_frontmatter(data) + "body")
    assert yaml.safe_load(block) == data
    assert body == "body"


@settings(max_examples=300)
@given(st.dictionaries(_keys, _values, max_size=6))
def test_yaml_reads_back_what_was_dumped(data: dict[str, object]) -> None:
    block, _ = split_frontmatter(dump_frontmatter(data))
    loaded = yaml.safe_load(block) if block else {}
    assert loaded == data
