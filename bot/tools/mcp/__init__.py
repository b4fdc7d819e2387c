"""A team's own MCP servers: their tools as registry tools, behind the same approvals.

`config` reads the `mcpServers` file (`COUNTERSIGN_MCP_CONFIG`), `connection` keeps one
supervised session per server per process (`stderr` turns a stdio server's stderr into bounded
log lines), `tools` turns a server's tools into `ToolSpec`s and their results into what the
model reads, `gemini_schema` rewrites their input schemas into parameters Gemini accepts, and
`servers` offers them to the registry while their server is connected
(docs/decisions/0042-mcp-client.md). `pins` holds each tool's definition as first seen and
keeps a changed one from running until an admin accepts it
(docs/decisions/0043-pinned-mcp-definitions.md).
"""
