"""The continuation notice, v2 (§7.3): the one channel through which past work and rules reach
a new session.

O(1) in corpus size (§1 invariant 6): it is assembled from this session's chapters, the
selection of rules (`rules.select_rules`) and constant-size pointers, never from other
sessions. With no core rule it is byte-identical to a notice from a build without rules: the
rules sections are absent, not empty. It gives message counts, never tokens (tokenization is
not comparable across models).
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dsh_chapters_core.config import Config
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.notice_words import NoticeWords
from dsh_chapters_core.ports.rules import DocumentShelf
from dsh_chapters_core.ports.store import FileTree
from dsh_chapters_core.rules import (
    RuleBlock,
    RuleSelection,
    load_rules,
    render_rule_entry,
    select_rules,
)

MODIFIED_MARK = "⚠ modified since archived"
_CHAPTER_NAME = re.compile(r"^[0-9]{3,}-[^/]*\.md$")
PATH_DERIVED = "path-derived"


@dataclass(frozen=True, slots=True)
class NoticeContext:
    """Everything the notice says that is not a chapter or a rule. Constant size."""

    project_slug: str
    project_key: str
    derivation: str = ""  # §2.3: a `path-derived` key is flagged as unstable across machines
    session_id: str = ""  # the root session whose chapters are listed ("" = a fresh start)
    title: str = ""  # what this continuation is about, when the caller knows
    handoff: str = ""  # "In flight": the work the previous context was in the middle of
    store_dir: str = ".dsh-chapters"  # workspace-relative, so `read` opens every link
    shard_dir: str = ".dsh-chapters/index"  # where search's topic shards live for this door
    ancestry: tuple[str, ...] = ()  # session ids, oldest first; the last is this session
    words: NoticeWords = NoticeWords()  # the caller's names for its doors


def _project_lines(ctx: NoticeContext) -> list[str]:
    lines = [f"Project: {ctx.project_slug} · {ctx.project_key}"]
    if ctx.derivation == PATH_DERIVED:
        lines.append(
            "  (path-derived key: unstable across machines; set `projectKey` in "
            f"{ctx.store_dir}/config.toml to share this corpus)"
        )
    if ctx.title:
        lines.append(f"Continuing: {ctx.title}")
    return lines


def _block_entries(block: RuleBlock) -> list[str]:
    return [render_rule_entry(sized.rule).rstrip("\n") for sized in block.rules]


def _refusal(block: RuleBlock, what: str, words: NoticeWords) -> list[str]:
    # §1 invariant 2: refuse with numbers, never truncate. Every rule is named with its size.
    lines = [
        f"{len(block.rules)} {what} come to {block.total} estimated tokens; the budget "
        f"(coreRulesBudgetTokens) is {block.budget}, {block.over_by} over. No rule text is "
        f"inlined: the notice refuses rather than clip. {words.list_rules} shows each text.",
    ]
    for sized in block.rules:
        rule = sized.rule
        lines.append(f"- {rule.id} [{rule.category}] {sized.tokens} tokens")
    lines.append(f"Total: {block.total} tokens · budget: {block.budget} tokens.")
    lines.append(
        f"Next: {words.revoke_rule} for rules this machine can do without, or split a "
        f"large category into smaller ones (add the parts with {words.add_rule}, approve "
        "them, revoke the old rule)."
    )
    return lines


def render_core_rules(selection: RuleSelection,
                      words: NoticeWords = NoticeWords()) -> list[str]:
    """The core section: every rule core on this machine, verbatim, or the refusal."""
    core = selection.core
    if core.refused:
        lines = ["## Core rules: refused, over budget",
                 *_refusal(core, "rules core on this machine", words)]
    else:
        lines = ["## Core rules (approved on this machine)", *_block_entries(core)]
    topic = selection.topic
    if topic.rules:
        names = ", ".join(selection.matched_categories)
        if topic.refused:
            lines += ["", f"## Rules for this session's topics ({names}): refused, over budget",
                      *_refusal(topic, "rules of the matching categories", words)]
        else:
            lines += [
                "",
                f"## Rules for this session's topics ({names})",
                f"Whole categories whose names overlap this session's topics: {len(topic.rules)} "
                f"rules, {topic.total} of {topic.budget} tokens.",
                *_block_entries(topic),
            ]
    return lines


# The notice's prose, chapter and category lines fit this many columns, as every command's
# default output does: a terminal shows `chapters notice` whole, and a list item or a paragraph
# wrapped this way is the same markdown to the agent.
NOTICE_COLUMNS = 100


def _wrapped(lines: Sequence[str]) -> list[str]:
    """Each line wider than NOTICE_COLUMNS wrapped at spaces, a list item's continuation under
    its text; a path is never cut (it must stay one word to be opened)."""
    out: list[str] = []
    for line in lines:
        if len(line) <= NOTICE_COLUMNS:
            out.append(line)
            continue
        hang = "  " if line.startswith(("- ", "  ")) else ""
        out.extend(textwrap.wrap(line, width=NOTICE_COLUMNS, subsequent_indent=hang,
                                 initial_indent="", break_long_words=False,
                                 break_on_hyphens=False) or [line])
    return out


def render_category_index(selection: RuleSelection, store_dir: str,
                          words: NoticeWords = NoticeWords()) -> list[str]:
    lines = [
        "## Rule categories",
        "Load a category's rules when this session's topics overlap it: "
        f"{words.list_category}, or read the files beside its example.",
    ]
    for cat in selection.categories:
        noun = "rule" if cat.count == 1 else "rules"
        mark = " (matches this session's topics)" if cat.matched else ""
        lines.append(
            f"- {cat.name} · {cat.count} {noun} · about: {cat.essence} · e.g. "
            f"{store_dir}/{cat.example_path}{mark}"
        )
    return _wrapped(lines)


def _counts(doc: Document) -> str:
    total = sum(n for _, n in doc.messages)
    roles = ", ".join(f"{role} {n}" for role, n in doc.messages)
    noun = "message" if total == 1 else "messages"
    return f"{total} {noun} ({roles})" if roles else f"{total} {noun}"


def chapter_ended(doc: Document) -> str:
    """A chapter's `ended` mark (`incomplete-turn`), or "" when its turns all ended."""
    raw = dict(doc.extra).get("ended", "")
    try:
        value = json.loads(raw) if raw else ""
    except ValueError:
        value = raw
    return value if isinstance(value, str) else ""


