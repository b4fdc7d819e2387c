"""MCP elicitation: a server's question in the middle of a call, put to the person who asked for the call.

`forms` reads a question into a form or a link and checks a person's answer against it.
"""
