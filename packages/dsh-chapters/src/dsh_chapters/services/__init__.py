"""Application services: one module per use-case family, called by the CLI, hooks and MCP."""
