"""An MCP server that asks for input Countersign does not give: the call is sent once, never again.

On the 2026-07-28 protocol a server answers `tools/call` with an `InputRequiredResult` (a
question, a request for sampling or roots, or only a `request_state`), expecting the call again
with the answers. Questions for a person are put to the requester
(`tests/integration/tools/mcp/elicitation/test_mcp_elicitation.py`, docs/decisions/0054-mcp-elicitation.md); sampling,
roots, a state-only answer and a question Countersign cannot show end the call, and the model and
the card get "outcome unknown" (docs/decisions/0048-mcp-input-required.md). On the handshake era
the server sends its own requests during the call; they are answered with errors and the call is
not sent again. What the server saw is read from the server's own record.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastmcp import FastMCP
from langchain_core.messages import AIMessage
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequests,
    InputRequiredResult,
    ListRootsRequest,
    SamplingMessage,
    TextContent,
)

from adapters.console import ConsoleChat, ConsolePlatform
from tests.integration.console.test_console_policies import Terminal
from tests.integration.tools.mcp.test_mcp_operations import sample
from tests.integration.tools.mcp.test_mcp_tools import connected, converse, registry_with, servers_for, tool_results
from tests.support.handshake_server import handshake_entry, read_log
from tests.support.mcp_server import serve_http
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import open_service

ASKS: dict[str, InputRequests] = {
    "state_only": {},
    "roots_and_sampling": {
        "roots": ListRootsRequest(),
        "confirm": ElicitRequest(
            params=ElicitRequestFormParams(
                message="Pay 100?", requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}}
            )
        ),
        "model": CreateMessageRequest(
            params=CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(type="text", text="hi"))], max_tokens=10
            )
        ),
    },
}
"""What the server asks for, by test id."""


def asking_server(seen: list[dict[str, Any]], asks: InputRequests) -> FastMCP:
    """A 2026-era server whose `pay` records the call, then answers it by asking for `asks` (and a state)."""
    mcp = FastMCP("bank")

    @mcp.tool
    async def pay(amount: int) -> str | InputRequiredResult:
        """Pay `amount`."""
        seen.append({"event": "call", "tool": "pay", "amount": amount})
        return InputRequiredResult(input_requests=asks or None, request_state="paid-once")

    return mcp


@pytest.mark.parametrize("ask", list(ASKS))
async def test_a_server_asking_for_input_gets_the_call_once_and_the_outcome_is_unknown(tmp_path, db_url, ask):
    """An `InputRequiredResult` ends the call: sent once, the model and the card hear the outcome is unknown."""
    seen: list[dict[str, Any]] = []
    counted = sample("countersign_mcp_call_errors_total", server="bank", kind="input_required")
    async with serve_http(asking_server(seen, ASKS[ask])) as url:
        servers = servers_for(tmp_path, {"bank": {"url": url}})
        servers.start()
        try:
            await connected(servers, "bank")
            model = ScriptedChatModel(replies=[calls(tool_call("bank__pay", {"amount": 100})), AIMessage("unsure")])
            out: list[str] = []
            platform = ConsolePlatform(write=out.append, operator="olga")
            async with open_service(db_url, model, registry_with(servers), platform) as h:
                chat = ConsoleChat(h.service, platform, read=Terminal("pay 100", "a").read, admin=h.admin)
                await asyncio.wait_for(chat.run(), 120)
                unknown = await h.database.pool.fetchval(
                    "SELECT outcome_unknown FROM approvals WHERE tool_name = 'bank__pay'"
                )
        finally:
            await servers.aclose(10)
    assert seen == [{"event": "call", "tool": "pay", "amount": 100}]
    [result] = tool_results(model)
    assert result.status == "error"
    assert "the server asked for input in the middle of the call" in str(result.content)
    assert "Whether it took effect is unknown" in str(result.content)
    assert unknown is True
    assert "may or may not have taken effect" in "\n".join(out)
    assert sample("countersign_mcp_call_errors_total", server="bank", kind="input_required") == counted + 1


UNSHOWABLE: InputRequests = {
    "confirm": ElicitRequest(
        params=ElicitRequestFormParams(
            message="Pay 100?",
            requested_schema={"type": "object", "properties": {"to": {"type": "object", "properties": {}}}},
        )
    )
}
"""A question outside MCP's restricted form schema (a nested object)."""


async def test_a_question_that_cannot_be_shown_ends_the_call_as_outcome_unknown(tmp_path, db_url):
    """A form Countersign cannot show is never asked nor answered: sent once, the model reads why, outcome unknown."""
    seen: list[dict[str, Any]] = []
    async with serve_http(asking_server(seen, UNSHOWABLE)) as url:
        servers = servers_for(tmp_path, {"bank": {"url": url}})
        servers.start()
        try:
            await connected(servers, "bank")
            model = ScriptedChatModel(replies=[calls(tool_call("bank__pay", {"amount": 100})), AIMessage("unsure")])
            await converse(db_url, registry_with(servers), model, "/countersign policy bank__pay auto", "pay")
        finally:
            await servers.aclose(10)
    assert len(seen) == 1
    [result] = tool_results(model)
    assert "asked the user a question Countersign cannot show" in str(result.content)
    assert "Whether it took effect is unknown" in str(result.content)


async def test_a_handshake_era_server_asking_mid_call_is_answered_with_errors_and_called_once(tmp_path, db_url):
    """An older server's elicitation, sampling and roots requests during a call get errors; the call is sent once."""
    log = tmp_path / "handshake.jsonl"
    servers = servers_for(tmp_path, {"old": handshake_entry(log)})
    servers.start()
    try:
        await connected(servers, "old")
        assert servers.statuses()["old"].protocol_version == "2025-06-18"
        model = ScriptedChatModel(replies=[calls(tool_call("old__ask", {})), AIMessage("done")])
        text = await converse(db_url, registry_with(servers), model, "ask", "a")
    finally:
        await servers.aclose(10)
    messages = read_log(log)
    [sent] = [m for m in messages if m.get("method") == "tools/call"]
    assert sent["params"]["name"] == "ask"
    answers = {m["id"]: m for m in messages if str(m.get("id", "")).startswith("q")}
    assert sorted(answers) == ["q0", "q1", "q2"] and all("error" in a for a in answers.values())
    assert "bot> done" in text
    [result] = tool_results(model)
    assert result.content == "answers: Elicitation not supported; Sampling not supported; List roots not supported"
