"""Packing a ranked list to the caller's token budget (§8.1). Refuse with numbers, never clip.

Lines read `score | date | kind | title | path (topics: …)`, most relevant first, each
followed by its anchor (`    L412: …snippet…`, the file line where the body matched) unless
snippets are off, until the next match would overrun `max_tokens` (its anchor counts). The
answer says `total` and `shown`, so the caller knows to ask again with a larger budget. If
not even the first line fits, packing refuses and says how many tokens that line needs
(§1 invariant 2).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.errors import (
    Argument,
    ArgumentWords,
    NextStep,
    RefusalError,
    plain_argument,
)
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.scorer import ScoredEntry
from dsh_chapters_core.search.terms import QueryCut


class AnswerStatus(enum.StrEnum):
    """"Nothing matched" and "nothing here" are different answers (search.md)."""

    OK = "ok"
    NO_MATCH = "no-match"  # the archive has documents; the query missed them all
    EMPTY = "empty"  # the workspace holds no archive at all


@dataclass(frozen=True, slots=True)
class Budget:
    """The answer's token budget: asked for, spent and left."""

    requested: int
    used: int
    remaining: int

    def to_json(self) -> dict[str, int]:
        return {"requested": self.requested, "used": self.used, "remaining": self.remaining}


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    """One packed answer: the shown matches, the counts and the door that answered."""

    matches: tuple[ScoredEntry, ...]  # the shown matches, best first
    shown: int
    total: int
    budget: Budget
    door: str
    lines: tuple[str, ...]
    status: AnswerStatus = AnswerStatus.OK
    path_prefix: str = ""  # what makes a door-relative path workspace-relative
    searched: int = 0  # documents the door holds (in scope), for the "no-match" message
    snippets: bool = True  # anchors shown (text) and carried (JSON)
    explain: bool = False  # each match's score taken apart (`--explain`)
    config: Config | None = field(default=None, repr=False, compare=False)
    cut: QueryCut | None = None  # set when the question was longer than a search reads
    # Chapters of this machine not yet published that the pool door's answer includes, and
    # what makes their paths (marked `store:`) workspace-relative.
    unpublished: int = 0
    overlay_prefix: str = ""

    def to_json(self) -> dict[str, Any]:
        """`{matches:[{score,date,kind,title,path,topics}], shown, total, budget, door}`,
        and `queryCut` when the question was cut."""
        data: dict[str, Any] = {
            "matches": [match_json(m, self.path_prefix, snippets=self.snippets,
                                   overlay_prefix=self.overlay_prefix, explain=self.explain,
                                   config=self.config)
                        for m in self.matches],
            "shown": self.shown,
            "total": self.total,
            "budget": self.budget.to_json(),
            "door": self.door,
            "status": str(self.status),
        }
        if self.unpublished:
            data["unpublished"] = self.unpublished
        if self.cut is not None:
            data["queryCut"] = self.cut.to_json()
        return data

    def cut_line(self) -> str:
        """What a long question lost, in words ("" when nothing was cut)."""
        c = self.cut
        if c is None:
            return ""
        return (f"the question was cut to what a search reads: {c.kept_chars:,} of "
                f"{c.chars:,} characters, {c.kept_words} of {c.words} distinct words")

    def text(self, words: ArgumentWords = plain_argument) -> str:
        """The answer's lines; `words` names the budget argument in the caller's terms."""
        cut = self.cut_line()
        text = self._text(words)
        return f"{text}\n{cut}" if cut else text

    def _text(self, words: ArgumentWords) -> str:
        where = SOURCE_WORDS.get(self.door, self.door)
        if self.status is AnswerStatus.EMPTY:
            return f"nothing here: {where} holds no chapters yet (status: empty)"
        if self.status is AnswerStatus.NO_MATCH:
            return (
                f"no match: {self.searched} documents in {where}, none matched "
                "(status: no-match)"
            )
        if self.unpublished:  # this machine's chapters the pool has not had yet
            where += f" and {self.unpublished} unpublished"
        head = (
            f"shown {self.shown} of {self.total} · {self.budget.used}/{self.budget.requested} "
            f"tokens · from {where}"
        )
        if self.shown < self.total:
            head += f" · raise {words(Argument.MAX_TOKENS, None)} for more"
        return "\n".join((head, *self.lines))