def _chapter_lines(ctx: NoticeContext, chapters: Sequence[Document], config: Config) -> list[str]:
    ordered = sorted(chapters, key=lambda d: d.path)
    limit = config.notice_chapter_limit
    shown = ordered[-limit:] if limit else []
    lines = [f"## Chapters of this session ({len(ordered)})"]
    if not ordered:
        lines.append("None archived yet.")
        return lines
    if len(shown) < len(ordered):
        # Never silently: the count says what is left out, and where to find it.
        lines.append(
            f"The last {len(shown)} of {len(ordered)} are listed (noticeChapterLimit); "
            f"{ctx.words.list_chapters} shows every one."
        )
    for doc in shown:
        head = f"- {doc.title}"
        if doc.summary.startswith(doc.title.rstrip("…").rstrip()):
            head = f"- {doc.summary}"  # a deterministic title is the summary's first words
        elif doc.summary:
            head += f" — {doc.summary}"
        link = f"  {ctx.store_dir}/{doc.path}"
        about = [_counts(doc)]
        if doc.modified_since_archived:
            about.append(MODIFIED_MARK)
        ended = chapter_ended(doc)
        if ended:
            about.append(f"ended: {ended}")  # a finished session's last turn that never ended
        tail = " · ".join(about)
        # The path is never cut nor moved off its line; what follows it goes below when the
        # line would pass NOTICE_COLUMNS.
        if len(link) + 3 + len(tail) <= NOTICE_COLUMNS:
            lines += [*_wrapped([head]), f"{link} · {tail}"]
        else:
            lines += [*_wrapped([head]), link, *_wrapped([f"  {tail}"])]
    return lines


