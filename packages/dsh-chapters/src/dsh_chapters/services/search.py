"""Search, the index, topic curation and reading archived text back (§8, §10, search.md).

One path for every caller: `chapters search`, the MCP `chapters_search` and the viewer all call
`search_answer`, so the empty-query rule and the index refresh cannot drift between them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.search.service import DoorName

if TYPE_CHECKING:
    # Annotations only: `chapters search` starts on every query, and reading archived text
    # back (`read_artifact`) is another command's path.
    from dsh_chapters_core.curation import CurationFact
    from dsh_chapters_core.ports.agents import ArtifactAction
    from dsh_chapters_core.reading import LineMatches, LineSlice, ResolvedFile, Toc
    from dsh_chapters_core.search.packing import SearchAnswer
    from dsh_chapters_core.search.service import RefreshReport, SearchRequest

    from dsh_chapters.app import App


class EmptyQueryError(UsageError):
    """A search with neither words nor a topic: every caller refuses it the same way."""


CORE_RULES_CACHE = "cache/core-rules.json"  # machine-local, under the store root


def core_rule_ids_at(app: App, generation: str,
                     inputs: Callable[[], str] | None = None) -> frozenset[str]:
    """This machine's core rules (§8's query-time bonus), resolved as `rules_here` does and
    kept for the store generation they were resolved at: a search after no writer has run
    parses no rule file (rules and their approval facts are only written by writers).

    `inputs` gives the change tokens of what the resolution reads (the rule files and this
    machine's own facts file). After a writer that touched none of them, such as an archive,
    the kept ids are carried to the new generation instead of parsing every rule again (the
    100k bench corpus's 1,000 rules took 1.4 s to parse, on the first search after each
    archive).

    An unknown generation ("": no writer line within the log's tail) only skips the first
    check: the kept ids still hold while the rule inputs are unchanged, so such a store does
    not parse every rule on every search."""
    tree = app.store_tree
    kept: dict[str, object] = {}
    try:
        loaded = json.loads(tree.read(CORE_RULES_CACHE))
        if isinstance(loaded, dict) and loaded.get("harness") == app.harness_id:
            kept = loaded
    except (OSError, ValueError, RecursionError, ChaptersError):
        pass  # missing or damaged: derived, so resolved again below
    ids = _kept_ids(kept) if generation and kept.get("generation") == generation else None
    if ids is not None:
        return ids
    token = inputs() if inputs is not None else ""
    ids = _kept_ids(kept) if token and kept.get("inputs") == token else None
    if ids is None:
        # Imported on a miss only: the rules use case parses every rule file (YAML).
        from dsh_chapters_core.rules import core_rule_ids

        from dsh_chapters.services.rules import rules_here

        ids = core_rule_ids(rules_here(app))
    fresh = {"generation": generation, "harness": app.harness_id, "ids": sorted(ids),
             "inputs": token}
    if (token or generation) and fresh != kept:  # a search on an unchanged store writes none
        tree.write(CORE_RULES_CACHE, json.dumps(fresh, sort_keys=True).encode("utf-8"))
    return ids


def _kept_ids(kept: Mapping[str, object]) -> frozenset[str] | None:
    ids = kept.get("ids")
    if not isinstance(ids, list):
        return None
    return frozenset(str(i) for i in ids)


def check_query(query: str, topic: str) -> None:
    if not query.strip() and not topic.strip():
        raise EmptyQueryError("nothing to search for: query and topic are both empty",
                              hint="pass words to look for, or a topic name")


def search_answer(app: App, request: SearchRequest, *,
                  on_rebuilt: Callable[[RefreshReport], object] | None = None,
                  on_progress: Callable[[str, int, int], None] | None = None) -> SearchAnswer:
    """Bring each door's index up to date (O(delta): only new or changed files are read),
    then rank with the one scorer and pack to the request's budget. `on_rebuilt` hears of a
    door whose index was missing, corrupt or of an older schema and was rebuilt;
    `on_progress` hears (phase, done, total) while a whole door is read or cached."""
    check_query(request.query, request.topic)
    service = app.open_search()
    service.progress = on_progress
    try:
        for report in service.bring_all():  # reads only what changed
            if report.update.rebuilt and on_rebuilt is not None:
                on_rebuilt(report)
        return service.search(request)
    finally:
        service.close()


def index_written(app: App, paths: list[str]) -> None:
    """Keep the search index current where documents are written (search.md "The freshness
    rule"): the composition root hands this to the writer lock, which calls it as each section
    that wrote ends, still holding the lock. What the section wrote is noted first, then read
    into the index (and this machine's unpublished chapters into the mirror door's), so the
    next query builds nothing. If reading fails, the archive stands: the note stays, and the
    next query reads it."""
    if not paths:
        return
    service = app.open_search()
    try:
        door = service.door(DoorName.STORE)
        if door is None:
            return
        service.note_written(door, paths)
        try:
            service.bring_all()
        except Exception:  # a write never fails for its index (§1 inv. 1)
            return
    finally:
        service.close()


def bring_current(app: App) -> None:
    """Every door's index brought current now (after a sync changed the store and the mirror),
    so the next query walks nothing."""
    service = app.open_search()
    try:
        service.bring_all()
    finally:
        service.close()


def refresh_index(app: App, *, rebuild: bool,
                  on_progress: Callable[[str, int, int], None] | None = None
                  ) -> list[RefreshReport]:
    """`chapters index`: every door, with the vocabulary pass; `rebuild` is the recovery path."""
    service = app.open_search()
    service.progress = on_progress
    try:
        with app.lock.hold(app.config.sync_timeout_ms / 1000):  # vocabApply writes facts
            return [service.refresh(door, rebuild=rebuild, vocabulary=True)
                    for door in service.doors]
    finally:
        service.close()


def merge_topics(app: App, source: str, target: str) -> CurationFact:
    """A user-authored `topic-alias` fact; the shards and vocabulary follow it at once."""
    service = app.open_search()
    try:
        with app.lock.hold(app.config.sync_timeout_ms / 1000):
            fact = service.merge_topics(source, target)
            for door in service.doors:
                service.refresh(door)
    finally:
        service.close()
    return fact


@dataclass(frozen=True, slots=True)
class ArtifactPage:
    """What `read_artifact` found and the part of it that was asked for."""

    found: ResolvedFile
    result: LineSlice | Toc | LineMatches


def read_artifact(app: App, ref: str, action: ArtifactAction, *, query: str = "",
                  offset: int = 0, limit: int | None = None) -> ArtifactPage:
    """Archived text by path or sha, the store first, then the mirror; contained and capped."""
    from dsh_chapters_core.ports.agents import ArtifactAction
    from dsh_chapters_core.reading import (
        read_lines,
        read_text,
        resolve,
        search_lines,
        table_of_contents,
    )

    found = resolve(ref, app.read_roots())  # containment: `..`, absolute, symlinks out
    text = read_text(found)
    config = app.config
    result: LineSlice | Toc | LineMatches
    if action is ArtifactAction.TOC:
        result = table_of_contents(text, path=found.display, config=config)
    elif action is ArtifactAction.SEARCH:
        result = search_lines(text, query, path=found.display, config=config, limit=limit)
    else:
        result = read_lines(text, path=found.display, config=config, offset=offset, limit=limit)
    return ArtifactPage(found, result)
