"""MCP tools' schemas through the real Gemini client (`GeminiChatModel.bind_tools`) to the Gemini stand-in."""

from __future__ import annotations

import copy
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastmcp import FastMCP
from fastmcp.tools import Tool, ToolResult
from langchain_core.tools import StructuredTool
from langchain_google_genai.chat_models import GoogleInvalidRequestError

from bot.agents.model import GeminiChatModel, build_chat_model, call_options
from bot.agents.model_errors import to_model_error
from bot.base.errors import ModelErrorKind
from bot.settings import GeminiSettings
from bot.tools.mcp.gemini_schema import declared_description, gemini_parameters
from bot.tools.registry import INPUT_SCHEMA
from tests.integration.tools.mcp.test_mcp_tools import WAIT_S, connected, servers_for
from tests.standins.gemini import GeminiRequest, GeminiStandIn, ScriptedResponder
from tests.support.mcp_server import serve_http
from tests.unit.tools.mcp.schema_corpus import (
    LINEAR_CREATE_ISSUE,
    PYDANTIC_CREATE_ORDER,
    UNUSABLE,
    USABLE,
    ZOD_NOTION_SEARCH,
    ZOD_ROOT_UNION,
    Usable,
)

KEY = "schemas-key"


async def _never(**_: Any) -> str:
    raise AssertionError("the model only declares this tool")


def mcp_tool(name: str, description: str, args_schema: dict[str, Any]) -> StructuredTool:
    """A LangChain tool with a JSON Schema dict as its arguments, as an MCP tool is."""
    return StructuredTool(name=name, description=description, args_schema=args_schema, coroutine=_never)


def declared_schema(request: GeminiRequest, name: str) -> dict[str, Any]:
    declaration = request.function_declaration(name)
    assert declaration is not None
    assert "parameters" not in declaration
    schema = declaration.get("parametersJsonSchema", declaration.get("parameters_json_schema"))
    assert isinstance(schema, dict)
    return schema


@pytest.fixture
async def gemini() -> AsyncIterator[tuple[GeminiStandIn, GeminiChatModel, GeminiSettings]]:
    async with GeminiStandIn(ScriptedResponder(default="ok"), api_key=KEY) as server:
        settings = GeminiSettings(api_key=KEY, base_url=server.base_url, max_attempts=1)
        model = build_chat_model(settings)
        yield server, model, settings
        await model.aclose()


@pytest.mark.parametrize("entry", USABLE, ids=lambda entry: entry.tool)
async def test_the_rewritten_schema_reaches_gemini_unharmed(gemini, entry: Usable):
    """The stand-in receives exactly what gemini_parameters returned (root notes in the description) and answers."""
    server, model, settings = gemini
    parameters = gemini_parameters(entry.schema)
    before = copy.deepcopy(parameters)
    tool = mcp_tool(entry.tool, declared_description("The server's words.", parameters), parameters)

    reply = await model.bind_tools([tool], **call_options(settings)).ainvoke("hi")

    assert reply.text == "ok"
    [request] = server.requests
    assert declared_schema(request, entry.tool) == {k: v for k, v in parameters.items() if k != "description"}
    assert request.function_declaration(entry.tool)["description"] == declared_description(
        "The server's words.", parameters
    )
    assert parameters == before


async def test_root_notes_reach_the_model_only_through_the_tools_description(gemini):
    """langchain-core replaces a dict schema's root description, so declared_description carries it."""
    server, model, settings = gemini
    parameters = gemini_parameters(ZOD_ROOT_UNION.schema)
    plain = mcp_tool("plain", "Find an event.", parameters)
    described = mcp_tool("described", declared_description("Find an event.", parameters), parameters)

    await model.bind_tools([plain, described], **call_options(settings)).ainvoke("hi")

    [request] = server.requests
    assert request.function_declaration("plain")["description"] == "Find an event."
    assert request.function_declaration("described")["description"] == (
        "Find an event.\n\nTakes one of these sets of arguments: (event_id) or (title)."
    )
    assert "description" not in declared_schema(request, "described")


