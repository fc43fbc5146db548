"""Drive `chapters mcp` with the real `mcp` client: `ClientSession` over stdio, spawning
`python -m dsh_chapters -C <workspace> mcp` with the machine's own environment."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

T = TypeVar("T")


def server_parameters(workspace: Path, env: Mapping[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dsh_chapters", "-C", str(workspace), "mcp"],
        env=dict(env),
        cwd=str(workspace),
    )


def with_session(
    workspace: Path,
    env: Mapping[str, str],
    work: Callable[[ClientSession], Awaitable[T]],
    *,
    errlog: Path,
) -> T:
    """Spawn the server, initialize a client session, run `work`, close everything."""

    async def main() -> T:
        with errlog.open("a", encoding="utf-8") as err:
            async with (
                stdio_client(server_parameters(workspace, env), errlog=err) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await work(session)

    return anyio.run(main)


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert isinstance(data, dict), data
    # The text block is what a model reads; the structured content is the JSON contract.
    json.dumps(data)
    return data
