"""What an agent's tools need of the archive: a driving port the app implements.

The MCP server (`dsh_chapters_mcp`) never imports the app; the app hands it an `AgentArchive`
built from its composed `App`. Every method answers with the core's own types (the objects
`chapters search`, `chapters artifact` and `chapters rule` print) and raises `ChaptersError`
with numbers and a next step; the server turns that into a tool error.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    # Annotations only: a caller that needs one enum of this port (`chapters search`) does
    # not load the rules and reading use cases with it.
    from dsh_chapters_core.reading import LineMatches, LineSlice, Toc
    from dsh_chapters_core.rules import ProposalResult, Rule
    from dsh_chapters_core.search.packing import SearchAnswer


class ArtifactAction(enum.StrEnum):
    TOC = "toc"
    SEARCH = "search"
    READ = "read"


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """`maxTokens` spent on a page: what was asked for and what the page used."""

    requested: int
    used: int


@dataclass(frozen=True, slots=True)
class Page:
    """A read answer: which root answered ("store" or "mirror") and the capped page."""

    root: str
    result: LineSlice | Toc | LineMatches
    budget: TokenBudget | None = None


@dataclass(frozen=True, slots=True)
class RuleListing:
    """This machine's effective rules (revoked ones left out), and whose machine this is."""

    harness_id: str
    rules: tuple[Rule, ...]  # each `path` workspace-relative (`.dsh-chapters/rules/...`)
    total: int  # every rule in the store, revoked included


class AgentArchive(Protocol):
    """The archive as an agent reaches it: search, read, rules; the only write is a proposal."""

    def project_line(self) -> str:
        """`Project: <slug> · <projectKey>`: which corpus the tools answer from."""
        ...

    def search(
        self, query: str, *, max_tokens: int | None, topic: str, cross_project: bool
    ) -> SearchAnswer:
        """The one scorer and packing of `chapters search` (§8.1)."""
        ...

    def read(self, path: str, *, offset: int, limit: int | None,
             line: int | None = None) -> Page:
        """A chapter, rule or index shard from the store or the mirror, contained and capped;
        with `line` (a search anchor's, 1-based, `\n`-counted), the page starts there."""
        ...

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
        """`chapters artifact`: an artifact or chapter by path or sha, as toc, search or read."""
        ...

    def rules(self, category: str) -> RuleListing:
        """Core and proposed rules on this machine, optionally of one category."""
        ...

    def propose_rule(self, category: str, text: str) -> ProposalResult:
        """Write a `proposed` rule with the source session; a human approves it (§11.3).
        The result's rule path is workspace-relative, as in `rules`."""
        ...
