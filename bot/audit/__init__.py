"""The audit log: entries (who did what to which tool call) and their append-only store."""
