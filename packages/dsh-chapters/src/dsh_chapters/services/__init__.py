"""The application's use cases over the composed `App`, one module per family.

The CLI commands, the hooks, the MCP archive and the viewer are thin callers of these: they
parse, call a service, and present the result in their own words (ARCHITECTURE.md, "Services").

- `archive`: read a transcript, archive it, and the one after-archive pipeline
- `library`: the chapters of the store (list, resolve, read)
- `search`: search, the index, topic merge, artifact reading
- `rules`: propose, approve, revoke, and the notice
- `pool`: link, sync, the pool's status
- `enrich`: the enrichment queue and its drains
- `agents`: the archive an agent reaches through MCP, and the agent's session
- `status`: the sections of `chapters status`
- `scan`: the current redaction rules over the store, the mirror and the pool's history
"""
