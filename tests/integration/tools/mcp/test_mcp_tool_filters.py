"""Offering only some MCP tools: `includeTools` / `excludeTools`, and the limit on the tools the model is offered.

Real FastMCP servers over Streamable HTTP, the real core on a real PostgreSQL (its pin store),
the real Gemini client against the Gemini stand-in, which refuses a request declaring more than
512 functions as Google does. What the model was offered is read from the requests the stand-in
received; what the server ran, from the server's own record of its calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from fastmcp import FastMCP
from langchain_google_genai.chat_models import GoogleInvalidRequestError

from adapters.words.mcp import overview_text
from bot.admin.commands import ShowMcp
from bot.admin.views import McpOverview
from bot.agents.model import build_chat_model, call_options
from bot.settings import GeminiSettings
from tests.integration.tools.mcp.test_mcp_gemini_schemas import ListedAsIs
from tests.integration.tools.mcp.test_mcp_tools import WAIT_S, connected, registry_with, servers_for
from tests.standins.gemini import call, text
from tests.support.gemini_service import gemini_core, model_notices
from tests.support.mcp_server import build_server, serve_http
from tests.support.recording_platform import RecordingPlatform
from tests.support.service import Harness, actor, message
from tests.support.tools import ToolLog, make_test_registry

FIXED = ["lookup", "send", "explode", "wipe"]
"""The test registry's own tools, offered first."""
NOTES = ["add", "create_note", "slow", "fail", "huge", "shout", "die"]
"""The test server's tools, in its listing order."""
ADMIN = "boss"


async def overview(h: Harness) -> str:
    """`/countersign mcp` as the terminal words it."""
    view = await h.admin.execute(actor(ADMIN), ShowMcp())
    assert isinstance(view, McpOverview)
    return overview_text(view, lambda s: s, datetime.isoformat, lambda s: s)


def notified(times: int) -> Callable[[], bool]:
    """A `McpServers.wait_until` check that holds once the servers told of `times` more changes (each listing tells)."""
    count = -1  # wait_until asks once before the first change

    def check() -> bool:
        nonlocal count
        count += 1
        return count >= times

    return check


def warnings(caplog: Any, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and words in r.getMessage()]


async def test_only_the_included_tools_are_offered_and_pinned_and_an_excluded_one_is_unknown(
    db_url, tmp_path: Path, caplog
):
    """includeTools minus excludeTools reach Gemini, nothing else is pinned or held, a call of another runs nothing."""
    seen: list[dict[str, Any]] = []
    async with serve_http(build_server(seen.append)) as url:
        entry = {"url": url, "includeTools": ["add", "create_note", "slow", "nope"], "excludeTools": ["slow"]}
        servers = servers_for(tmp_path, {"notes": entry}, poll_s=0.2)
        registry = registry_with(servers)
        platform = RecordingPlatform(admins={ADMIN})
        replies = [call("notes__slow", {"seconds": 1}), text("it is not there")]
        with caplog.at_level(logging.WARNING):
            async with gemini_core(
                db_url, registry, replies, mcp=servers, platform=platform, allow_undeclared_calls=True
            ) as (h, gemini):
                await connected(servers, "notes")
                await h.service.handle_message(message("wait a second"))
                await servers.wait_until(notified(3), WAIT_S)  # a few more listings: the typo is said once
                pins = await servers.pins("notes")
                shown = await overview(h)

    first, second = gemini.requests
    assert first.declared_function_names == [*FIXED, "notes__add", "notes__create_note"]
    [(name, answer)] = second.function_responses
    assert name == "notes__slow" and "notes__slow is not a valid tool" in str(answer)
    assert not [event for event in seen if event.get("event") == "call"]
    assert sorted(pins.pins) == ["add", "create_note"] and dict(pins.holds) == {}
    assert "5 tools left out by the file's includeTools/excludeTools" in shown
    assert "`notes__add`" in shown and "notes__slow" not in shown and "held" not in shown
    assert warnings(caplog, "includeTools") == [
        "MCP server notes does not list 'nope', which its includeTools names (a typo?); its tools are: 'add', "
        "'create_note', 'die', 'fail', 'huge', 'shout', 'slow'"
    ]
    assert model_notices(h) == []


async def test_a_tool_included_later_is_held_like_a_new_one(db_url, tmp_path: Path):
    """Pins first taken with a filter: a tool the file lets through later is new, so it is held, not offered."""
    async with serve_http(build_server(lambda event: None)) as url:
        for include, wanted in ((["add"], "notes__add"), (["add", "huge"], "notes__huge")):
            servers = servers_for(tmp_path, {"notes": {"url": url, "includeTools": include}}, poll_s=0.2)
            async with gemini_core(db_url, registry_with(servers), [], mcp=servers) as (h, gemini):
                await connected(servers, "notes")
                if wanted == "notes__huge":
                    await servers.wait_until(lambda servers=servers: bool(servers.held("notes")), WAIT_S)
                await h.service.handle_message(message("hello"))
                pins = await servers.pins("notes")
            assert gemini.requests[-1].declared_function_names == [*FIXED, "notes__add"]
    assert sorted(pins.pins) == ["add"] and sorted(pins.holds) == ["huge"]


