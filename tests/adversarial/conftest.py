"""Adversarial tests: the real bot (Bolt over HTTP, discord.py over a gateway) under attack.

They reuse the end-to-end fixtures, with one change: the Gemini stand-in answers from
`model_rules` first (rules a test adds to make the model propose what it needs), then from the
end-to-end agent script.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from tests.e2e.agent_script import agent_script
from tests.e2e.conftest import (  # noqa: F401 - fixtures, found by pytest by name
    bot,
    discord_api,
    discord_bot,
    events,
    settings,
    slack,
    target,
)
from tests.standins.gemini import GeminiReply, GeminiRequest, GeminiStandIn, ScriptedResponder
from tests.support.http_target import HttpTarget

ModelRule = Callable[[GeminiRequest], GeminiReply | None]


class ModelRules:
    """Rules tried before the agent script; the first one that answers wins."""

    def __init__(self) -> None:
        self.rules: list[ModelRule] = []

    def on(self, said: str, reply: GeminiReply) -> None:
        """Answer a user message that is exactly `said` (after the mention) with `reply`."""

        def rule(request: GeminiRequest) -> GeminiReply | None:
            if request.function_responses:
                return None
            return reply if (request.last_user_text or "").strip() == said else None

        self.rules.append(rule)

    def __call__(self, request: GeminiRequest) -> GeminiReply | None:
        for rule in self.rules:
            reply = rule(request)
            if reply is not None:
                return reply
        return None


@pytest.fixture
def model_rules() -> ModelRules:
    return ModelRules()


@pytest.fixture
async def gemini(target: HttpTarget, model_rules: ModelRules) -> AsyncIterator[GeminiStandIn]:  # noqa: F811
    responder = ScriptedResponder(rules=[model_rules, agent_script(target.url())])
    async with GeminiStandIn(responder, api_key="e2e-gemini-key") as server:
        yield server
