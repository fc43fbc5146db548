"""The MCP adapter alone, against a fake `AgentArchive` of its own, over the SDK's in-memory
client: what each tool passes to the archive, and how it words answers and refusals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from dsh_chapters_core.errors import (
    Argument,
    ArgumentError,
    ChaptersError,
    NextStep,
    RefusalError,
)
from dsh_chapters_core.ports.agents import ArtifactAction, Page, RuleListing, TokenBudget
from dsh_chapters_core.reading import LineSlice
from dsh_chapters_core.rules import ProposalResult
from dsh_chapters_core.search.packing import AnswerStatus, Budget, SearchAnswer
from dsh_chapters_mcp.server import ARGUMENT_NAMES, NEXT_STEPS, build_server, error_text
from mcp import Client
from mcp.types import CallToolResult, TextContent


def _page(path: str, lines: tuple[str, ...], total: int, offset: int = 0) -> LineSlice:
    return LineSlice(path=path, offset=offset, lines=lines, total_lines=total,
                     limit=len(lines), capped=False)


@dataclass
class FakeArchive:
    """Records every call; answers from canned values, or raises what `fail` names."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail: ChaptersError | None = None
    status: AnswerStatus = AnswerStatus.OK

    def _record(self, name: str, **kwargs: Any) -> None:
        self.calls.append((name, kwargs))
        if self.fail is not None:
            raise self.fail

    def project_line(self) -> str:
        return "Project: widgets · 0f0f"

    def search(self, query: str, *, max_tokens: int | None, topic: str,
               cross_project: bool) -> SearchAnswer:
        self._record("search", query=query, max_tokens=max_tokens, topic=topic,
                     cross_project=cross_project)
        return SearchAnswer(matches=(), shown=0, total=0, budget=Budget(400, 0, 400),
                            door="store", lines=(), status=self.status, searched=3)

    def read(self, path: str, *, offset: int, limit: int | None) -> Page:
        self._record("read", path=path, offset=offset, limit=limit)
        return Page("store", _page(path, ("line one", "line two"), 5, offset))

    def artifact(self, ref: str, action: ArtifactAction, *, query: str, offset: int,
                 limit: int | None, max_tokens: int | None) -> Page:
        self._record("artifact", ref=ref, action=action, query=query, offset=offset,
                     limit=limit, max_tokens=max_tokens)
        budget = TokenBudget(max_tokens, 7) if max_tokens is not None else None
        return Page("mirror", _page(ref, ("alpha",), 1), budget)

    def rules(self, category: str) -> RuleListing:
        self._record("rules", category=category)
        return RuleListing("machine-a", (), 0)

    def propose_rule(self, category: str, text: str) -> ProposalResult:
        self._record("propose_rule", category=category, text=text)
        raise AssertionError("not reached in these tests")


def _call(archive: FakeArchive, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    async def main() -> CallToolResult:
        async with Client(build_server(archive, instructions="test")) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(main)


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def test_search_passes_the_wire_arguments_to_the_archive() -> None:
    archive = FakeArchive()
    result = _call(archive, "chapters_search",
                   {"query": "retry 503", "maxTokens": 900, "topic": "http", "crossProject": True})
    assert not result.is_error
    assert archive.calls == [("search", {"query": "retry 503", "max_tokens": 900,
                                         "topic": "http", "cross_project": True})]
    assert result.structured_content is not None
    assert result.structured_content["door"] == "store"
    assert result.structured_content["budget"] == {"requested": 400, "used": 0, "remaining": 400}


def test_search_defaults_are_the_contracts() -> None:
    archive = FakeArchive()
    _call(archive, "chapters_search", {"query": "x"})
    assert archive.calls == [("search", {"query": "x", "max_tokens": None, "topic": "",
                                         "cross_project": False})]


def test_read_pages_with_offset_and_limit() -> None:
    archive = FakeArchive()
    result = _call(archive, "chapters_read", {"path": ".dsh-chapters/s/chapters/001-a.md",
                                              "offset": 3, "limit": 2})
    assert archive.calls == [("read", {"path": ".dsh-chapters/s/chapters/001-a.md",
                                       "offset": 3, "limit": 2})]
    data = result.structured_content
    assert data is not None and data["lines"] == ["line one", "line two"]
    assert data["totalLines"] == 5 and data["nextOffset"] is None


def test_artifact_action_and_budget_reach_the_archive() -> None:
    archive = FakeArchive()
    result = _call(archive, "chapters_artifact",
                   {"pathOrSha": "ab" * 32, "action": "search", "query": "token", "maxTokens": 50})
    assert [name for name, _ in archive.calls] == ["artifact"]
    sent = archive.calls[0][1]
    assert sent["action"] is ArtifactAction.SEARCH and sent["query"] == "token"
    assert sent["max_tokens"] == 50
    data = result.structured_content
    assert data is not None and data["root"] == "mirror" and data["action"] == "search"
    assert data["budget"] == {"requested": 50, "used": 7}


def test_a_refusal_is_a_tool_error_in_the_agents_words() -> None:
    archive = FakeArchive(fail=RefusalError(
        "refused: the best match alone needs 90 tokens, the budget is 10 tokens",
        step=NextStep.RAISE_MAX_TOKENS, data={"needed": 90}))
    result = _call(archive, "chapters_search", {"query": "retry"})
    assert result.is_error
    text = _text(result)
    assert "needs 90 tokens" in text
    # The core's next-step code, worded with the tool's own argument names.
    assert "next: ask again with maxTokens=90 or more" in text
    assert "--max-tokens" not in text


def test_a_bad_argument_is_named_as_the_tool_names_it() -> None:
    archive = FakeArchive(fail=ArgumentError(
        Argument.OFFSET, "is past the end: p.md has 5 lines", value=9,
        hint="use an offset below 5"))
    text = _text(_call(archive, "chapters_read", {"path": "p.md", "offset": 9}))
    assert text.endswith(
        ": offset=9 is past the end: p.md has 5 lines\n  next: use an offset below 5")
    assert "--offset" not in text


def test_every_next_step_and_argument_has_tool_words() -> None:
    assert set(NEXT_STEPS) == set(NextStep) and set(ARGUMENT_NAMES) == set(Argument)
    for step in NextStep:
        words = NEXT_STEPS[step].format_map({"needed": 7, "schemes": "file"})
        assert words and "--" not in words, step
    error = ChaptersError("empty query", step=NextStep.PASS_QUERY_OR_TOPIC)
    assert error_text(error) == "empty query\n  next: pass words to search for, or topic <name>"


def test_a_page_names_its_next_offset_as_the_tool_argument() -> None:
    result = _call(FakeArchive(), "chapters_read", {"path": "p.md"})
    assert "lines 1-2 of 5; next: offset=2" in _text(result)


@pytest.mark.parametrize("status", [AnswerStatus.NO_MATCH, AnswerStatus.EMPTY])
def test_no_match_and_empty_are_told_apart(status: AnswerStatus) -> None:
    archive = FakeArchive(status=status)
    result = _call(archive, "chapters_search", {"query": "nothing"})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["status"] == str(status)


def test_rules_passes_the_category() -> None:
    archive = FakeArchive()
    result = _call(archive, "chapters_rules", {"category": "testing"})
    assert archive.calls == [("rules", {"category": "testing"})]
    data = result.structured_content
    assert data is not None and data["harnessId"] == "machine-a"