def _search_paragraph(ctx: NoticeContext) -> list[str]:
    return _wrapped([
        "## Search",
        f"Before redoing past work, search it: {ctx.words.search} ranks every chapter "
        "and rule of this project, from every machine, and prints `score | date | kind | title "
        "| path`; open a path with your read tool for the verbatim text. When the answer says "
        f"total is above shown, ask again with {ctx.words.raise_budget}. "
        f"{ctx.words.search_topic} "
        f"reads one whole topic shard; the shards are `{ctx.shard_dir}/<topic>.md`. The "
        "archive is plaintext memory: verbatim, with only credentials redacted, by pattern.",
    ])


def _ancestry(ctx: NoticeContext) -> str:
    if not ctx.ancestry:
        return "Ancestry: a new session (no parent)."
    return "\n".join(_wrapped(["Ancestry: " + " → ".join(ctx.ancestry) + " → this continuation."]))


def assemble_notice(
    ctx: NoticeContext,
    chapters: Sequence[Document],
    *,
    config: Config,
    rules: RuleSelection | None = None,
) -> str:
    """The notice text. `chapters` are this session's only; `rules` come from `select_rules`.

    Order (§7.3): project line, core rules, in flight, chapters, search, rule categories,
    ancestry. Rules sections appear only when some rule is core on this machine.
    """
    with_rules = rules is not None and not rules.empty
    sections: list[list[str]] = [["# Continuation notice", "", *_project_lines(ctx)]]
    if with_rules and rules is not None:
        sections.append(render_core_rules(rules, ctx.words))
    if ctx.handoff.strip():
        sections.append(["## In flight", ctx.handoff.strip()])
    sections.append(_chapter_lines(ctx, chapters, config))
    sections.append(_search_paragraph(ctx))
    if with_rules and rules is not None:
        sections.append(render_category_index(rules, ctx.store_dir, ctx.words))
    sections.append([_ancestry(ctx)])
    return "\n\n".join("\n".join(section) for section in sections) + "\n"


# -- the use case -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Notice:
    """The assembled continuation notice: its text, the rules it selected and how many chapters this
    session has."""

    text: str
    rules: RuleSelection
    chapters: int  # chapters of this session (all of them, listed or not)
    session: str = ""  # the root session listed ("" = none)

    @property
    def refused(self) -> bool:
        """Some rule block was refused over budget (the notice says so, with numbers)."""
        return self.rules.core.refused or self.rules.topic.refused


def session_chapters(
    tree: FileTree, shelf: DocumentShelf, root_session_id: str
) -> tuple[Document, ...]:
    """This session's chapters: one directory listing, never another session's files."""
    if not root_session_id or "/" in root_session_id:
        return ()
    found: list[Document] = []
    for path in tree.list(f"{root_session_id}/chapters/"):
        parts = path.split("/")
        if len(parts) == 3 and _CHAPTER_NAME.match(parts[2]):
            doc = shelf.document(path)
            if doc.kind is not DocumentKind.RULE:
                found.append(doc)
    return tuple(sorted(found, key=lambda d: d.path))


def session_topics(chapters: Sequence[Document]) -> tuple[str, ...]:
    """The topics this session's chapters carry, first seen first (P3b's input, §7.4)."""
    seen: dict[str, None] = {}
    for doc in chapters:
        for topic in doc.topics:
            seen.setdefault(topic, None)
    return tuple(seen)


def derive_ancestry(root_session_id: str, chapters: Sequence[Document]) -> tuple[str, ...]:
    """Root first, then each fork or continuation the chapters name, in archive order."""
    if not root_session_id:
        return ()
    seen: dict[str, None] = {root_session_id: None}
    for doc in chapters:
        if doc.session_id:
            seen.setdefault(doc.session_id, None)
    return tuple(seen)


def build_notice(
    tree: FileTree,
    shelf: DocumentShelf,
    ctx: NoticeContext,
    *,
    config: Config,
    harness_id: str,
) -> Notice:
    """Read this session and the rules, select, assemble. O(this session + rules)."""
    chapters = session_chapters(tree, shelf, ctx.session_id)
    rules = load_rules(tree, shelf, harness_id)
    selection = select_rules(rules, config=config, session_topics=session_topics(chapters))
    if not ctx.ancestry:
        ctx = replace(ctx, ancestry=derive_ancestry(ctx.session_id, chapters))
    text = assemble_notice(ctx, chapters, config=config, rules=selection)
    return Notice(text=text, rules=selection, chapters=len(chapters), session=ctx.session_id)