async def test_one_raw_schema_fails_every_call_and_the_rewritten_ones_pass(gemini):
    """Raw server schemas make the whole request a 400 (tools refused); rewritten, all of them are declared."""
    server, model, settings = gemini
    harmless = mcp_tool("slack__post", "Post.", {"type": "object", "properties": {"text": {"type": "string"}}})
    raw = [mcp_tool(entry.tool, "Raw.", entry.schema) for entry in USABLE]
    rewritten = [mcp_tool(entry.tool, "Rewritten.", gemini_parameters(entry.schema)) for entry in USABLE]

    with pytest.raises(GoogleInvalidRequestError) as refused:
        await model.bind_tools([harmless, *raw], **call_options(settings)).ainvoke("hi")
    reply = await model.bind_tools([harmless, *rewritten], **call_options(settings)).ainvoke("hi")

    assert to_model_error(refused.value).kind is ModelErrorKind.TOOLS_REFUSED
    assert [request.status_code for request in server.requests] == [400, 200]
    assert reply.text == "ok"
    assert server.requests[1].declared_function_names == ["slack__post", *(entry.tool for entry in USABLE)]


class ListedAsIs(Tool):
    """A FastMCP tool listed with exactly the input schema it was given (as a zod or Go server lists it)."""

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(content="done")


async def test_a_real_servers_tools_are_rewritten_or_left_out_and_the_model_still_answers(gemini, tmp_path, caplog):
    """Over Streamable HTTP: raw zod and pydantic schemas reach Gemini rewritten, the tool Gemini cannot take is left
    out with one warning naming it and why, arguments stay checked against the server's own schema, and the call succeeds."""
    server, model, settings = gemini
    listed = {
        "create_issue": LINEAR_CREATE_ISSUE,
        "create_order": PYDANTIC_CREATE_ORDER,
        "search": ZOD_NOTION_SEARCH,
        # MCP requires `type: object` at the root (a listing without it fails as a whole).
        "find_event": Usable("find_event", {**ZOD_ROOT_UNION.schema, "type": "object"}),
    }
    unusable = next(entry for entry in UNUSABLE if entry.tool == "azure__get_resource")
    mcp = FastMCP("corpus")
    for upstream, entry in listed.items():
        mcp.add_tool(ListedAsIs(name=upstream, description="From the server.", parameters=entry.schema))
    mcp.add_tool(ListedAsIs(name="get_resource", description="From the server.", parameters=unusable.schema))

    with caplog.at_level(logging.WARNING):
        async with serve_http(mcp) as url:
            servers = servers_for(tmp_path, {"corpus": {"url": url}})
            servers.start()
            try:
                await connected(servers, "corpus")
                await servers.wait_until(lambda: len(servers.specs()) == len(listed), WAIT_S)
                specs = {spec.tool.name: spec for spec in servers.specs()}
                reply = await model.bind_tools(
                    [spec.tool for spec in specs.values()], **call_options(settings)
                ).ainvoke("hi")
            finally:
                await servers.aclose(10)

    assert reply.text == "ok"
    [request] = server.requests
    assert sorted(request.declared_function_names) == [f"corpus__{upstream}" for upstream in sorted(listed)]
    for upstream, entry in listed.items():
        parameters = gemini_parameters(entry.schema)
        assert declared_schema(request, f"corpus__{upstream}") == {
            key: value for key, value in parameters.items() if key != "description"
        }
        assert specs[f"corpus__{upstream}"].tool.metadata[INPUT_SCHEMA] == entry.schema
    assert request.function_declaration("corpus__find_event")["description"] == (
        "From the server.\n\nTakes one of these sets of arguments: (event_id) or (title)."
    )
    left_out = [record.getMessage() for record in caplog.records if "is left out" in record.getMessage()]
    assert left_out == [
        "MCP tool corpus__get_resource is left out: its input schema cannot be offered to the model: its argument "
        "'api-version' has a name Gemini refuses (an argument name starts with a letter or an underscore and has at "
        "most 64 letters, digits and underscores)"
    ]
