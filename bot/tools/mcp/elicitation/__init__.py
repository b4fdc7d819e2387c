"""MCP elicitation: a server's question in the middle of a call, put to the person who asked for the call.

`forms` reads a question into a form or a link and checks a person's answer against it;
`rounds` turns a server's `InputRequiredResult` into a question pause of the tool node and the
answers into the next round's `input_responses`; `store` keeps the questions (a port, PostgreSQL
and in memory); `desk` stores, shows, answers, expires and stops them; `expiry` is their sweeper
(docs/decisions/0054-mcp-elicitation.md).
"""
