"""Every sentence that Slack, Discord and the terminal share, one module per feature.

`cards`, `decisions`, `batch`, `conversation`, `questions` (an MCP server's question), `mcp`
(pinned definitions, a card's origin line), `stop`, `admin` (`/countersign` replies), `model`
(the model's failures), `display` (excerpts, progress lines, durations); `markup` is the one
part that differs by platform. A platform's `messages` module keeps only the sentences whose
words or markup are its own (docs/decisions/0060-words-in-one-place.md).
"""
