"""MCP server for dsh-chapters: search, read, artifacts and rules for agents.

`build_server(archive)` / `serve_stdio(archive)` take an `AgentArchive` (the port in
`dsh_chapters_core.ports.agents`); the app builds one from its composed App.
"""

from dsh_chapters_mcp.__about__ import __version__

__all__ = ["__version__"]
