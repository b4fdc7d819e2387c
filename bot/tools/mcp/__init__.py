"""A team's own MCP servers' tools behind Countersign's approvals."""
