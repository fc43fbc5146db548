"""Every door of the archive, driven for real: the `chapters` CLI (in-process, through its
parser and the composition root), the MCP server through the real `mcp` client over stdio
(`chapters mcp` as an agent starts it), and the viewer's routes on the real Starlette app.

Each door answers `Answer(ok, text)`: whether it served the request, and every word it gave
back (a refusal included), so a test can say both "refused" and "never said X".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dsh_chapters.services.web_viewer import AppViewer
from dsh_chapters_web.server import make_app
from mcp import ClientSession
from starlette.testclient import TestClient

from tests.acceptance.steps_common import Machine
from tests.adapters.mcp.mcp_session import text_of, with_session

VIEWER_PORT = 8765
VIEWER_CSRF = "csrf-reliability-doors"


@dataclass(frozen=True)
class Answer:
    door: str
    ok: bool
    text: str


def cli(m: Machine, *argv: str) -> Answer:
    result = m.run(*argv)
    return Answer(f"chapters {' '.join(argv)}", result.code == 0, result.out + result.err)


def mcp(m: Machine, calls: Sequence[tuple[str, dict[str, Any]]], errlog: Path) -> list[Answer]:
    """Each (tool, arguments) called in one real MCP session on `m`."""

    async def work(session: ClientSession) -> list[Answer]:
        out = []
        for tool, arguments in calls:
            result = await session.call_tool(tool, arguments)
            text = text_of(result)
            if result.structured_content is not None:
                text += "\n" + json.dumps(result.structured_content)
            out.append(Answer(f"mcp {tool} {json.dumps(arguments)}", not result.is_error, text))
        return out

    answers: list[Answer] = with_session(m.workspace, m.env, work, errlog=errlog)
    return answers


def viewer(m: Machine, paths: Sequence[str]) -> list[Answer]:
    """GET each viewer route (`/chapter/<path>?line=N`, `/search?q=`, `/`) on box `m`."""
    app = make_app(AppViewer(m.app()), VIEWER_PORT, csrf=VIEWER_CSRF)
    out = []
    with TestClient(app, base_url=f"http://127.0.0.1:{VIEWER_PORT}",
                    follow_redirects=False) as client:
        for path in paths:
            response = client.get(path, headers={"Accept": "application/json"})
            out.append(Answer(f"viewer GET {path}", response.status_code == 200, response.text))
    return out


def chapter_route(path: str, line: int | None = None) -> str:
    route = "/chapter/" + quote(path)
    return route + (f"?line={line}" if line is not None else "")
