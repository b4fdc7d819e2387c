"""The rules run against a `PinStore`: what the MCP supervisor and the admin commands call.

- `observe` after every `tools/list` of a server (each poll, each reconnect): it records what
  the listing changes and returns which tools to offer and the admins' message to send, if any.
- `check_call` just before a call is sent: the refusal the model reads, or None.
- `accept_server` for `/countersign mcp accept <server>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from bot.base.conversation import Actor
from bot.tools.mcp.pins.definitions import ToolDefinition
from bot.tools.mcp.pins.rules import (
    AcceptPlan,
    AcceptRefusal,
    AcceptRefused,
    HoldNotice,
    Review,
    call_refusal,
    plan_accept,
    review_listing,
)
from bot.tools.mcp.pins.store import PinStore


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What one listing of a server means now.

    Attributes:
        review: the judgement (`review.offered` are the tools to offer the model until the
            next listing; `review.held` those to leave out).
        notice: the admins' message about newly held tools, claimed by this call: send it
            (once; no other worker or replica will). None: nothing new to tell.
    """

    review: Review
    notice: HoldNotice | None = None


async def observe(store: PinStore, server: str, listed: Sequence[ToolDefinition]) -> Observation:
    """Judge a server's listing against its pins, record what changed, claim the admins' message.

    On the server's first sight its tools are pinned (audited) and offered. Otherwise held
    definitions are recorded (so that every worker and replica refuses them, across
    restarts), holds of tools listed as pinned again are lifted, and the message about held
    definitions nobody told the admins about yet is claimed (audited as `held`). A first sight
    lost to another worker's is judged again against the winner's pins.

    Args:
        store: the pin store.
        server: the server's key.
        listed: every tool it lists now (`ToolDefinition.from_listing` of each `tools/list` entry).

    Raises:
        DuplicateToolError: the listing names a tool twice (offer none of the server's tools).
        ValueError: a definition of another server.
        Exception: the store's, when it cannot be reached (nothing to offer then either).
    """
    state = await store.load(server)
    review = review_listing(state, listed)
    if review.first_sight:
        if await store.record_first_sight(server, review.pin):
            return Observation(review=review)
        state = await store.load(server)  # another worker saw it first: its pins decide
        review = review_listing(state, listed)
    if review.hold or review.release:
        await store.record_holds(server, hold=review.hold, release=review.release)
    claimed = await store.claim_notice(server, review.notify) if review.notify else ()
    notice = (
        HoldNotice(
            server=server,
            changes=tuple(tool.change for tool in claimed),
            definitions=tuple(tool.definition for tool in claimed),
        )
        if claimed
        else None
    )
    return Observation(review=review, notice=notice)


async def check_call(store: PinStore, definition: ToolDefinition) -> str | None:
    """Why a call of this tool must not be sent, for the model (`bot.agents.prompts.MCP_HELD_CALL`); None when it may.

    Reads the store for every call, so a hold recorded by any worker or replica refuses it.

    Args:
        store: the pin store.
        definition: the tool's definition as this process last listed it.
    """
    return call_refusal(await store.load(definition.server), definition)


async def accept_server(
    store: PinStore, server: str, listed: Sequence[ToolDefinition], actor: Actor
) -> AcceptPlan | AcceptRefused:
    """Accept a server's held definitions for `/countersign mcp accept <server>` (the admin check is the caller's).

    Pins exactly the held definitions the admins were shown, and refuses when the server lists
    anything else by now: such a listing is observed at once (held, audited), and the refusal
    carries the admins' message about it in `notice`, to be sent like any other.

    Args:
        store: the pin store.
        server: the server's key.
        listed: every tool the server lists now; empty when it cannot be listed now (the held
            definitions are then pinned as shown, and its next listing is judged against them).
        actor: the admin.

    Returns:
        The plan carried out (its `changes` are the diff to show), or why nothing was pinned.

    Raises:
        DuplicateToolError, ValueError: as `observe`.
    """
    state = await store.load(server)
    outcome = plan_accept(state, listed)
    if isinstance(outcome, AcceptRefused):
        if outcome.reason is AcceptRefusal.CHANGED_AGAIN:
            observation = await observe(store, server, listed)
            return replace(outcome, notice=observation.notice)
        return outcome
    if await store.accept(outcome, actor):
        return outcome
    return AcceptRefused(server=server, reason=AcceptRefusal.STALE, tools=tuple(sorted(outcome.shown)))
