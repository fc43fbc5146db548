"""The `AgentArchive` the MCP server answers from, built from the composed App (issue #8).

The App is composed once, on the first tool call, and reused (a pull made while the agent runs
is still seen: each call opens the doors that exist then). Every operation is a use case the
CLI already runs: the search
service and its one scorer (`chapters search`), the core's contained, line-capped reader
(`chapters artifact`), and the rules use cases (`chapters rule list|add`). Nothing here ranks,
reads or picks rules a second way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from dsh_chapters_core.config import Config
from dsh_chapters_core.errors import ChaptersError, RefusalError
from dsh_chapters_core.ports.agents import ArtifactAction, Page, RuleListing, TokenBudget
from dsh_chapters_core.projectkey import project_slug
from dsh_chapters_core.reading import (
    LineMatches,
    LineSlice,
    ReadableKind,
    Toc,
    read_lines,
    read_text,
    resolve,
)
from dsh_chapters_core.rules import ProposalResult, RuleAuthor, RuleStatus, category_slug
from dsh_chapters_core.search.packing import SearchAnswer
from dsh_chapters_core.search.service import SearchRequest

from dsh_chapters.app import App
from dsh_chapters.services.rules import propose, rules_here
from dsh_chapters.services.search import read_artifact, search_answer

# The session an agent runs in, recorded by the SessionStart hook (machine-local state, §3.1).
AGENT_SESSION_STATE = "state/agent-session.json"
# Claude Code's own variable, when it hands one to the server (it does not always).
CLAUDE_SESSION_ENV = "CLAUDE_CODE_SESSION_ID"
# What chapters_read opens: chapters, rules and topic shards (chapters_artifact reads artifacts).
READ_KINDS = frozenset({ReadableKind.CHAPTER, ReadableKind.RULE, ReadableKind.SHARD})

_Result = TypeVar("_Result", LineSlice, LineMatches)


def project_line(app: App) -> str:
    return f"Project: {project_slug(app.identity)} · {app.identity.project_key}"


def record_agent_session(app: App, data: Mapping[str, str]) -> None:
    """Remember the session an agent runs in, so its rule proposals name their source."""
    body = json.dumps(dict(data), sort_keys=True, ensure_ascii=False) + "\n"
    app.store_tree.write(AGENT_SESSION_STATE, body.encode("utf-8"))


def current_agent_session(app: App) -> str:
    """The harness's session id if it passed one, else the last SessionStart here, else ""."""
    if app.env.get(CLAUDE_SESSION_ENV, "").strip():
        return app.env[CLAUDE_SESSION_ENV].strip()
    if not app.store_tree.exists(AGENT_SESSION_STATE):
        return ""
    try:
        data = json.loads(app.store_tree.read(AGENT_SESSION_STATE))
    except ValueError:
        return ""
    return str(data.get("sessionId", "")) if isinstance(data, dict) else ""


def _line_tokens(config: Config, lines: Sequence[str]) -> list[int]:
    return [config.estimate_tokens(line + "\n") for line in lines]


def _refuse(needed: int, max_tokens: int, what: str) -> RefusalError:
    return RefusalError(
        f"refused: {what} alone needs {needed} estimated tokens, maxTokens is {max_tokens}",
        hint=f"ask again with maxTokens {needed} or more, or a smaller limit")


def fit_page(
    result: LineSlice | Toc | LineMatches, max_tokens: int, config: Config
) -> tuple[LineSlice | Toc | LineMatches, TokenBudget]:
    """Keep whole lines while they fit `max_tokens`; the page's totals and nextOffset still say
    what is left, so nothing is cut silently. A toc is all or nothing (§1 invariant 2)."""
    if isinstance(result, Toc):
        sizes = [config.estimate_tokens(f"{e.line} {e.title}\n") for e in result.entries]
        if sum(sizes) > max_tokens:
            raise RefusalError(
                f"refused: the toc of {result.path} has {len(sizes)} entries, about {sum(sizes)} "
                f"estimated tokens; maxTokens is {max_tokens}",
                hint=f"ask again with maxTokens {sum(sizes)}, or read pages with offset/limit")
        return result, TokenBudget(max_tokens, sum(sizes))
    if isinstance(result, LineSlice):
        return _fit_lines(result, list(result.lines), max_tokens, config, "the first line")
    return _fit_lines(result, [text for _, text in result.matches], max_tokens, config,
                      "the first matching line")


