"""Graph fixtures: test tools, a policy, and both checkpointers (memory and PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from bot.agents.review_agent import build_review_agent
from bot.policy.review import DefaultPolicy
from bot.settings import DatabaseSettings
from bot.storage.database import open_database
from bot.tools.ledger.memory import InMemoryLedger
from bot.tools.registry import ToolRegistry
from tests.support.postgres import TestServer
from tests.support.scripted_model import ScriptedChatModel
from tests.support.tools import ToolLog, make_test_registry


@pytest.fixture
def tool_log() -> ToolLog:
    return ToolLog()


@pytest.fixture
def registry(tool_log: ToolLog) -> ToolRegistry:
    return make_test_registry(tool_log)


@pytest.fixture(params=["memory", "postgres"])
async def saver(request: pytest.FixtureRequest, pg_server: TestServer) -> AsyncIterator[Any]:
    """Each graph test runs on InMemorySaver and on AsyncPostgresSaver (a real server)."""
    if request.param == "memory":
        yield InMemorySaver()
        return
    url = await pg_server.create_database()
    try:
        async with open_database(DatabaseSettings(url=url, pool_max_size=3), run_migrations=False) as db:
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
