"""The application's use cases over the composed app, one module per family: the CLI, the
hooks, the MCP archive and the viewer call these and present the results in their own words."""