# Where an answer came from, in a reader's words (the JSON keeps the door's name).
SOURCE_WORDS = {"store": "this machine's archive", "mirror": "the pool's copy"}


class SearchRefusal(RefusalError):
    """Not even the best match fits the budget. The numbers are attributes for callers."""

    def __init__(self, *, needed: int, requested: int, total: int) -> None:
        super().__init__(
            f"search refused: the best match alone needs {needed} tokens, the budget is "
            f"{requested} tokens ({total} matches found, none shown)",
            step=NextStep.RAISE_MAX_TOKENS, data={"needed": needed},
        )
        self.needed = needed
        self.requested = requested
        self.total = total


def _date(entry_date: str) -> str:
    return entry_date[:10] if entry_date else "-"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _score(score: float) -> str:
    return f"{score:.2f}"


OVERLAY_MARK = "store:"  # a door-relative path of this machine's store (search.md "Two doors")


def shown_path(path: str, prefix: str, overlay_prefix: str = "") -> str:
    """A door-relative path as the workspace names it."""
    if path.startswith(OVERLAY_MARK):
        return overlay_prefix + path.removeprefix(OVERLAY_MARK)
    return prefix + path


def render_line(scored: ScoredEntry, path_prefix: str = "", overlay_prefix: str = "") -> str:
    """`score | date | kind | title | path (topics: …)`; a stitched entry cites every member."""
    e = scored.entry
    paths = " + ".join(shown_path(p, path_prefix, overlay_prefix) for p in e.cited_paths)
    topics = ", ".join(e.topics) if e.topics else "-"
    return (
        f"{_score(scored.score)} | {_date(e.date)} | {e.kind} | {_one_line(e.title)} | "
        f"{paths} (topics: {topics})"
    )


def anchor_line(scored: ScoredEntry) -> str:
    """`    L412: …snippet…`, or "" when the match has no body anchor."""
    anchor = scored.anchor
    return f"    L{anchor.line}: {_one_line(anchor.text)}" if anchor is not None else ""


def explained(scored: ScoredEntry, config: Config) -> dict[str, Any]:
    """What made a match's score (§8, search.md "The scorer"): each signal's contribution,
    adding up to the score (recency is shown, and only ever breaks ties)."""
    title = scored.title_hits * config.search_title_weight
    summary = scored.summary_hits * config.search_summary_weight
    category = config.search_category_bonus if scored.category_hit else 0.0
    body = (round(config.search_body_weight * scored.body.score, 9)
            if scored.body.matched else 0.0)
    # Topic hits may be weighted by curation (§10.1): what is left of the frontmatter.
    topics = (scored.score - body - title - summary - category - scored.core_bonus
              - scored.date_bonus)
    parts: dict[str, Any] = {
        "topics": round(topics, 4), "title": round(title, 4), "summary": round(summary, 4),
        "category": round(category, 4), "coreRule": round(scored.core_bonus, 4),
        "body": round(body, 4), "date": round(scored.date_bonus, 4),
        "recency": round(scored.recency, 4),
    }
    if scored.body.matched:
        first = scored.entry.body_line + scored.body.first
        parts["passage"] = {"line": first, "lines": scored.body.lines,
                            "score": round(scored.body.score, 4),
                            "wordsElsewhere": scored.body.elsewhere,
                            "secondPassage": round(scored.body.second, 4)}
    return parts


