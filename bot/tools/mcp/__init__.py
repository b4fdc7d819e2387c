"""A team's own MCP servers: their tools as registry tools, behind the same approvals.

`config` reads the `mcpServers` file (`COUNTERSIGN_MCP_CONFIG`), `connection` keeps one
supervised session per server per process, `tools` turns a server's tools into `ToolSpec`s
and their results into what the model reads, and `servers` offers them to the registry while
their server is connected (docs/decisions/0042-mcp-client.md).
"""
