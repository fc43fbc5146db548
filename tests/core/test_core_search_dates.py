"""The times a question names (search.md "Dates"): which forms are read, which are not, and
that a relative time is read against the search's clock only."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.search.dates import TimeWindow, may_name_a_time, read_forms, time_window
from dsh_chapters_core.search.entries import SearchEntry, make_entry
from dsh_chapters_core.search.scorer import rank_entries
from hypothesis import given, settings
from hypothesis import strategies as st

TODAY = date(2026, 12, 5)


@pytest.mark.parametrize(("question", "ranges"), [
    ("what broke on 2023-10-03", [("2023-10-03", "2023-10-03")]),
    ("the deploy on October 3, 2023", [("2023-10-03", "2023-10-03")]),
    ("the deploy on 3rd of Oct 2023", [("2023-10-03", "2023-10-03")]),
    ("what did we ship in March 2023", [("2023-03-01", "2023-03-31")]),
    ("the outage in February, 2024", [("2024-02-01", "2024-02-29")]),
    ("everything in 2022", [("2022-01-01", "2022-12-31")]),
    ("the fix from yesterday", [("2026-12-04", "2026-12-04")]),
    ("what did I do today", [("2026-12-05", "2026-12-05")]),
    ("the migration last week", [("2026-11-28", "2026-12-05")]),
    ("the flaky test this month", [("2026-11-05", "2026-12-05")]),
    ("the bug two weeks ago", [("2026-11-18", "2026-11-24")]),
    ("the bug 3 days ago", [("2026-12-02", "2026-12-02")]),
])
def test_a_named_time_is_a_range_of_days(question: str, ranges: list[tuple[str, str]]) -> None:
    window = time_window(question, TODAY)
    assert [(a.isoformat(), b.isoformat()) for a, b in window.ranges] == ranges
    assert not window.months


def test_a_full_date_is_not_also_read_as_its_month_and_its_year() -> None:
    window = time_window("October 3, 2023 and in 2021", TODAY)
    assert window.ranges == ((date(2021, 1, 1), date(2021, 12, 31)),
                             (date(2023, 10, 3), date(2023, 10, 3)))


def test_a_month_without_a_year_is_that_month_of_any_year() -> None:
    window = time_window("the release we cut in May", TODAY)
    assert window.months == frozenset({5}) and not window.ranges
    assert window.holds(date(2019, 5, 17)) and not window.holds(date(2019, 6, 1))
    assert window.describe() == "May"


@pytest.mark.parametrize("question", [
    "we may need a retry",  # `may` the verb: no preposition before it
    "run it 2023 times",  # a number that is not introduced as a year
    "the port is 2024-13-01",  # no 13th month
    "on February 30, 2024",  # a day that does not exist
    "bump the version to 20230",
])
def test_words_that_only_look_like_a_time_name_none(question: str) -> None:
    assert not time_window(question, TODAY)


def test_relative_times_need_the_clock() -> None:
    assert not time_window("the fix from yesterday, last week", None)
    assert time_window("in March 2023", None).ranges == ((date(2023, 3, 1), date(2023, 3, 31)),)


def test_an_unknown_date_is_never_in_a_window() -> None:
    window = TimeWindow(((date(2023, 1, 1), date(2023, 12, 31)),))
    assert not window.holds_key(0.0)
    inside = datetime(2023, 6, 1, 12, tzinfo=UTC).timestamp()
    assert window.holds_key(inside) and not window.holds_key(inside + 366 * 86400)


def test_the_chapter_dated_then_ranks_first_and_the_date_alone_matches_nothing() -> None:
    def chapter(name: str, day: str, title: str, topic: str) -> SearchEntry:
        return make_entry(path=f"s1/chapters/{name}.md", kind=DocumentKind.CHAPTER,
                          title=title, date=f"{day}T10:00:00Z", topics=(topic,))

    entries = [chapter("001-new", "2024-05-02", "deploy notes", "deploy"),
               chapter("002-old", "2023-03-14", "deploy notes", "deploy"),
               chapter("003-other", "2023-03-20", "lunch order", "food")]
    question = "deploy in March 2023"
    window = time_window(question, TODAY)
    ranked = rank_entries(entries, question, config=DEFAULTS, window=window)
    assert [s.entry.path for s in ranked] == ["s1/chapters/002-old.md", "s1/chapters/001-new.md"]
    assert ranked[0].date_bonus == DEFAULTS.search_date_bonus
    assert ranked[0].score == ranked[1].score + DEFAULTS.search_date_bonus
    # Without the window the newer one wins the tie (recency), as before.
    plain = rank_entries(entries, question, config=DEFAULTS)
    assert plain[0].entry.path == "s1/chapters/001-new.md" and plain[0].date_bonus == 0.0


_WORDS = ["the", "deploy", "in", "of", "since", "before", "march", "Mar", "may", "Sept",
          "3rd", "2023", "2023-10-03", "last", "past", "week", "weeks", "this", "month", "two",
          "ago", "a", "yesterday", "Today", "fix", "during", "early", "Oct", "9", ",", "day",
          "404", "1999", "12023", "2023x", "x2023", "2023_", "20", "23", "-", "3", "30"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=9), st.text(max_size=12))
def test_a_question_without_a_cue_names_no_time(words: list[str], noise: str) -> None:
    """The forms are compiled only for a question that may name a time; any other question
    would have named none had they been read."""
    for question in (" ".join(words), f"{' '.join(words)} {noise}", noise):
        read = read_forms(question, TODAY)
        if not may_name_a_time(question):
            assert not read
        assert time_window(question, TODAY) == read