def _fit_lines(result: _Result, texts: list[str], max_tokens: int, config: Config,
               what: str) -> tuple[_Result, TokenBudget]:
    used, kept = 0, 0
    for size in _line_tokens(config, texts):
        if used + size > max_tokens:
            break
        used, kept = used + size, kept + 1
    if texts and kept == 0:
        raise _refuse(_line_tokens(config, texts[:1])[0], max_tokens, what)
    if isinstance(result, LineSlice):
        return replace(result, lines=result.lines[:kept]), TokenBudget(max_tokens, used)
    return replace(result, matches=result.matches[:kept]), TokenBudget(max_tokens, used)


class AppArchive:
    """`AgentArchive` (dsh_chapters_core.ports.agents) over the app's use cases."""

    def __init__(self, compose: Callable[[], App]) -> None:
        self._compose_app = compose
        self._app: App | None = None

    def _compose(self) -> App:
        # Once per process; a failure (a bad config) is raised again at the next call, so each
        # tool says why instead of the server refusing to start.
        if self._app is None:
            self._app = self._compose_app()
        return self._app

    def project_line(self) -> str:
        return project_line(self._compose())

    def search(
        self, query: str, *, max_tokens: int | None, topic: str, cross_project: bool
    ) -> SearchAnswer:
        app = self._compose()
        return search_answer(app, SearchRequest(
            query=query, max_tokens=max_tokens, topic=topic, cross_project=cross_project,
            project_key=app.identity.project_key))

    def read(self, path: str, *, offset: int, limit: int | None,
             line: int | None = None) -> Page:
        app = self._compose()
        # The one containment check of every read door, narrowed to what chapters_read opens
        # (artifacts are chapters_artifact's): `..`, absolute paths, symlinks out, internal
        # files and quarantined pool files are refused.
        found = resolve(path, app.read_roots(), kinds=READ_KINDS)
        if line is not None:
            if line < 1:
                raise ChaptersError(f"line {line} is not a line number (lines count from 1)",
                                    hint="pass the anchor's line as chapters_search printed it")
            offset = line - 1  # an anchor's line, counted as search counts it (`\n` ends one)
        text = read_text(found)
        return Page(found.root.name, read_lines(text, path=found.display, config=app.config,
                                                offset=offset, limit=limit))

    def artifact(
        self,
        ref: str,
        action: ArtifactAction,
        *,
        query: str,
        offset: int,
        limit: int | None,
        max_tokens: int | None,
    ) -> Page:
        app = self._compose()
        page = read_artifact(app, ref, action, query=query, offset=offset, limit=limit)
        found, result, config = page.found, page.result, app.config
        if max_tokens is None:
            return Page(found.root.name, result)
        fitted, budget = fit_page(result, max_tokens, config)
        return Page(found.root.name, fitted, budget)

    def rules(self, category: str) -> RuleListing:
        app = self._compose()
        every = rules_here(app)
        shown = [r for r in every if r.status is not RuleStatus.REVOKED]
        if category.strip():
            wanted = category_slug(category)
            shown = [r for r in shown if r.category == wanted]
        prefix = _store_dir(app)
        return RuleListing(app.harness_id, tuple(replace(r, path=f"{prefix}/{r.path}")
                                                 for r in shown), len(every))

    def propose_rule(self, category: str, text: str) -> ProposalResult:
        app = self._compose()
        result = propose(app, category, text, session=current_agent_session(app),
                         author=RuleAuthor.AGENT)
        return replace(result, rule=replace(result.rule,
                                            path=f"{_store_dir(app)}/{result.rule.path}"))


def _store_dir(app: App) -> str:
    try:
        return app.store_root.relative_to(app.workspace).as_posix()
    except ValueError:
        return os.fspath(app.store_root)
