"""An MCP answer the client cannot read: the server ran the call, so its outcome is unknown, never "nothing ran".

The MCP SDK answers a call itself with a JSON-RPC `PARSE_ERROR` when the server's answer is not
valid JSON-RPC, and with `INVALID_REQUEST` when it is neither JSON nor SSE; both reach us like a
server's own refusal would, but the server did take the call. A real FastMCP server over
Streamable HTTP, whose `tools/call` answers are spoiled on their way out by an ASGI middleware.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastmcp import FastMCP
from langchain_core.messages import AIMessage

from tests.integration.tools.mcp.test_mcp_tools import connected, converse, registry_with, servers_for, tool_results
from tests.support.mcp_server import serve_http
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call

SPOILED: dict[str, tuple[bytes, bytes]] = {
    "not_json": (b"application/json", b"{this is not json"),
    "not_jsonrpc": (b"application/json", b'{"jsonrpc": "2.0", "id": 1, "result": 42}'),
    "other_type": (b"text/html", b"<html>oops</html>"),
}


def spoiling(content_type: bytes, body: bytes) -> Any:
    """An ASGI middleware that answers each `tools/call` with `body` of `content_type` once the server has run it."""

    def wrap(app: Any) -> Any:
        async def spoiled(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await app(scope, receive, send)
                return
            chunks: list[bytes] = []

            async def reading() -> dict[str, Any]:
                message = await receive()
                chunks.append(message.get("body", b""))
                return message

            async def sending(message: dict[str, Any]) -> None:
                if b'"tools/call"' not in b"".join(chunks):
                    await send(message)
                elif message["type"] == "http.response.start":
                    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
                    await send({**message, "headers": headers})
                elif not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": body})

            await app(scope, reading, sending)

        return spoiled

    return wrap


@pytest.mark.parametrize("spoil", list(SPOILED))
async def test_an_answer_that_cannot_be_read_leaves_the_outcome_unknown(tmp_path, db_url, spoil):
    """The server ran `pay` once; the model reads that the answer could not be read and the outcome is unknown."""
    seen: list[int] = []
    mcp = FastMCP("bank")

    @mcp.tool
    def pay(amount: int) -> str:
        """Pay `amount`."""
        seen.append(amount)
        return "paid"

    async with serve_http(mcp, json_response=True, wrap=spoiling(*SPOILED[spoil])) as url:
        servers = servers_for(tmp_path, {"bank": {"url": url}})
        servers.start()
        try:
            await connected(servers, "bank")
            model = ScriptedChatModel(replies=[calls(tool_call("bank__pay", {"amount": 5})), AIMessage("unsure")])
            await asyncio.wait_for(
                converse(db_url, registry_with(servers), model, "/countersign policy bank__pay auto", "pay"), 120
            )
        finally:
            await servers.aclose(10)
    assert seen == [5]
    [result] = tool_results(model)
    assert result.status == "error"
    assert "could not be read" in str(result.content)
    assert "Whether it took effect is unknown" in str(result.content)
    assert "nothing ran" not in str(result.content)
