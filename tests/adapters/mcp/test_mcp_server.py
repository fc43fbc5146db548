"""`chapters mcp` driven by the real `mcp` client over stdio: tools, schemas and annotations;
search → read verbatim; rule proposals; refusals as tool errors with numbers and a next step."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.cli import Invocation, build_parser, main
from mcp import ClientSession
from mcp.types import CallToolResult

from tests.adapters.mcp.mcp_session import structured, text_of, with_session
from tests.fixtures import CLAUDE_CODE_SESSION, CLAUDE_CODE_SESSION_ID

pytestmark = pytest.mark.slow

READERS = ("chapters_search", "chapters_read", "chapters_artifact", "chapters_rules")
TOOLS = (*READERS, "chapters_rule_propose")


@dataclass
class Workspace:
    root: Path
    env: dict[str, str]
    errlog: Path

    @property
    def store(self) -> Path:
        return self.root / ".dsh-chapters"

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
        capsys.readouterr()
        code = main(["-C", str(self.root), *argv, "--json"])
        out = capsys.readouterr().out
        assert code == 0, out
        return json.loads(out)

    def session(self, work: Any) -> Any:
        return with_session(self.root, self.env, work, errlog=self.errlog)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> Iterator[Workspace]:
    """A git workspace with the Claude Code fixture archived (54 turns)."""
    root = tmp_path / "acme-api"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/acme/api.git\n', encoding="utf-8")
    env = {"DSH_HOME": str(tmp_path / "dsh-home"), "DSH_CHAPTERS_HARNESS_ID": "laptop",
           "HOME": str(tmp_path)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    ws = Workspace(root, env, tmp_path / "mcp-stderr.log")
    report = ws.cli(capsys, "archive", str(CLAUDE_CODE_SESSION))
    assert report["turns"]["archived"] == 54
    yield ws


def _call(session: ClientSession, name: str, **arguments: Any) -> Any:
    return session.call_tool(name, arguments)


def test_lists_five_tools_with_input_and_output_schemas_and_annotations(
    workspace: Workspace,
) -> None:
    async def work(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    tools = {t.name: t for t in workspace.session(work)}
    assert sorted(tools) == sorted(TOOLS)
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.description and tool.annotations is not None
    for name in READERS:
        assert tools[name].annotations.read_only_hint is True
    propose = tools["chapters_rule_propose"]
    assert propose.annotations.read_only_hint is False
    assert propose.annotations.destructive_hint is False
    assert "human" in propose.description and "approve" in propose.description
    # The contract's argument names, required where the issue says so.
    search = tools["chapters_search"].input_schema
    assert set(search["properties"]) == {"query", "maxTokens", "topic", "crossProject"}
    assert search["required"] == ["query"]
    assert set(tools["chapters_read"].input_schema["properties"]) == {"path", "offset", "limit",
                                                                     "line"}
    artifact = tools["chapters_artifact"].input_schema
    assert set(artifact["properties"]) == {"pathOrSha", "action", "query", "offset", "limit",
                                           "maxTokens"}
    assert artifact["properties"]["action"]["enum"] == ["toc", "search", "read"]
    assert set(tools["chapters_rules"].input_schema["properties"]) == {"category"}
    assert sorted(propose.input_schema["required"]) == ["category", "text"]
    out = tools["chapters_search"].output_schema
    assert {"matches", "shown", "total", "budget", "door", "status"} <= set(out["properties"])


def test_search_finds_the_archive_and_read_returns_the_top_hit_verbatim(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "rate limiting token bucket"

    async def work(session: ClientSession) -> tuple[CallToolResult, CallToolResult, Any]:
        found = await _call(session, "chapters_search", query=query, maxTokens=400)
        top = structured(found)["matches"][0]["path"]
        first = await _call(session, "chapters_read", path=top, limit=5)
        rest = await _call(session, "chapters_read", path=top,
                           offset=structured(first)["nextOffset"])
        return found, first, rest

    found, first, rest = workspace.session(work)
    answer = structured(found)
    assert answer["status"] == "ok" and answer["door"] == "store"
    assert answer["shown"] >= 1 and answer["total"] >= answer["shown"]
    assert answer["budget"]["requested"] == 400
    assert "shown " in text_of(found) and " | " in text_of(found)

    # The same scorer, packing and JSON as `chapters search --json`.
    cli = workspace.cli(capsys, "search", *query.split(), "--max-tokens", "400")
    assert [m["path"] for m in cli["matches"]] == [m["path"] for m in answer["matches"]]
    assert {k: v for k, v in cli.items() if k != "matches"} == {
        k: v for k, v in answer.items() if k != "matches"}
    for ours, theirs in zip(answer["matches"], cli["matches"], strict=True):
        assert {k: v for k, v in ours.items() if k != "score"} == {
            k: v for k, v in theirs.items() if k != "score"}
        assert ours["score"] == pytest.approx(theirs["score"], abs=1e-3)

    top = answer["matches"][0]["path"]
    assert top.startswith(".dsh-chapters/") and "/chapters/" in top
    lines = (workspace.root / top).read_text(encoding="utf-8").splitlines()
    page1, page2 = structured(first), structured(rest)
    assert page1["root"] == "store" and page1["path"] == top
    assert page1["lines"] == lines[:5] and page1["totalLines"] == len(lines)
    assert page1["nextOffset"] == 5
    assert page1["lines"] + page2["lines"] == lines  # verbatim, every line, two pages
    assert page2["nextOffset"] is None


def test_artifact_toc_search_and_read_with_a_token_budget(workspace: Workspace) -> None:
    artifact = next((workspace.store / "artifacts").rglob("*.txt"))
    sha = artifact.stem
    lines = artifact.read_text(encoding="utf-8").splitlines()
    word = next(w for w in lines[0].split() if len(w) > 3)

    async def work(session: ClientSession) -> list[CallToolResult]:
        return [
            await _call(session, "chapters_artifact", pathOrSha=sha, action="toc"),
            await _call(session, "chapters_artifact", pathOrSha=sha, action="search", query=word),
            await _call(session, "chapters_artifact", pathOrSha=sha, action="read", maxTokens=60),
            await _call(session, "chapters_artifact", pathOrSha=sha, action="read", maxTokens=1),
        ]

    toc, search, read, refused = workspace.session(work)
    assert structured(toc)["totalLines"] == len(lines) and structured(toc)["entries"]
    hits = structured(search)
    assert hits["totalMatches"] >= 1 and all(word.casefold() in m["text"].casefold()
                                             for m in hits["matches"])
    page = structured(read)
    assert page["budget"]["requested"] == 60 and 0 < page["budget"]["used"] <= 60
    assert page["lines"] == lines[: page["returned"]]
    assert page["nextOffset"] == page["returned"] < len(lines)  # the rest is a page away
    assert refused.is_error
    message = text_of(refused)
    assert "refused" in message and "maxTokens is 1" in message and "next:" in message


def test_a_proposed_rule_is_proposed_with_its_session_and_listed_as_such(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    # Claude Code's SessionStart hook records the session the agent runs in.
    payload = json.dumps({"session_id": CLAUDE_CODE_SESSION_ID, "hook_event_name": "SessionStart",
                          "source": "startup", "cwd": str(workspace.root),
                          "transcript_path": str(CLAUDE_CODE_SESSION)})
    args = build_parser().parse_args(["hook"])
    out = io.StringIO()
    inv = Invocation(cwd=workspace.root, json=False, env=dict(os.environ),
                     stdin=io.StringIO(payload), stdout=out)
    assert args.run(args, inv) == 0
    text = "Run the whole test suite before every commit."

    async def work(session: ClientSession) -> list[CallToolResult]:
        return [
            await _call(session, "chapters_rule_propose", category="testing", text=text),
            await _call(session, "chapters_rules"),
            await _call(session, "chapters_rules", category="Testing"),
            await _call(session, "chapters_rule_propose", category="testing", text=text),
        ]

    proposed, listed, narrowed, again = workspace.session(work)
    created = structured(proposed)
    rule = created["rule"]
    assert created["created"] is True and rule["status"] == "proposed"
    assert rule["sourceSession"] == CLAUDE_CODE_SESSION_ID and rule["author"] == "agent"
    assert rule["text"] == text and rule["harnessId"] == "laptop"
    assert created["approve"] == f"chapters rule approve {rule['id']}"
    assert "approves" in text_of(proposed)
    assert (workspace.root / rule["path"]).is_file()

    listing = structured(listed)
    assert listing["harnessId"] == "laptop" and listing["shown"] == 1
    [category] = listing["categories"]
    assert category["name"] == "testing" and category["proposed"] == 1 and category["core"] == 0
    assert category["rules"][0]["id"] == rule["id"]
    assert category["rules"][0]["status"] == "proposed"
    assert structured(narrowed)["shown"] == 1
    assert structured(again)["created"] is False  # the same rule twice writes nothing

    # The CLI agrees: proposed, awaiting a human on this machine.
    cli = workspace.cli(capsys, "rule", "list")
    assert [(r["id"], r["status"]) for r in cli["rules"]] == [(rule["id"], "proposed")]


def test_paths_outside_the_archive_are_refused_as_tool_errors(workspace: Workspace) -> None:
    outside = workspace.root.parent / "secret.txt"
    outside.write_text("not for agents\n", encoding="utf-8")
    chapter_dir = next(workspace.store.glob("*/chapters"))
    (chapter_dir / "999-escape.md").symlink_to(outside)
    refs = {
        "traversal": "../secret.txt",
        "dotted": ".dsh-chapters/../../secret.txt",
        "absolute": str(outside),
        "symlink": f".dsh-chapters/{chapter_dir.relative_to(workspace.store)}/999-escape.md",
        "config": ".dsh-chapters/logs/chapters.log",
        "missing": ".dsh-chapters/nope/chapters/001-x.md",
    }

    async def work(session: ClientSession) -> dict[str, CallToolResult]:
        return {name: await _call(session, "chapters_read", path=ref) for name, ref in refs.items()}

    results = workspace.session(work)
    for name, result in results.items():
        message = text_of(result)
        assert result.is_error, (name, message)
        assert "next:" in message, (name, message)
        assert "not for agents" not in message
    for name in ("traversal", "dotted", "absolute"):
        assert "leaves the archive" in text_of(results[name])
    assert "symlink that leaves" in text_of(results["symlink"])
    assert "not a chapter, rule or topic shard" in text_of(results["config"])
    assert "searched 1 roots" in text_of(results["missing"])


def test_an_empty_archive_answers_empty_and_bad_arguments_are_tool_errors(
    tmp_path: Path,
) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    env = {"DSH_HOME": str(tmp_path / "home"), "DSH_CHAPTERS_HARNESS_ID": "laptop",
           "HOME": str(tmp_path)}

    async def work(session: ClientSession) -> list[CallToolResult]:
        return [
            await _call(session, "chapters_search", query="anything"),
            await _call(session, "chapters_search", query=" "),
            await _call(session, "chapters_read", path="x.md", offset=-1),
            await _call(session, "chapters_rules"),
        ]

    empty, blank, negative, rules = with_session(root, env, work, errlog=tmp_path / "err.log")
    answer = structured(empty)
    assert answer["status"] == "empty" and answer["matches"] == [] and answer["total"] == 0
    assert "next:" in text_of(empty)
    assert blank.is_error and "nothing to search for" in text_of(blank)
    assert negative.is_error and "offset" in text_of(negative)
    assert structured(rules)["shown"] == 0
    assert not (root / ".dsh-chapters" / "rules").exists()  # readers write no archive file
