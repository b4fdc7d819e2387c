"""A hand-written handshake-era (2025-06-18) MCP server over stdio, with no SDK: an older third-party server.

It refuses `server/discover`, so a 2026-era client falls back to `initialize`. Its one tool,
`ask`, asks the client in the middle of the call, as servers of that era may: it sends an
`elicitation/create`, a `sampling/createMessage` and a `roots/list` request, waits for each
answer, then answers the call with the answers' error messages. Every message it receives
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


def handshake_entry(log: Path) -> dict[str, Any]:
    """This server's `mcpServers` entry (started from `ROOT`), every message it receives written to `log`."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.support.handshake_server"],
        "env": {"HANDSHAKE_LOG": str(log)},
        "cwd": str(ROOT),
    }


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


def main(log: Path) -> None:
    """Serve on stdin and stdout until stdin ends."""
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
            result = {"tools": [ASK]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "answers: " + "; ".join(_ask(log))}]}
        elif method == "ping":
            result = {}
        else:
            _send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}})
            continue
        _send({"jsonrpc": "2.0", "id": msg_id, "result": result})


if __name__ == "__main__":
    main(Path(os.environ["HANDSHAKE_LOG"]))
