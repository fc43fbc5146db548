"""Use-case services the entry points (CLI, MCP, web) call; each module is one family."""
