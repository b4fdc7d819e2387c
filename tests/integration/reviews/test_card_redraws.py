"""Redraws of one pause's cards held by the platform (`bot.reviews.cards.CardDesk.redraw`, decision 0030)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage

from bot.reviews.decisions import Approve
from bot.reviews.lifecycle import ApprovalStatus
from tests.support.barriers import wait_until
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, message, open_service


@dataclass
class _SecondCardHeld(RecordingPlatform):
    """The first edit of one card waits until `let_go` (a 429 retried after its Retry-After, say)."""

    let_go: asyncio.Event = field(default_factory=asyncio.Event)
    slow_ref: str | None = None
    held: bool = False

    async def update_card(self, conversation, card_ref, card):
        if card_ref == self.slow_ref and not self.held:
            self.held = True
            await self.let_go.wait()
        await super().update_card(conversation, card_ref, card)


def _two_calls() -> ScriptedChatModel:
    return ScriptedChatModel(
        replies=[
            calls(tool_call("send", {"to": "bob", "body": "hi"}), tool_call("send", {"to": "eve", "body": "hi"})),
            AIMessage("both sent"),
        ]
    )


async def test_an_older_redraw_held_by_the_platform_does_not_land_after_a_newer_one(db_url, registry, tool_log):
    """Card 2 is approved and its redraw (which redraws card 1, for Approve all) is held by the platform;
    card 1 is approved and the run goes on. When the platform lets the first redraw go, card 1 must
    still show approved, not the pending state that redraw read before (breaker's pass)."""
    platform = _SecondCardHeld()
    async with open_service(db_url, _two_calls(), registry, platform) as h:
        await h.service.handle_message(message("send both"))
        first_ref, second_ref = sorted(platform.cards, key=lambda ref: platform.cards[ref].position)
        first, second = (platform.cards[ref].approval for ref in (first_ref, second_ref))
        platform.slow_ref = second_ref
        await h.service.decide(second.id, actor(), Approve())
        await wait_until(lambda: platform.held, "the second card's redraw held by the platform")
        await h.service.decide(first.id, actor(), Approve())
        await wait_until(lambda: any(text == "both sent" for _, text in platform.answers), "the run resumed")
        platform.let_go.set()
        await h.service.tasks.join()
    assert platform.cards[first_ref].approval.status is ApprovalStatus.APPROVED
    assert platform.cards[second_ref].approval.status is ApprovalStatus.APPROVED
    assert len(tool_log.calls) == 2
