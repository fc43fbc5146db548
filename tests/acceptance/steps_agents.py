"""Steps of `agent_memory.feature`: Claude Code's hooks and the MCP server, on two machines.

A Claude Code session is the repository's Claude Code fixture (54 turns), written to a live
transcript that grows as Claude Code would write it. Hooks get Claude Code's payloads on stdin
through `chapters hook`; the agent on the other machine is the real `mcp` client over stdio.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession
from pytest_bdd import given, parsers, then, when

from tests.acceptance.steps_common import CliResult, Machine, MakeMachine
from tests.adapters.mcp.mcp_session import structured, with_session
from tests.fixtures import (
    CLAUDE_CODE_SESSION,
    CLAUDE_CODE_SESSION_ID,
    CLAUDE_CODE_TOOL_RESULTS,
    CLAUDE_CODE_TURNS,
)


@dataclass
class ClaudeSession:
    machine: Machine
    transcript: Path

    def grow_to(self, fraction: float) -> None:
        records = CLAUDE_CODE_SESSION.read_bytes().splitlines(keepends=True)
        self.transcript.write_bytes(b"".join(records[: round(len(records) * fraction)]))

    def hook(self, event: str, **extra: str) -> CliResult:
        payload = {"session_id": CLAUDE_CODE_SESSION_ID, "transcript_path": str(self.transcript),
                   "cwd": str(self.machine.workspace), "hook_event_name": event, **extra}
        result = self.machine.run("hook", stdin=json.dumps(payload))
        assert result.code == 0, result.text  # a hook never breaks the agent
        return result


def hook_log(machine: Machine) -> list[dict[str, Any]]:
    path = machine.store / "logs" / "chapters.log"
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    # Claude Code's events only (the background half of PreCompact logs "after-archive").
    return [e for e in entries if e.get("event") == "hook"
            and e.get("hookEvent") in ("SessionStart", "PreCompact", "SessionEnd")]


@given(parsers.parse('machine "{name}" waits up to {seconds:d} seconds for its session-start '
                     "pull"))
def pull_budget(make_machine: MakeMachine, name: str, seconds: int) -> None:
    make_machine(name).set_config(f"sessionStartPullTimeoutMs = {seconds * 1000}")


@when(parsers.parse('a Claude Code session on machine "{name}" compacts after half of its '
                    "transcript"), target_fixture="claude_session")
def session_compacts(make_machine: MakeMachine, name: str) -> ClaudeSession:
    machine = make_machine(name)
    live = machine.workspace.parent / "claude-projects" / CLAUDE_CODE_SESSION.name
    shutil.copytree(CLAUDE_CODE_TOOL_RESULTS, live.parent / live.stem / "tool-results")
    session = ClaudeSession(machine, live)
    session.grow_to(0.5)
    session.hook("PreCompact", trigger="auto", custom_instructions="")
    return session


@when(parsers.parse('that Claude Code session on machine "{name}" ends'))
def session_ends(claude_session: ClaudeSession, name: str) -> None:
    assert claude_session.machine.name == name
    claude_session.grow_to(1.0)
    claude_session.hook("SessionEnd", reason="prompt_input_exit")


@then(parsers.parse('the hooks archived every turn of that session on machine "{name}" exactly '
                    "once"))
def archived_once(claude_session: ClaudeSession, name: str) -> None:
    compact, end = hook_log(claude_session.machine)[-2:]
    assert (compact["hookEvent"], end["hookEvent"]) == ("PreCompact", "SessionEnd")
    assert 0 < compact["turnsArchived"] < CLAUDE_CODE_TURNS
    assert end["turnsAlready"] == compact["turnsArchived"]
    assert compact["turnsArchived"] + end["turnsArchived"] == CLAUDE_CODE_TURNS
    assert end["sync"] == "done", end  # SessionEnd pushed to the pool


@when(parsers.parse('a new Claude Code session starts on machine "{name}"'),
      target_fixture="session_start")
def new_session_starts(make_machine: MakeMachine, name: str) -> dict[str, Any]:
    machine = make_machine(name)
    payload = {"session_id": "b-session-1", "transcript_path": str(machine.workspace / "new.jsonl"),
               "cwd": str(machine.workspace), "hook_event_name": "SessionStart",
               "source": "startup"}
    result = machine.run("hook", stdin=json.dumps(payload))
    assert result.code == 0, result.text
    assert hook_log(machine)[-1]["sync"] == "done"  # the pull finished within its budget
    envelope: dict[str, Any] = json.loads(result.out)
    envelope["machine"] = machine
    return envelope


@then("its SessionStart notice names the project")
def notice_names_project(session_start: dict[str, Any]) -> None:
    machine: Machine = session_start["machine"]
    output = session_start["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    project_key = machine.app().identity.project_key
    assert f"Project: widgets · {project_key}" in output["additionalContext"]


@when(parsers.parse('an agent on machine "{name}" calls chapters_search for "{query}"'),
      target_fixture="mcp_search")
def agent_searches(make_machine: MakeMachine, name: str, query: str) -> dict[str, Any]:
    machine = make_machine(name)

    async def work(session: ClientSession) -> Any:
        return await session.call_tool("chapters_search", {"query": query, "maxTokens": 800})

    answer = structured(with_session(machine.workspace, machine.env, work,
                                     errlog=machine.workspace.parent / "mcp-stderr.log"))
    return {"machine": machine, "answer": answer}


@then(parsers.parse('the answer holds a chapter of machine "{writer}"\'s session'))
def answer_holds_writers_chapter(mcp_search: dict[str, Any], make_machine: MakeMachine,
                                 writer: str) -> None:
    answer = mcp_search["answer"]
    assert answer["status"] == "ok" and answer["shown"] >= 1, answer
    hits = [m for m in answer["matches"]
            if m["kind"] == "chapter" and f"/{CLAUDE_CODE_SESSION_ID}/" in m["path"]]
    assert hits, answer
    # B's own agent answered from the pool's mirror: A's chapter came through the pool.
    assert answer["door"] == "mirror" and hits[0]["path"].startswith(".dsh-knowledge/")
    mcp_search["hit"] = hits[0]
    mcp_search["writer"] = make_machine(writer)


@then(parsers.parse('chapters_read on machine "{name}" returns that chapter verbatim as machine '
                    '"{writer}" archived it'))
def read_verbatim(mcp_search: dict[str, Any], name: str, writer: str) -> None:
    machine: Machine = mcp_search["machine"]
    path = mcp_search["hit"]["path"]

    async def work(session: ClientSession) -> list[dict[str, Any]]:
        pages = [structured(await session.call_tool("chapters_read", {"path": path}))]
        while pages[-1]["nextOffset"] is not None:  # page on, as the answer says
            pages.append(structured(await session.call_tool(
                "chapters_read", {"path": path, "offset": pages[-1]["nextOffset"]})))
        return pages

    pages = with_session(machine.workspace, machine.env, work,
                         errlog=machine.workspace.parent / "mcp-stderr.log")
    source: Machine = mcp_search["writer"]
    original = source.store / CLAUDE_CODE_SESSION_ID / "chapters" / Path(path).name
    lines = original.read_text(encoding="utf-8").splitlines()
    assert [line for page in pages for line in page["lines"]] == lines
    assert {page["totalLines"] for page in pages} == {len(lines)}
