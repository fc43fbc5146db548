"""Packing to the caller's budget (§8.1): golden lines, the JSON shape, refusal with numbers."""

from __future__ import annotations

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.errors import NextStep
from dsh_chapters_core.search import (
    AnswerStatus,
    SearchRefusal,
    make_entry,
    pack_results,
    rank_entries,
)
from dsh_chapters_core.search.stitching import stitch_fragments


def ranked_corpus() -> tuple:
    entries = [
        make_entry(path="s1/chapters/001-jwt-refresh.md", kind=DocumentKind.CHAPTER,
                   title="JWT refresh in the auth middleware", summary="token refresh",
                   topics=("auth", "jwt"), date="2026-09-17T10:00:00Z"),
        make_entry(path="s2/chapters/003-login.md", kind=DocumentKind.CHAPTER,
                   title="Login page", summary="auth form", topics=("ui",),
                   date="2026-09-18T10:00:00Z"),
        make_entry(path="rules/h1/001-security-tokens.md", kind=DocumentKind.RULE,
                   title="security rule", summary="never log an auth token", category="security",
                   date="2026-09-01T00:00:00Z"),
    ]
    return rank_entries(entries, "auth token", config=DEFAULTS)


GOLDEN = [
    "4.00 | 2026-09-17 | chapter | JWT refresh in the auth middleware | "
    ".dsh-chapters/s1/chapters/001-jwt-refresh.md (topics: auth, jwt)",
    "2.00 | 2026-09-01 | rule | security rule | "
    ".dsh-chapters/rules/h1/001-security-tokens.md (topics: -)",
    "1.00 | 2026-09-18 | chapter | Login page | "
    ".dsh-chapters/s2/chapters/003-login.md (topics: ui)",
]


def test_golden_lines_in_rank_order() -> None:
    answer = pack_results(ranked_corpus(), max_tokens=400, config=DEFAULTS, door="store",
                          path_prefix=".dsh-chapters/")
    assert list(answer.lines) == GOLDEN
    assert (answer.shown, answer.total, answer.status) == (3, 3, AnswerStatus.OK)
    used = sum(DEFAULTS.estimate_tokens(line + "\n") for line in GOLDEN)
    assert answer.budget.to_json() == {"requested": 400, "used": used, "remaining": 400 - used}


def test_golden_json_shape() -> None:
    answer = pack_results(ranked_corpus(), max_tokens=400, config=DEFAULTS, door="store",
                          path_prefix=".dsh-chapters/")
    data = answer.to_json()
    assert list(data) == ["matches", "shown", "total", "budget", "door", "status"]
    assert data["matches"][0] == {
        "score": 4.0,
        "date": "2026-09-17",
        "kind": "chapter",
        "title": "JWT refresh in the auth middleware",
        "path": ".dsh-chapters/s1/chapters/001-jwt-refresh.md",
        "topics": ["auth", "jwt"],
    }
    assert all(set(m) == {"score", "date", "kind", "title", "path", "topics"}
               for m in data["matches"])
    assert data["door"] == "store" and data["status"] == "ok"


def test_packing_stops_at_the_first_line_that_does_not_fit() -> None:
    first_two = sum(DEFAULTS.estimate_tokens(line + "\n") for line in GOLDEN[:2])
    answer = pack_results(ranked_corpus(), max_tokens=first_two, config=DEFAULTS,
                          door="store", path_prefix=".dsh-chapters/")
    assert (answer.shown, answer.total) == (2, 3)
    assert answer.budget.remaining == 0
    # The budget argument is named in the caller's words (the CLI: `--max-tokens`).
    assert "shown 2 of 3" in answer.text() and "raise max_tokens for more" in answer.text()
    assert "raise <budget> for more" in answer.text(lambda argument, value: "<budget>")


def test_refuses_with_numbers_when_not_even_the_first_line_fits() -> None:
    need = DEFAULTS.estimate_tokens(GOLDEN[0] + "\n")
    with pytest.raises(SearchRefusal) as caught:
        pack_results(ranked_corpus(), max_tokens=need - 1, config=DEFAULTS, door="store",
                     path_prefix=".dsh-chapters/")
    refusal = caught.value
    assert (refusal.needed, refusal.requested, refusal.total) == (need, need - 1, 3)
    assert str(need) in str(refusal) and refusal.step is NextStep.RAISE_MAX_TOKENS
    assert refusal.data == {"needed": need}


def test_an_empty_ranking_is_not_a_refusal() -> None:
    answer = pack_results((), max_tokens=1, config=DEFAULTS, door="mirror",
                          status=AnswerStatus.EMPTY)
    assert (answer.shown, answer.total, answer.to_json()["status"]) == (0, 0, "empty")
    assert "nothing here" in answer.text()
    missed = pack_results((), max_tokens=10, config=DEFAULTS, door="store", searched=4)
    assert missed.status is AnswerStatus.NO_MATCH and "4 documents" in missed.text()


def test_a_stitched_entry_cites_every_member() -> None:
    members = [make_entry(path=f"s/chapters/00{n}-earlier.md", kind=DocumentKind.CHAPTER,
                          title="Earlier history", summary=f"part {n} auth",
                          date=f"2026-01-0{n}") for n in (1, 2)]
    ranked = rank_entries(stitch_fragments(members), "auth", config=DEFAULTS)
    answer = pack_results(ranked, max_tokens=400, config=DEFAULTS, path_prefix=".dsh-chapters/")
    assert answer.lines[0].endswith(
        ".dsh-chapters/s/chapters/001-earlier.md + .dsh-chapters/s/chapters/002-earlier.md"
        " (topics: -)")
    assert answer.to_json()["matches"][0]["members"] == [
        ".dsh-chapters/s/chapters/001-earlier.md", ".dsh-chapters/s/chapters/002-earlier.md"]
