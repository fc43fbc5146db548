"""MCP server for dsh-chapters: search, read, artifacts and rules for agents."""

from dsh_chapters_mcp.__about__ import __version__

__all__ = ["__version__"]