def explain_line(scored: ScoredEntry, config: Config) -> str:
    """`    why: topics 4.00 + title 1.00 + body 13.79 (lines 40–69) = 18.79`."""
    parts = explained(scored, config)
    names = (("topics", "topics"), ("title", "title"), ("summary", "summary"),
             ("category", "category"), ("coreRule", "core rule"), ("body", "body"),
             ("date", "dated then"))
    terms = []
    for key, name in names:
        if parts[key]:
            text = f"{name} {parts[key]:.2f}"
            if key == "body" and "passage" in parts:
                passage = parts["passage"]
                end = passage["line"] + max(passage["lines"], 1) - 1
                apart, second = passage["wordsElsewhere"], passage["secondPassage"]
                more = f"; {apart} more {'word' if apart == 1 else 'words'} in the chapter"
                also = (f"; {config.search_second_passage_share:g} × {second:.2f} from a "
                        "second passage")
                text += (f" (lines {passage['line']}–{end}{more if apart else ''}"
                         f"{also if second else ''})")
            terms.append(text)
    return f"    why: {' + '.join(terms) or '0'} = {scored.score:.2f}"


def match_json(scored: ScoredEntry, path_prefix: str = "", *,
               snippets: bool = True, overlay_prefix: str = "",
               explain: bool = False, config: Config | None = None) -> dict[str, Any]:
    e = scored.entry
    data: dict[str, Any] = {
        "score": round(scored.score, 4),
        "date": _date(e.date),
        "kind": str(e.kind),
        "title": _one_line(e.title),
        "path": shown_path(e.path, path_prefix, overlay_prefix),
        "topics": list(e.topics),
    }
    if e.members:
        data["members"] = [shown_path(p, path_prefix, overlay_prefix) for p in e.members]
    if snippets and scored.anchor is not None:
        data["anchor"] = scored.anchor.to_json()
    if explain and config is not None:
        data["explain"] = explained(scored, config)
    return data


def max_lines(max_tokens: int, config: Config, path_prefix: str = "") -> int:
    """The most lines any answer can show within `max_tokens`: every line costs at least as
    much as the shortest line `render_line` can produce. A cache that hands over the best
    `max_lines` entries (or more) therefore hands over every line that can be shown."""
    shortest = ScoredEntry(0.0, SearchEntry(path="x", kind=DocumentKind.RULE, title=""))
    cost = config.estimate_tokens(render_line(shortest, path_prefix) + "\n")
    return max_tokens // max(cost, 1) + 1


def pack_results(
    scored: Sequence[ScoredEntry],
    *,
    max_tokens: int,
    config: Config,
    door: str = "",
    path_prefix: str = "",
    overlay_prefix: str = "",
    status: AnswerStatus | None = None,
    searched: int = 0,
    total: int | None = None,
    snippets: bool = True,
    explain: bool = False,
) -> SearchAnswer:
    """Greedy, in rank order, stopping at the first line that does not fit (no reordering).

    `total` is the number of matches when `scored` holds only the best of them (a cache that
    returned the top `max_lines`); it defaults to `len(scored)`.
    """
    total = len(scored) if total is None else total
    lines: list[str] = []
    used = 0
    for item in scored:
        line = render_line(item, path_prefix, overlay_prefix)
        anchor = anchor_line(item) if snippets else ""
        if anchor:
            line += "\n" + anchor
        if explain:
            line += "\n" + explain_line(item, config)
        cost = config.estimate_tokens(line + "\n")
        if used + cost > max_tokens:
            if not lines:
                raise SearchRefusal(needed=cost, requested=max_tokens, total=total)
            break
        lines.append(line)
        used += cost
    shown = len(lines)
    final = status or (AnswerStatus.OK if scored else AnswerStatus.NO_MATCH)
    return SearchAnswer(
        matches=tuple(scored[:shown]),
        shown=shown,
        total=total,
        budget=Budget(requested=max_tokens, used=used, remaining=max_tokens - used),
        door=door,
        lines=tuple(lines),
        status=final,
        path_prefix=path_prefix,
        overlay_prefix=overlay_prefix,
        searched=searched,
        snippets=snippets,
        explain=explain,
        config=config if explain else None,
    )
