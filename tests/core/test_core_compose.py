"""Composition (§4.2–4.4): greedy merge, primary match (r28), chapter limit, decision log."""

from __future__ import annotations

import pytest
from dsh_chapters_core.compose import (
    RULES,
    ChapterPlan,
    Composition,
    Decision,
    compose_chapters,
    is_continuation,
    primary_of,
    primary_stem,
)
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.signature import Signature
from hypothesis import given
from hypothesis import strategies as st


def sig(paths: tuple[str, ...] = (), commands: tuple[str, ...] = (), terms: tuple[str, ...] = (),
        size: int = 100) -> Signature:
    return Signature(seqs=(), paths=paths, commands=commands, terms=terms, size=size)


AUTH = sig(("src/auth/middleware.ts", "src/auth/token.ts"), ("npm test",), ("auth", "jwt"))
AUTH_AGAIN = sig(("src/auth/token.ts", "src/auth/middleware.ts"), ("npm test",), ("auth", "token"))
RENDER = sig(("src/render.ts",), ("npm run",), ("render", "markdown"))
DOCS = sig(("docs/intro.md",), (), ("documentation", "intro"))


def test_same_task_merges_and_a_new_task_splits() -> None:
    got = compose_chapters([AUTH, AUTH_AGAIN, RENDER], DEFAULTS)
    assert got.chapters == (ChapterPlan((0, 1)), ChapterPlan((2,)))
    assert [(d.action, d.rule) for d in got.decisions] == [
        ("open", "first"), ("merge", "overlap"), ("split", "below-threshold"),
    ]
    assert got.decisions[1].overlap >= DEFAULTS.merge_threshold
    assert got.decisions[2].overlap < DEFAULTS.merge_threshold
    assert got.decisions[1].size == 200
    assert got.decisions[2].size == 100


def test_primary_match_merges_below_threshold_r28() -> None:
    # Real turns touch many files; one shared primary dilutes in the union (r28: 0.077 < τ).
    first = sig(("src/render.ts", *(f"src/a{i}.ts" for i in range(6))), (), ("render",))
    second = sig(("src/render", *(f"lib/b{i}.ts" for i in range(6))), (), ("layout",))
    got = compose_chapters([first, second], DEFAULTS)
    assert got.chapters == (ChapterPlan((0, 1)),)
    decision = got.decisions[1]
    assert (decision.action, decision.rule) == ("merge", "primary-match")
    assert decision.overlap < DEFAULTS.merge_threshold


def test_chapter_limit_forces_a_split() -> None:
    big = [sig(AUTH.paths, AUTH.commands, AUTH.terms, size=3000) for _ in range(4)]
    got = compose_chapters(big, DEFAULTS.replace(chapter_limit=7000))
    assert got.chapters == (ChapterPlan((0, 1)), ChapterPlan((2, 3)))
    assert got.decisions[2] == Decision(2, "split", "chapter-limit", 1.0, 3000)


def test_empty_input_and_prose_turns() -> None:
    assert compose_chapters([], DEFAULTS) == Composition(chapters=(), decisions=())
    # An empty signature cannot name a new task: it continues the open chapter.
    got = compose_chapters([sig(), sig()], DEFAULTS)
    assert got.chapters == (ChapterPlan((0, 1)),)
    assert got.decisions[1].rule == "continuation"
    # Two substantive prose turns that share nothing split.
    words = [f"alpha{i}" for i in range(12)]
    others = [f"omega{i}" for i in range(12)]
    got = compose_chapters([sig(terms=tuple(words)), sig(terms=tuple(others))], DEFAULTS)
    assert got.chapters == (ChapterPlan((0,)), ChapterPlan((1,)))
    assert got.decisions[1].rule == "below-threshold"


FOLLOW_UP = sig((), ("pytest",), ("run", "tests", "pass"), size=60)  # "now run the tests"


def test_a_thin_follow_up_continues_the_open_chapter() -> None:
    got = compose_chapters([AUTH, FOLLOW_UP, AUTH_AGAIN], DEFAULTS)
    assert got.chapters == (ChapterPlan((0, 1, 2)),)
    assert [(d.action, d.rule) for d in got.decisions] == [
        ("open", "first"), ("merge", "continuation"), ("merge", "overlap"),
    ]
    assert got.decisions[1].overlap < DEFAULTS.merge_threshold


def test_continuation_needs_no_file_and_few_terms() -> None:
    assert is_continuation(FOLLOW_UP, DEFAULTS)
    # a turn naming a file says what it is about: the overlap and primary rules judge it
    assert not is_continuation(sig(("docs/intro.md",), (), ("docs",)), DEFAULTS)
    # a directory or tooling noise is no file
    assert is_continuation(sig(("src/acme", ".venv/bin/python"), (), ("x",)), DEFAULTS)
    many = sig((), (), tuple(f"t{i}" for i in range(DEFAULTS.continuation_max_terms + 1)))
    assert not is_continuation(many, DEFAULTS)
    assert is_continuation(many, DEFAULTS.replace(continuation_max_terms=20))
    assert not is_continuation(sig(), DEFAULTS.replace(continuation_max_terms=-1))
    got = compose_chapters([AUTH, many], DEFAULTS)
    assert got.chapters == (ChapterPlan((0,)), ChapterPlan((1,)))


