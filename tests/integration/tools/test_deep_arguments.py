"""Tool-call arguments nested deeper than an edit may be: answered at once, no card, nothing runs (docs/decisions/0010).

Real PostgreSQL (the checkpoint and the ledger), the real core, a real FastMCP server over
Streamable HTTP, a scripted model.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from bot.tools.canonical import MAX_ARGS_DEPTH
from bot.tools.mcp.servers import McpServers
from bot.tools.registry import ToolRegistry
from tests.integration.tools.mcp.test_mcp_tools import connected, servers_for
from tests.support.mcp_server import build_server, serve_http
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import message, open_service
from tests.support.tools import ToolLog, make_test_registry

DEPTH = 250


def nested_dicts(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_lists(depth: int) -> list[Any]:
    value: list[Any] = [1]
    for _ in range(depth):
        value = [value]
    return value


def _answering_twice(first: AIMessage) -> ScriptedChatModel:
    """The model asks for `first`, answers the tool's result, then answers the next message."""

    def script(messages) -> AIMessage:
        last = messages[-1]
        if last.type == "tool":
            return AIMessage(f"tool said: {last.text}")
        if last.text == "again":
            return AIMessage("still here")
        return first

    return ScriptedChatModel(script=script)


async def _nothing_asked_or_run(h) -> bool:
    counts = await h.database.pool.fetchrow(
        "SELECT (SELECT count(*) FROM reviews) AS reviews, (SELECT count(*) FROM approvals) AS approvals, "
        "(SELECT count(*) FROM tool_runs) AS runs"
    )
    return (counts["reviews"], counts["approvals"], counts["runs"]) == (0, 0, 0)


async def _refused_then_carries_on(db_url: str, registry: ToolRegistry, call: dict[str, Any]) -> str:
    model = _answering_twice(calls(call))
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("go"))
        await h.service.tasks.join()
        assert await _nothing_asked_or_run(h)
        assert h.platform.cards == {}
        first = h.platform.answers[-1][1]
        await h.service.handle_message(message("again"))
        await h.service.tasks.join()
        assert h.platform.answers[-1][1] == "still here"
    [result] = [m for m in model.prompts[1] if isinstance(m, ToolMessage)]
    assert result.status == "error"
    return first


async def test_deeply_nested_arguments_of_a_builtin_tool_are_refused_in_words_and_the_thread_goes_on(db_url):
    """`send` with a body nested 250 dicts deep: no card, nothing runs, the model reads why, the next message is answered."""
    log = ToolLog()
    call = tool_call("send", {"to": "ana", "body": nested_dicts(DEPTH)})
    answer = await _refused_then_carries_on(db_url, make_test_registry(log), call)
    assert answer.startswith(
        f"tool said: Error: the arguments of send are nested more than {MAX_ARGS_DEPTH} levels deep"
    )
    assert "nobody was asked to approve it" in answer
    assert log.calls == []


async def test_deeply_nested_arguments_of_an_mcp_tool_are_refused_in_words_and_the_thread_goes_on(db_url, tmp_path):
    """An MCP call whose argument is lists nested 250 deep: the server sees nothing, no card, the thread goes on."""
    events: list[dict[str, Any]] = []
    async with serve_http(build_server(events.append)) as url:
        servers: McpServers = servers_for(tmp_path, {"notes": {"url": url}})
        servers.start()
        try:
            await connected(servers, "notes")
            registry = make_test_registry(ToolLog())
            registry.add_source(servers)
            call = tool_call("notes__create_note", {"title": nested_lists(DEPTH)})
            answer = await _refused_then_carries_on(db_url, registry, call)
        finally:
            await servers.aclose(10)
    assert answer.startswith(
        f"tool said: Error: the arguments of notes__create_note are nested more than {MAX_ARGS_DEPTH} levels deep"
    )
    assert [e for e in events if e["event"] == "call"] == []
