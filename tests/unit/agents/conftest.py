"""Graph fixtures: test tools, a policy, and both checkpointers (memory and PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from bot.agents.review_agent import build_review_agent
from bot.approvals.mode import Mode
from bot.approvals.policy import DefaultPolicy
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.ledger import InMemoryLedger
from bot.tools.registry import ToolRegistry, ToolSpec
from tests.support.postgres import TestServer
from tests.support.scripted_model import ScriptedChatModel


class ToolLog:
    """What the test tools were called with, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []


@pytest.fixture
def tool_log() -> ToolLog:
    return ToolLog()


@pytest.fixture
def registry(tool_log: ToolLog) -> ToolRegistry:
    @tool
    async def lookup(query: str) -> str:
        """Look something up."""
        tool_log.calls.append(("lookup", {"query": query}))
        return f"found {query}"

    @tool
    async def send(to: str, body: str, urgent: bool = False) -> str:
        """Send a message to someone."""
        tool_log.calls.append(("send", {"to": to, "body": body, "urgent": urgent}))
        return f"sent to {to}"

    @tool
    async def explode(reason: str) -> str:
        """Always fails."""
        tool_log.calls.append(("explode", {"reason": reason}))
        raise RuntimeError(f"boom: {reason}")

    @tool
    async def wipe(target: str) -> str:
        """Never allowed."""
        tool_log.calls.append(("wipe", {"target": target}))
        return "wiped"

    return ToolRegistry(
        [
            ToolSpec(tool=lookup, default_mode=Mode.AUTO),
            ToolSpec(tool=send, default_mode=Mode.REVIEW),
            ToolSpec(tool=explode, default_mode=Mode.AUTO),
            ToolSpec(tool=wipe, default_mode=Mode.DENY),
        ]
    )


@pytest.fixture(params=["memory", "postgres"])
async def saver(request: pytest.FixtureRequest, pg_server: TestServer) -> AsyncIterator[Any]:
    """Each graph test runs on InMemorySaver and on AsyncPostgresSaver (a real server)."""
    if request.param == "memory":
        yield InMemorySaver()
        return
    url = await pg_server.create_database()
    try:
        async with open_database(
            DatabaseSettings(url=url, pool_max_size=3), run_migrations=False
        ) as db:
            yield db.savers[0]
    finally:
        await pg_server.drop_database(url)


@pytest.fixture
def make_graph(registry: ToolRegistry, saver: Any):
    def build(model: ScriptedChatModel, **kwargs: Any):
        return build_review_agent(
            model=model,
            tools=registry.tools(),
            policy=DefaultPolicy(registry),
            checkpointer=saver,
            ledger=kwargs.pop("ledger", InMemoryLedger()),
            **kwargs,
        )

    return build