def test_a_continuation_still_respects_the_chapter_limit() -> None:
    big = sig(AUTH.paths, AUTH.commands, AUTH.terms, size=7950)
    got = compose_chapters([big, FOLLOW_UP], DEFAULTS)
    assert got.chapters == (ChapterPlan((0,)), ChapterPlan((1,)))
    assert (got.decisions[1].action, got.decisions[1].rule) == ("split", "chapter-limit")


def test_overlap_reads_the_chapters_recent_members() -> None:
    # A long task drifts across files; its newest turn is compared with the last few
    # members, not diluted by the union of everything the chapter ever touched.
    drift = [sig((f"src/m{i}.py", f"src/m{i + 1}.py"), ("pytest",), (f"w{i}", f"w{i + 1}"))
             for i in range(8)]
    windowed = compose_chapters(drift, DEFAULTS.replace(merge_threshold=0.2))
    assert windowed.chapters == (ChapterPlan(tuple(range(8))),)
    whole = compose_chapters(drift, DEFAULTS.replace(merge_threshold=0.2, overlap_window_turns=0))
    assert len(whole.chapters) > 1
    diluted = next(d for d in whole.decisions if d.action == "split")
    assert diluted.overlap < 0.2 <= windowed.decisions[diluted.turn_index].overlap
    # Items of members that left the window no longer count.
    old = sig(("lib/old.py",), (), ("legacy",))
    filler = [sig(("src/a.py",), (), ("alpha",)) for _ in range(3)]
    back = sig(("lib/other.py", "lib/old.py"), (), ("legacy",))
    late = compose_chapters([old, *filler, back], DEFAULTS.replace(merge_threshold=0.2))
    assert late.decisions[-1].overlap == 0.0
    assert late.decisions[-1].action == "split"


def test_the_primary_is_never_noise() -> None:
    assert primary_of(sig((".venv/bin/python", "src/a.py"))) == ""
    assert primary_of(sig(("/dev/null",))) == ""
    assert primary_of(sig(("src/render.ts", "lib/x.ts"))) == "src/render"
    assert primary_of(sig()) == ""


def test_every_rule_is_named_in_rules() -> None:
    assert RULES == (
        "first", "overlap", "primary-match", "continuation", "below-threshold", "chapter-limit",
    )


def test_weights_come_from_config() -> None:
    a = sig(("x/a.py",), (), ("one", "two", "three"))
    b = sig(("x/b.py",), (), ("one", "two", "three"))
    assert compose_chapters([a, b], DEFAULTS).chapters == (ChapterPlan((0, 1)),)
    heavy = DEFAULTS.replace(overlap_path_weight=50.0)
    assert compose_chapters([a, b], heavy).chapters == (ChapterPlan((0,)), ChapterPlan((1,)))


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("src/render", "src/render.ts", True),
        ("./src/render.ts", "src/render.ts", True),
        ("src/render.ts", "src/render.test.ts", False),
        ("src/render.ts", "lib/render.ts", False),
        (".gitignore", ".gitignore", True),
        ("README.md", "readme.md", False),
    ],
)
def test_primary_spelling_tolerance(a: str, b: str, same: bool) -> None:
    assert (primary_stem(a) == primary_stem(b)) is same


_vocab = st.sampled_from(["auth", "jwt", "render", "docs", "index", "sync", "pool", "rule"])
_paths = st.sampled_from(["src/a.ts", "src/b.ts", "src/c", "src/c.py", "docs/d.md", "e.rs"])
_signatures = st.builds(
    sig,
    paths=st.lists(_paths, max_size=4, unique=True).map(tuple),
    commands=st.lists(st.sampled_from(["git diff", "npm test", "ls"]), max_size=2, unique=True).map(
        tuple
    ),
    terms=st.lists(_vocab, max_size=5, unique=True).map(tuple),
    size=st.integers(min_value=0, max_value=5000),
)


@given(st.lists(_signatures, max_size=40), st.floats(min_value=0.0, max_value=1.0),
       st.integers(min_value=100, max_value=20_000), st.integers(min_value=0, max_value=5),
       st.integers(min_value=-1, max_value=6))
def test_every_turn_lands_in_exactly_one_chapter_in_order(
    signatures: list[Signature], threshold: float, limit: int, window: int, thin: int
) -> None:
    config = DEFAULTS.replace(merge_threshold=threshold, chapter_limit=limit,
                              overlap_window_turns=window, continuation_max_terms=thin)
    got = compose_chapters(signatures, config)
    flat = [i for chapter in got.chapters for i in chapter.turn_indices]
    assert flat == list(range(len(signatures)))
    assert all(chapter.turn_indices for chapter in got.chapters)
    assert [d.turn_index for d in got.decisions] == flat
    assert sum(d.action != "merge" for d in got.decisions) == len(got.chapters)
    assert compose_chapters(list(signatures), config) == got
    assert all(d.rule in RULES for d in got.decisions)
    for chapter in got.chapters:
        if len(chapter.turn_indices) > 1:
            assert sum(signatures[i].size for i in chapter.turn_indices) <= limit
