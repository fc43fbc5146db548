"""`chapters search`, `index`, `topic merge` and `artifact` (issue #5; §8, §10, search.md).

`search` brings each door's index up to date (O(delta): only new or changed files are read),
then ranks with the one scorer and packs to `--max-tokens`. `index` is the same update with the
vocabulary pass and `--rebuild` as the recovery path. `topic merge` appends a user-authored
`topic-alias` fact to this machine's edits file. `artifact` reads archived text back with
line caps, the store first, then the mirror.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.search.packing import AnswerStatus
from dsh_chapters_core.search.service import SearchRequest

from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import cli_argument, fold, progress_line, progress_words
from dsh_chapters.services.search import (
    EmptyQueryError,
    merge_topics,
    read_artifact,
    refresh_index,
    search_answer,
)

PROGRESS_MIN_FILES = 500  # a smaller index builds before a bar would be read


def progress_bar(inv: Invocation) -> Callable[[str, int, int], None] | None:
    """A bar on stderr while a whole index is built, on a terminal only (never in a pipe,
    a hook or `--json` output that a program reads). A first build says so once, terminal or
    not: `search: building the search index (2,204 chapters)`."""
    isatty = getattr(inv.stderr, "isatty", None)
    terminal = isatty is not None and isatty()
    said: set[str] = set()

    def draw(phase: str, done: int, total: int) -> None:
        if terminal and total >= PROGRESS_MIN_FILES:
            inv.stderr.write(progress_line(phase, done, total) + ("\n" if done >= total else ""))
            inv.stderr.flush()
        elif phase == "build" and phase not in said:
            said.add(phase)
            inv.stderr.write(f"search: {progress_words(phase, total)}\n")

    return draw


def run_search(args: argparse.Namespace, inv: Invocation) -> int:
    query = " ".join(args.query)
    app = inv.app
    try:
        answer = search_answer(app, on_progress=progress_bar(inv), request=SearchRequest(
            query=query, max_tokens=args.max_tokens, topic=args.topic or "",
            cross_project=args.cross_project, project_key=app.identity.project_key,
            snippets=not args.no_snippets, explain=args.explain), on_rebuilt=lambda report: None if
            report.update.first else inv.stderr.write(
                f"search: the index was unreadable and was rebuilt "
                f"({report.update.manifest.documents} documents)\n"))
    except EmptyQueryError as exc:
        raise UsageError(exc.message, hint='chapters search "<query>" [--topic T]') from None
    text = answer.text(cli_argument)
    if answer.status is AnswerStatus.EMPTY:
        text += "\n  next: archive a session first (`chapters archive <file>` or `chapters import`)"
    elif answer.status is AnswerStatus.NO_MATCH:
        text += "\n  next: try other words, --topic <name>, or --cross-project"
    inv.emit(answer.to_json(), text)
    return 0


def run_index(args: argparse.Namespace, inv: Invocation) -> int:
    reports = refresh_index(inv.app, rebuild=args.rebuild, on_progress=progress_bar(inv))
    lines = [r.line() for r in reports]
    for report in reports:
        for candidate in report.candidates:
            verb = "merged" if report.applied else "candidate"
            lines.append(f"  {verb}: {candidate.source} -> {candidate.target} ({candidate.reason})")
    if any(r.candidates and not r.applied for r in reports):
        lines.append("  vocabApply is false: these are suggestions, nothing was merged; "
                     "`chapters topic merge <a> <b>` applies one by hand")
    inv.emit({"doors": [r.to_json() for r in reports]}, fold("\n".join(lines)))
    return 0


def run_topic_merge(args: argparse.Namespace, inv: Invocation) -> int:
    from dsh_chapters_core.curation import edits_path

    app = inv.app
    fact = merge_topics(app, args.source, args.target)
    path = f"{app.store_dir()}/{edits_path(app.harness_id)}"
    data = {"fact": {"type": str(fact.type), **dict(fact.fields), "author": fact.author,
                     "at": fact.at}, "path": path}
    inv.emit(data, fold(f"topic-alias {fact.get('from')} -> {fact.get('to')} (author: user) "
                        f"appended to {path}"))
    return 0


def run_artifact(args: argparse.Namespace, inv: Invocation) -> int:
    # Imported here: the four commands share this module, and `search` starts on every query.
    from dsh_chapters_core.ports.agents import ArtifactAction

    actions = tuple(str(a) for a in (ArtifactAction.READ, ArtifactAction.TOC,
                                     ArtifactAction.SEARCH))
    action = args.action or "read"
    if action not in actions:
        raise UsageError(f"chapters artifact: unknown action {action!r}",
                         hint="one of: " + ", ".join(actions))
    if action != "search" and args.words:
        raise UsageError(f"chapters artifact {action} takes no words, got {' '.join(args.words)!r}",
                         hint="chapters artifact <path|sha> search <words>")
    from dsh_chapters.services.library import expand_chapter_id  # `<session>/<n>`, as `show`

    ref = expand_chapter_id(inv.app, args.ref) or args.ref
    page = read_artifact(inv.app, ref, ArtifactAction(action), query=" ".join(args.words),
                         offset=args.offset, limit=args.limit)
    text = page.result.text(cli_argument)
    if ref != args.ref:  # named by its id: the header says the id, not the long path
        text = text.replace(page.found.display, args.ref, 1)
    inv.emit({"root": page.found.root.name, **page.result.to_json()}, text)
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    search = subparsers.add_parser(
        "search", parents=[common], help="find past chapters, plans and rules",
        description="Rank every chapter, plan and rule of this project with one deterministic "
                    "scorer (topic hits x2, title and summary x1, category +1.5, plus the "
                    "body's best passage by BM25) and print "
                    "`score | date | kind | title | path (topics: ...)` lines, each with an "
                    "`    L<line>: <snippet>` anchor, packed to --max-tokens. Answers from the "
                    "pool mirror when it exists, else the store.")
    search.add_argument("query", nargs="*", help="words to look for")
    search.add_argument("--max-tokens", type=int, default=None, metavar="N",
                        help="the answer's token budget (default: searchDefaultMaxTokens, 400)")
    search.add_argument("--topic", metavar="T", help="read one whole topic shard")
    search.add_argument("--cross-project", action="store_true",
                        help="search every project in the pool, not just this one")
    search.add_argument("--explain", action="store_true",
                        help="take each match's score apart: topics, title, summary, category, "
                             "core rule and the best passage (with its lines)")
    search.add_argument("--no-snippets", action="store_true",
                        help="leave out each match's `    L<line>: …` anchor line")
    search.set_defaults(run=run_search)

    index = subparsers.add_parser(
        "index", parents=[common], help="update the topic shards and the manifest",
        description="Bring index/<topic>.md and index/manifest.json up to date, reading only "
                    "new or changed files, and report the suggested topic merges.")
    index.add_argument("--rebuild", action="store_true",
                       help="ignore the manifest and derive everything again (byte-identical)")
    index.set_defaults(run=run_index)

    topic = subparsers.add_parser(
        "topic", parents=[common], help="curate topics (merge)",
        description="Curation facts about topics, appended to this machine's edits file.")
    topic_subs = topic.add_subparsers(dest="topic_command", metavar="merge", required=True)
    merge = topic_subs.add_parser(
        "merge", parents=[common], help="make topic A an alias of topic B",
        description="Append a user-authored topic-alias fact: A is searched, indexed and shown "
                    "as B on every machine that syncs it.")
    merge.add_argument("source", metavar="A", help="the topic to merge away")
    merge.add_argument("target", metavar="B", help="the topic it becomes")
    merge.set_defaults(run=run_topic_merge)

    artifact = subparsers.add_parser(
        "artifact", parents=[common], help="read an artifact or chapter by path or sha",
        description="Read archived text: `read` (default) pages with --offset/--limit (200 "
                    "lines by default, 400 at most), `toc` lists headings, `search <words>` "
                    "lists matching lines. The store is searched first, then the mirror.")
    artifact.add_argument("ref", metavar="ID|PATH|SHA",
                          help="a chapter id from `chapters list`, a path from search, or a sha256")
    artifact.add_argument("action", nargs="?", metavar="toc|search|read", help="default: read")
    artifact.add_argument("words", nargs="*", help="for search: the words to find")
    artifact.add_argument("--offset", type=int, default=0, metavar="N",
                          help="first line to read (0-based)")
    artifact.add_argument("--limit", type=int, default=None, metavar="N",
                          help="lines to return (default 200, capped at 400)")
    artifact.set_defaults(run=run_artifact)
