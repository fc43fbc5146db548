"""The MCP server: `chapters_search`, `chapters_read`, `chapters_artifact`, `chapters_rules` and
`chapters_rule_propose` over stdio (mcp ≥ 2, `MCPServer`).

Every tool publishes an input and an output schema and carries annotations (the four readers
are read-only). An answer is a `CallToolResult` whose text is what `chapters` prints and whose
structured content is what `chapters ... --json` prints. A `ChaptersError` becomes a tool error
with its numbers and its next step. The server calls no model, and its only write to the
archive is a rule proposal (search keeps its derived, machine-local index current, as
`chapters search` does).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar

from dsh_chapters_core.errors import Argument, ArgumentError, ChaptersError, NextStep
from dsh_chapters_core.ports.agents import AgentArchive, ArtifactAction, Page
from dsh_chapters_core.rules import RuleStatus, rule_json
from dsh_chapters_core.search.packing import AnswerStatus
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from dsh_chapters_mcp.__about__ import __version__
from dsh_chapters_mcp.wire import (
    PageOutput,
    ProposalOutput,
    RulesOutput,
    SearchOutput,
)

SERVER_NAME = "dsh-chapters"
TOOL_NAMES = (
    "chapters_search",
    "chapters_read",
    "chapters_artifact",
    "chapters_rules",
    "chapters_rule_propose",
)

_T = TypeVar("_T")

_READER = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True,
           "open_world_hint": False}

SEARCH_DESCRIPTION = (
    "Search this project's archived past work: the verbatim chapters of earlier agent sessions "
    "from every machine that shares the project, plus plans and rules. Deterministic scorer, no "
    "model. Answers lines `score | date | kind | title | path (topics: ...)`, best first, packed "
    "to maxTokens; when `total` is above `shown`, call again with a larger maxTokens. Open a hit "
    "with chapters_read {path, line: anchor.line}, at its passage. `topic` lists one "
    "whole topic shard. Only this project is "
    "searched unless crossProject is true. Search before redoing work someone already did."
)
READ_DESCRIPTION = (
    "Read a chapter, rule or topic shard verbatim, by the path chapters_search returned; "
    "`line` (a search anchor's line) starts the page at that passage. Only the documents of "
    "the archive (.dsh-chapters/) and the pool mirror (.dsh-knowledge/) are read: their other "
    "files, paths that leave them and pool files a sync quarantined are refused. Pages are "
    "capped in lines; the answer gives totalLines and nextOffset, so call again with "
    "offset=nextOffset for the rest."
)
ARTIFACT_DESCRIPTION = (
    "Read archived text by path or sha256: the large tool outputs a chapter moved to an "
    "artifact, or a chapter itself. action=toc lists headings with line numbers, action=search "
    "lists the lines holding every word of `query`, action=read pages with offset/limit. "
    "maxTokens caps the page by estimated tokens; the answer always reports the totals and "
    "where the next page starts."
)
RULES_DESCRIPTION = (
    "List the rules in effect on this machine, by category: `core` rules were approved here by "
    "a human and are in the session notice; `proposed` ones await approval and bind nobody. "
    "`category` narrows the list to one category."
)
PROPOSE_DESCRIPTION = (
    "Propose a rule: a standing instruction for future sessions of this project, in a category "
    "such as testing or git-workflow. It is written as `proposed`, attributed to this session, "
    "and has NO effect until a human approves it on each machine (`chapters rule approve "
    "<id>`); do not treat or present it as adopted. Proposing the same category and text again "
    "writes nothing."
)


# The core names arguments and next steps by code; an agent calling a tool sets the tool's
# parameters and calls tools, so these are the tools' own words for them.
ARGUMENT_NAMES: Mapping[Argument, str] = {
    Argument.MAX_TOKENS: "maxTokens",
    Argument.OFFSET: "offset",
    Argument.LIMIT: "limit",
    Argument.TOPIC: "topic",
}


def tool_argument(argument: Argument, value: int | None = None) -> str:
    """An argument as a tool takes it: `maxTokens`, `offset=200`."""
    name = ARGUMENT_NAMES[argument]
    return name if value is None else f"{name}={value}"


# Each next step as a tool user takes it; `{name}` fields come from the error's data.
NEXT_STEPS: Mapping[NextStep, str] = {
    NextStep.REPAIR_UNSAFE_FILE: "ask the user to replace it with the regular file it should be, "
                                 "or remove it (`chapters doctor` lists every such file)",
    NextStep.PASS_REMOTE_OR_PATH: "the workspace has no git remote: ask the user to set "
                                  "`projectKey` or run the server inside a git checkout",
    NextStep.NAME_FILE: "pass a path from chapters_search, or an artifact's sha256",
    NextStep.COPY_SEARCH_PATH: "copy a path from chapters_search, or pass the artifact's sha256",
    NextStep.READ_FROM_TOP: f"{tool_argument(Argument.OFFSET, 0)} reads from the top",
    NextStep.NAME_LINE_WORDS: "pass the words to find as query with action=search",
    NextStep.PROPOSE_RULE_OR_SYNC: "propose one with chapters_rule_propose",
    NextStep.LIST_ALL_RULES: "call chapters_rules to see every rule in effect",
    NextStep.RAISE_MAX_TOKENS: f"ask again with {tool_argument(Argument.MAX_TOKENS)}={{needed}} "
                               "or more",
    NextStep.PASS_QUERY_OR_TOPIC: "pass words to search for, or "
                                  f"{tool_argument(Argument.TOPIC)} <name>",
    NextStep.NAME_TWO_TOPICS: "name two different topics, each with words",
    NextStep.LINK_POOL: "no knowledge pool is linked; a human links one (`chapters link`)",
    NextStep.USE_PROVIDER_SCHEME: "the linked remote has no installed provider (schemes: "
                                  "{schemes}); a human re-links the pool",
}


def error_text(exc: ChaptersError) -> str:
    """The error in the tools' words: its numbers, then its next step."""
    message = exc.worded(tool_argument) if isinstance(exc, ArgumentError) else exc.message
    hint = exc.hint
    if not hint and exc.step is not None:
        hint = NEXT_STEPS[exc.step].format_map(exc.data)
    return f"{message}\n  next: {hint}" if hint else message


