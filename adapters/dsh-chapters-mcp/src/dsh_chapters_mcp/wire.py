"""The tools' output schemas: pydantic models of the JSON the tools return (edges only).

The JSON itself is the core's `to_json()` (so `chapters_search` answers byte for byte what
`chapters search --json` prints); these models publish its shape as each tool's
`outputSchema` and check every answer against it before it leaves the server.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    """Field names are the JSON's own (camelCase), so the schema and the CLI's JSON agree."""

    model_config = ConfigDict(populate_by_name=True)


# -- chapters_search (§8.1) --------------------------------------------------------------------


class SearchAnchor(_Out):
    line: int = Field(description="1-based line of the chapter file where the body matched; "
                                  "chapters_read it with offset line-1")
    text: str = Field(description="a verbatim snippet of that line around the query words")


class SearchMatch(_Out):
    score: float
    date: str = Field(description="YYYY-MM-DD, or - when unknown")
    kind: str = Field(description="chapter, plan or rule")
    title: str
    path: str = Field(description="workspace-relative; open it with chapters_read")
    topics: list[str]
    members: list[str] | None = Field(
        default=None, description="a stitched entry: every member file's path")
    anchor: SearchAnchor | None = Field(
        default=None, description="where the body matched (absent for a frontmatter match)")


class SearchBudget(_Out):
    requested: int
    used: int
    remaining: int


class SearchOutput(_Out):
    """`{matches, shown, total, budget, door, status}`: `total` above `shown` means ask again
    with a larger maxTokens."""

    matches: list[SearchMatch]
    shown: int
    total: int
    budget: SearchBudget
    door: str = Field(description="which corpus answered: mirror (the pool) or store")
    status: str = Field(description="ok, no-match (documents exist, none matched) or empty")


# -- chapters_read / chapters_artifact ---------------------------------------------------------


class TocEntryOut(_Out):
    line: int
    level: int
    title: str


class LineMatchOut(_Out):
    line: int
    text: str


class PageBudget(_Out):
    requested: int
    used: int


class PageOutput(_Out):
    """One capped page of an archived file. `read` fills lines/offset/nextOffset, `toc` fills
    entries, `search` fills matches; totals are always reported (never a silent cut)."""

    root: str = Field(description="store (.dsh-chapters/) or mirror (.dsh-knowledge/)")
    action: str = Field(description="read, toc or search")
    path: str = Field(description="workspace-relative path of the file read")
    totalLines: int
    offset: int | None = None
    limit: int | None = None
    lines: list[str] | None = None
    returned: int | None = None
    nextOffset: int | None = Field(
        default=None, description="where the next page starts; null at the end")
    capped: bool | None = None
    entries: list[TocEntryOut] | None = None
    query: str | None = None
    totalMatches: int | None = None
    shown: int | None = None
    matches: list[LineMatchOut] | None = None
    budget: PageBudget | None = Field(default=None, description="maxTokens asked and used")


# -- chapters_rules / chapters_rule_propose (§7) -----------------------------------------------


class RuleOut(_Out):
    id: str = Field(description="<harnessId>/<NNN>")
    status: str = Field(description="core, proposed or revoked, on this machine")
    category: str
    title: str
    text: str
    path: str = Field(description="workspace-relative path of the rule file")
    harnessId: str
    author: str
    sourceSession: str
    authoredAt: str
    changedSinceApproved: bool


class RuleCategoryOut(_Out):
    name: str
    core: int
    proposed: int
    rules: list[RuleOut]


class RulesOutput(_Out):
    harnessId: str
    category: str = Field(description="the category asked for, or empty for all")
    categories: list[RuleCategoryOut]
    shown: int
    total: int = Field(description="every rule in the store, revoked ones included")


class ProposalOutput(_Out):
    created: bool = Field(description="false: the same rule already existed; nothing written")
    rule: RuleOut
    approve: str = Field(description="the command a human runs to make it core on a machine")


