"""A hand-written handshake-era (2025-06-18) MCP server over stdio, with no SDK: an older third-party server.

It refuses `server/discover`, so a 2026-era client falls back to `initialize`. Its tool `ask`
asks the client in the middle of the call, as servers of that era may: it sends an
`elicitation/create`, a `sampling/createMessage` and a `roots/list` request, waits for each
answer, then answers the call with the answers' error messages. `HANDSHAKE_TOOLS` (a JSON list)
adds listing entries sent verbatim, however malformed (any other JSON value is sent instead of
the list of tools, `ask` included); a call of one of them is answered
`ran <name> with <arguments as JSON>`. `HANDSHAKE_PAGE` (a number) splits the listing into pages
of that many entries, linked by `nextCursor`. Every message it receives
(requests, notifications, and the answers to its own requests) is one JSON line in the file
`HANDSHAKE_LOG` names, so a test asserts what the server saw.

Run as `python -m tests.support.handshake_server` from the repository's root (`handshake_entry`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ASK = {"name": "ask", "description": "Asks the client, then answers.", "inputSchema": {"type": "object"}}
QUESTIONS: list[dict[str, Any]] = [
    {
        "method": "elicitation/create",
        "params": {
            "message": "Pay 3?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        },
    },
    {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10},
    },
    {"method": "roots/list", "params": {}},
]
"""What `ask` sends the client, in order, each with id `q<index>`."""


def handshake_entry(log: Path, tools: Any = None, page: int = 0) -> dict[str, Any]:
    """This server's `mcpServers` entry (started from `ROOT`), every message it receives written to `log`.

    Args:
        log: the file of received messages.
        tools: listing entries after `ask`, sent as they are (need not be valid tools); a value
            that is not a list is sent as the listing's `tools` instead.
        page: entries per `tools/list` page; 0: one page.
    """
    extra = [] if tools is None else tools
    env = {"HANDSHAKE_LOG": str(log), "HANDSHAKE_TOOLS": json.dumps(extra), "HANDSHAKE_PAGE": str(page)}
    return {"command": sys.executable, "args": ["-m", "tests.support.handshake_server"], "env": env, "cwd": str(ROOT)}


def read_log(log: Path) -> list[dict[str, Any]]:
    """The messages the server received so far, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _receive(log: Path) -> dict[str, Any] | None:
    line = sys.stdin.readline()
    while line and not line.strip():
        line = sys.stdin.readline()
    if not line:
        return None
    message: dict[str, Any] = json.loads(line)
    with log.open("a", encoding="utf-8") as out:
        out.write(json.dumps(message) + "\n")
    return message


def _ask(log: Path) -> list[str]:
    """Send `QUESTIONS` one by one and wait for each answer; the answers' error messages (or "answered")."""
    answers: list[str] = []
    for index, question in enumerate(QUESTIONS):
        _send({"jsonrpc": "2.0", "id": f"q{index}", **question})
        while (message := _receive(log)) is not None and message.get("id") != f"q{index}":
            pass  # notifications in between
        if message is None:
            break
        answers.append(message["error"]["message"] if "error" in message else "answered")
    return answers


def _page(tools: Any, size: int, cursor: object) -> dict[str, Any]:
    """One `tools/list` result: the page at `cursor` (an entry's index as text; none: the first)."""
    if not isinstance(tools, list):
        return {"tools": tools}
    start = int(cursor) if isinstance(cursor, str) else 0
    end = start + size if size else len(tools)
    return {"tools": tools[start:end], **({"nextCursor": str(end)} if end < len(tools) else {})}


def main(log: Path, tools: Any, page: int) -> None:
    """Serve `tools` (in pages of `page` entries, 0: one page) on stdin and stdout until stdin ends."""
    while (message := _receive(log)) is not None:
        method, msg_id = message.get("method"), message.get("id")
        if method is None or msg_id is None:
            continue
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "handshake", "version": "0"},
            }
        elif method == "tools/list":
            result = _page(tools, page, (message.get("params") or {}).get("cursor"))
        elif method == "tools/call" and message["params"]["name"] == "ask":
            result = {"content": [{"type": "text", "text": "answers: " + "; ".join(_ask(log))}]}
        elif method == "tools/call":
            ran = f"ran {message['params']['name']} with {json.dumps(message['params'].get('arguments'))}"
            result = {"content": [{"type": "text", "text": ran}]}
        elif method == "ping":
            result = {}
        else:
            _send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}})
            continue
        _send({"jsonrpc": "2.0", "id": msg_id, "result": result})


if __name__ == "__main__":
    extra = json.loads(os.environ.get("HANDSHAKE_TOOLS", "[]"))
    main(
        Path(os.environ["HANDSHAKE_LOG"]),
        [ASK, *extra] if isinstance(extra, list) else extra,
        int(os.environ.get("HANDSHAKE_PAGE", "0")),
    )