async def test_over_the_limit_the_last_mcp_tools_are_left_out_and_the_model_still_answers(
    db_url, tmp_path: Path, caplog
):
    """With COUNTERSIGN_MAX_TOOLS at 7: the fixed tools, then the first server's first 3; the rest left out and said."""
    async with (
        serve_http(build_server(lambda event: None)) as first,
        serve_http(build_server(lambda event: None)) as second,
    ):
        servers = servers_for(tmp_path, {"notes": {"url": first}, "more": {"url": second}}, poll_s=30)
        registry = make_test_registry(ToolLog())
        registry.max_tools = 7
        registry.add_source(servers)
        platform = RecordingPlatform(admins={ADMIN})
        replies = [call("notes__fail", {"why": "x"}), text("that one is left out")]
        with caplog.at_level(logging.WARNING):
            async with gemini_core(
                db_url, registry, replies, mcp=servers, platform=platform, allow_undeclared_calls=True
            ) as (h, gemini):
                await connected(servers, "notes")
                await connected(servers, "more")
                await servers.wait_until(lambda: len(servers.offered("more")) == len(NOTES), WAIT_S)
                await h.service.handle_message(message("fail please"))
                shown = await overview(h)
                over = registry.over_limit()

    first_request, second_request = gemini.requests
    assert first_request.declared_function_names == [*FIXED, "notes__add", "notes__create_note", "notes__slow"]
    [(_, answer)] = second_request.function_responses
    assert "notes__fail is not available now: it is left out: the bot offers the model at most 7 tools" in str(answer)
    assert [answer for _, answer in h.platform.answers] == ["that one is left out"]
    assert over == {
        "notes": tuple(f"notes__{tool}" for tool in NOTES[3:]),
        "more": tuple(f"more__{tool}" for tool in NOTES),
    }
    assert (
        "4 tools left out, over the model's limit of 7 tools; use includeTools/excludeTools: "
        "`notes__fail`, `notes__huge`, `notes__shout`, `notes__die`"
    ) in shown
    assert (
        "7 tools left out, over the model's limit of 7 tools; use includeTools/excludeTools: "
        "`more__add`, `more__create_note`, `more__slow`, `more__fail`, `more__huge` and 2 more"
    ) in shown
    # Which server connected first decides the warnings on the way; the last one of each says where it ended.
    last = {line.split(":")[0]: line for line in warnings(caplog, "over the model's limit")}
    assert last == {
        f"MCP server {server}": f"MCP server {server}: {count} of its tools are left out, over the model's limit of 7 "
        "tools (COUNTERSIGN_MAX_TOOLS); offer fewer with includeTools/excludeTools in its entry"
        for server, count in (("notes", 4), ("more", 7))
    }


def big_server(count: int) -> FastMCP:
    """A server listing `count` tools, `t000`, `t001`, ...: more than Gemini takes in one request."""
    mcp = FastMCP("big")
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    for index in range(count):
        mcp.add_tool(ListedAsIs(name=f"t{index:03d}", description=f"Tool {index}.", parameters=schema))
    return mcp


async def test_a_server_listing_600_tools_leaves_model_calls_working(db_url, tmp_path: Path):
    """600 tools, over Gemini's 512: offered all, Google refuses every call; the bot offers 512 and the model answers."""
    async with serve_http(big_server(600)) as url:
        servers = servers_for(tmp_path, {"big": {"url": url}}, poll_s=30)
        registry = make_test_registry(ToolLog())  # the default limit: 512
        registry.add_source(servers)
        async with gemini_core(db_url, registry, [text("still here")], mcp=servers) as (h, gemini):
            await connected(servers, "big")
            await servers.wait_until(lambda: len(servers.offered("big")) == 600, WAIT_S)
            await h.service.handle_message(message("are you there?"))
            over = registry.over_limit()
            every = [spec.tool for spec in [*make_test_registry(ToolLog()), *servers.specs()]]
            settings = GeminiSettings(api_key="faults-key", base_url=gemini.base_url, max_attempts=1)
            model = build_chat_model(settings)
            try:
                refused = None
                try:
                    await model.bind_tools(every, **call_options(settings)).ainvoke("hi")
                except GoogleInvalidRequestError as exc:
                    refused = exc
            finally:
                await model.aclose()

    ours = gemini.requests[0]
    assert len(ours.declared_function_names) == 512 and ours.declared_function_names[-1] == "big__t507"
    assert [answer for _, answer in h.platform.answers] == ["still here"]
    assert model_notices(h) == []
    assert over["big"] == tuple(f"big__t{index:03d}" for index in range(508, 600))
    assert refused is not None and "At most 512 function declarations can be specified" in str(refused)
