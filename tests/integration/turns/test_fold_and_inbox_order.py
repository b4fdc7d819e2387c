"""A message still waiting in the inbox when a later turn folds it into the summary is not asked again."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from bot.agents.prompts import SUMMARY_INSTRUCTIONS
from bot.turns.inbox import inbox_key
from tests.integration.upkeep.test_unfinished_work import FlakyPlatform, inbox_status, upkeep_pass
from tests.support.scripted_model import ScriptedChatModel
from tests.support.service import message, open_service
from tests.support.tools import ToolLog, make_test_registry

BIG = "word " * 2_000
"""About 10 000 bytes: one such message is over a 2000-token budget."""


@pytest.fixture
def registry():
    return make_test_registry(ToolLog())


def is_summary_request(messages: Sequence[BaseMessage]) -> bool:
    return messages[0].text.startswith(SUMMARY_INSTRUCTIONS[:40])


async def test_an_undelivered_answer_folded_by_the_next_turn_is_not_asked_again(db_url, registry):
    """A's answer cannot be posted (platform down), B arrives once it is back and its turn folds A:
    A's answer is posted once, and the model is never asked A again."""
    asked: list[str] = []

    def script(messages: list[BaseMessage]) -> AIMessage:
        if is_summary_request(messages):
            return AIMessage("summary: alice asked a long question")
        asked.append(messages[-1].text[:10])
        return AIMessage(f"answer to {messages[-1].text[:10]}")

    model = ScriptedChatModel(script=script)
    platform = FlakyPlatform(down=True)
    first = message("A " + BIG, message_id="7.1")
    async with open_service(db_url, model, registry, platform, context_tokens=2_000) as h:
        await h.service.handle_message(first)
        assert await inbox_status(h, inbox_key(first) or "") == "accepted"  # its answer is still due
        platform.down = False
        await h.service.handle_message(message("B short", message_id="7.2"))
        await upkeep_pass(h)  # the upkeep takes up A's inbox entry
        assert await inbox_status(h, inbox_key(first) or "") == "handled"
    answers = [text for _, text in platform.answers]
    assert asked == ["A word wor", "B short"], asked
    assert answers == ["answer to A word wor", "answer to B short"], answers
