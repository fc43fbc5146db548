"""When a question names a time (search.md "Dates"): `in March 2023`, `on October 3, 2023`,
`in 2023`, `in May`, `last week`, `3 days ago`. The chapters dated then are preferred.

Deterministic and stdlib only: the same question gives the same ranges on every machine; a
relative time (`last week`) is read against the clock the search was given, never the file's.
A time is a set of day ranges; a month named without a year is that month of any year.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

_MONTHS = {name: n for n, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")), start=1) for name in names}
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_UNIT = r"(?P<unit>day|week|month|year)s?"
# Every form holds a year (four digits, 19.. or 20..), a month's name or one of these words.
# A question with none of them names no time, so it never pays for compiling the forms (a
# search process asks one question: the compiling was a few milliseconds of it; an error's
# status such as `404` is no year).
_CUES = ("ago", "last", "past", "previous", "this", "yesterday", "today", *_MONTHS)


@functools.cache
def _forms() -> list[tuple[str, re.Pattern[str]]]:
    """The forms, longest first: a full date is not also read as its month and its year."""
    return [
        ("iso", re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>0[1-9]|1[0-2])-(?P<day>0[1-9]|"
                           r"[12]\d|3[01])\b")),
        ("day", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)),
        ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)),
        ("month", re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)),
        ("ago", re.compile(rf"\b(?P<count>\d{{1,3}}|a|an|one|two|three|four|five|six)\s+{_UNIT}"
                           r"\s+ago\b", re.IGNORECASE)),
        ("last", re.compile(rf"\b(?:last|past|previous)\s+{_UNIT}\b", re.IGNORECASE)),
        ("this", re.compile(rf"\bthis\s+{_UNIT}\b", re.IGNORECASE)),
        ("yesterday", re.compile(r"\byesterday\b", re.IGNORECASE)),
        ("today", re.compile(r"\btoday\b", re.IGNORECASE)),
        ("monthonly", re.compile(rf"\b(?:in|during|of|since|by|before|after|early|late|mid)\s+"
                                 rf"{_MONTH}(?!\s*\d)\b", re.IGNORECASE)),
        ("year", re.compile(rf"\b(?:in|during|of|since|by|before|after)\s+{_YEAR}\b",
                            re.IGNORECASE)),
    ]


_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 31, "year": 366}


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """The days a question names: ranges of dates (inclusive), and months of any year."""

    ranges: tuple[tuple[date, date], ...] = ()
    months: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.ranges or self.months)

    def holds(self, when: date) -> bool:
        return when.month in self.months or any(a <= when <= b for a, b in self.ranges)

    def holds_key(self, key: float) -> bool:
        """Whether a date key (epoch seconds, 0 when unknown) falls in the window."""
        if not key:
            return False
        return self.holds(datetime.fromtimestamp(key, UTC).date())

    def describe(self) -> str:
        parts = [a.isoformat() if a == b else f"{a.isoformat()}..{b.isoformat()}"
                 for a, b in self.ranges]
        parts += [date(2000, m, 1).strftime("%B") for m in sorted(self.months)]
        return ", ".join(parts)


def _month_end(year: int, month: int) -> date:
    following = date(year + month // 12, month % 12 + 1, 1)
    return following - timedelta(days=1)


def time_window(question: str, today: date | None) -> TimeWindow:
    """The times a question names. `today` reads the relative ones (none without it)."""
    return read_forms(question, today) if may_name_a_time(question) else TimeWindow()


def read_forms(question: str, today: date | None) -> TimeWindow:
    """Every form read over the question (`time_window` without its cue check)."""
    ranges: list[tuple[date, date]] = []
    months: set[int] = set()
    taken: list[tuple[int, int]] = []  # spans already read by a longer form
    for kind, pattern in _forms():
        for found in pattern.finditer(question):
            if any(a < found.end() and found.start() < b for a, b in taken):
                continue
            taken.append(found.span())
            got = found.groupdict()
            try:
                month = (_MONTHS.get(got["month"].lower().rstrip("."), 0)
                         if got.get("month") and not got["month"].isdigit()
                         else int(got["month"] or 0) if got.get("month") else 0)
                if kind in ("iso", "day"):
                    day = date(int(got["year"]), month, int(got["day"]))
                    ranges.append((day, day))
                elif kind == "month":
                    year = int(got["year"])
                    ranges.append((date(year, month, 1), _month_end(year, month)))
                elif kind == "year":
                    year = int(got["year"])
                    ranges.append((date(year, 1, 1), date(year, 12, 31)))
                elif kind == "monthonly":
                    months.add(month)
                elif today is not None:
                    ranges.append(_relative(kind, got, today))
            except ValueError:
                continue  # a date that does not exist (February 30) names no day
    return TimeWindow(tuple(sorted(set(ranges))), frozenset(months))


def may_name_a_time(question: str) -> bool:
    """False when no form can match: no year, no month's name, none of the relative words.
    A question that is not all ASCII is always read (a case-blind match knows letters that
    lower-casing does not, `ſ` for `s`, and digits that are not ASCII)."""
    if not question.isascii():
        return True
    lowered = question.lower()
    if any(cue in lowered for cue in _CUES):
        return True
    # The number forms (`2023`, `2023-10-03`, `October 3, 2023`) all hold a year: a run of
    # exactly four digits.
    runs = "".join(c if c.isdigit() else " " for c in question).split()
    return any(len(run) == 4 and run[:2] in ("19", "20") for run in runs)


def _relative(kind: str, got: dict[str, str | None], today: date) -> tuple[date, date]:
    if kind == "today":
        return today, today
    if kind == "yesterday":
        day = today - timedelta(days=1)
        return day, day
    unit = _UNIT_DAYS[(got["unit"] or "day").lower()]
    if kind == "this":
        return today - timedelta(days=unit - 1), today
    count = 1
    if kind == "ago":
        word = (got["count"] or "1").lower()
        count = int(word) if word.isdigit() else _COUNTS.get(word, 1)
        middle = today - timedelta(days=unit * count)
        return middle - timedelta(days=unit // 2), middle + timedelta(days=unit // 2)
    # last week / past month: the span before today
    return today - timedelta(days=unit * count), today