def _answer(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=data)


def _call(work: Callable[[], _T]) -> _T:
    """A `ChaptersError` is a tool error the agent can act on: its numbers and its next step."""
    try:
        return work()
    except ChaptersError as exc:
        raise ToolError(error_text(exc)) from exc


def _page_json(page: Page, action: ArtifactAction) -> dict[str, Any]:
    data: dict[str, Any] = {"root": page.root, "action": str(action), **page.result.to_json()}
    if page.budget is not None:
        data["budget"] = {"requested": page.budget.requested, "used": page.budget.used}
    return data


def _page_text(page: Page) -> str:
    text = page.result.text(tool_argument)
    if page.budget is not None:
        text += f"\n({page.budget.used} of maxTokens {page.budget.requested} used)"
    return text


def _search_text(status: AnswerStatus, text: str) -> str:
    # The same next steps `chapters search` prints.
    if status is AnswerStatus.EMPTY:
        return text + "\n  next: nothing is archived here yet; work on, the hooks archive it"
    if status is AnswerStatus.NO_MATCH:
        return text + "\n  next: try other words, a topic, or crossProject=true"
    return text


def build_server(archive: AgentArchive, *, instructions: str = "") -> MCPServer:
    """The server with its five tools, answering from `archive`."""
    server: MCPServer = MCPServer(
        name=SERVER_NAME,
        title="dsh-chapters",
        version=__version__,
        instructions=instructions or None,
        log_level="WARNING",
    )

    @server.tool(name="chapters_search", title="Search past work", description=SEARCH_DESCRIPTION,
                 annotations=ToolAnnotations(title="Search past work", **_READER))
    # Parameter names are the wire names of the contract (maxTokens, crossProject, pathOrSha).
    def chapters_search(
        query: Annotated[str, Field(description="words to look for (may be empty with topic)")],
        maxTokens: Annotated[int | None, Field(
            ge=1, description="the answer's token budget (default searchDefaultMaxTokens)",
        )] = None,
        topic: Annotated[str, Field(description="read one whole topic shard")] = "",
        crossProject: Annotated[bool, Field(
            description="search every project in the pool, not just this one")] = False,
    ) -> Annotated[CallToolResult, SearchOutput]:
        answer = _call(lambda: archive.search(query, max_tokens=maxTokens, topic=topic,
                                              cross_project=crossProject))
        return _answer(_search_text(answer.status, answer.text(tool_argument)),
                       answer.to_json())

    @server.tool(name="chapters_read", title="Read a chapter", description=READ_DESCRIPTION,
                 annotations=ToolAnnotations(title="Read a chapter", **_READER))
    def chapters_read(
        path: Annotated[str, Field(description="a path from chapters_search, workspace-relative")],
        offset: Annotated[int, Field(ge=0, description="first line to read, 0-based")] = 0,
        limit: Annotated[int | None, Field(
            ge=1, description="lines to return (default artifactReadDefaultLines, capped at "
                              "artifactReadMaxLines)")] = None,
        line: Annotated[int | None, Field(
            ge=1, description="start at this 1-based line: a chapters_search anchor's line "
                              "as it is (takes the place of offset)")] = None,
    ) -> Annotated[CallToolResult, PageOutput]:
        page = _call(lambda: archive.read(path, offset=offset, limit=limit) if line is None
                     else archive.read(path, offset=offset, limit=limit, line=line))
        return _answer(_page_text(page), _page_json(page, ArtifactAction.READ))

    @server.tool(name="chapters_artifact", title="Read an artifact",
                 description=ARTIFACT_DESCRIPTION,
                 annotations=ToolAnnotations(title="Read an artifact", **_READER))
    def chapters_artifact(
        pathOrSha: Annotated[str, Field(
            description="a path from a chapter or search, or an artifact's sha256")],
        action: Annotated[Literal["toc", "search", "read"], Field(
            description="toc: headings; search: matching lines; read: a page")] = "read",
        query: Annotated[str, Field(description="for action=search: the words to find")] = "",
        offset: Annotated[int, Field(ge=0, description="for read: first line, 0-based")] = 0,
        limit: Annotated[int | None, Field(
            ge=1, description="lines (or matches) to return")] = None,
        maxTokens: Annotated[int | None, Field(
            ge=1, description="cap the page at this many estimated tokens")] = None,
    ) -> Annotated[CallToolResult, PageOutput]:
        chosen = ArtifactAction(action)
        page = _call(lambda: archive.artifact(pathOrSha, chosen, query=query, offset=offset,
                                              limit=limit, max_tokens=maxTokens))
        return _answer(_page_text(page), _page_json(page, chosen))

    @server.tool(name="chapters_rules", title="Rules in effect", description=RULES_DESCRIPTION,
                 annotations=ToolAnnotations(title="Rules in effect", **_READER))
    def chapters_rules(
        category: Annotated[str, Field(description="only this category (empty: all)")] = "",
    ) -> Annotated[CallToolResult, RulesOutput]:
        listing = _call(lambda: archive.rules(category))
        grouped: dict[str, list[Any]] = defaultdict(list)
        for rule in listing.rules:
            grouped[rule.category].append(rule)
        categories = []
        lines = []
        for name in sorted(grouped):
            rules = grouped[name]
            core = sum(1 for r in rules if r.status is RuleStatus.CORE)
            categories.append({"name": name, "core": core, "proposed": len(rules) - core,
                               "rules": [rule_json(r) for r in rules]})
            lines.append(f"## {name} ({core} core, {len(rules) - core} proposed)")
            lines.extend(f"- {r.id} [{r.status}] {r.one_line}  ({r.path})" for r in rules)
        head = (f"{len(listing.rules)} rules in effect on {listing.harness_id} "
                f"({listing.total} in the store)")
        if not listing.rules:
            head += "; propose one with chapters_rule_propose (a human approves it)"
        data = {"harnessId": listing.harness_id, "category": category,
                "categories": categories, "shown": len(listing.rules), "total": listing.total}
        return _answer("\n".join([head, *lines]), data)

    @server.tool(name="chapters_rule_propose", title="Propose a rule",
                 description=PROPOSE_DESCRIPTION,
                 annotations=ToolAnnotations(title="Propose a rule", read_only_hint=False,
                                             destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=False))
    def chapters_rule_propose(
        category: Annotated[str, Field(min_length=1, description="e.g. testing, git-workflow")],
        text: Annotated[str, Field(min_length=1, description="the rule, in plain words")],
    ) -> Annotated[CallToolResult, ProposalOutput]:
        result = _call(lambda: archive.propose_rule(category, text))
        rule = result.rule
        approve = f"chapters rule approve {rule.id}"
        if result.created:
            text_out = (f"proposed {rule.id} [{rule.category}] at {rule.path}; status: "
                        f"{rule.status}. It affects no session until a human approves it on each "
                        f"machine: `{approve}`")
        else:
            text_out = (f"the same rule already exists as {rule.id} ({rule.status} here) at "
                        f"{rule.path}; nothing written")
        data = {"created": result.created, "rule": rule_json(rule), "approve": approve}
        return _answer(text_out, data)

    return server


def serve_stdio(archive: AgentArchive, *, instructions: str = "") -> None:
    """Run the server on stdin/stdout until the client closes them."""
    build_server(archive, instructions=instructions).run("stdio")
