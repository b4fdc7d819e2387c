"""At-most-once, approved-only tool runs: a call is claimed just before its tool runs.

LangGraph re-runs a node from its top when a turn is resumed after a crash, so a tool node that
died half-way would run its calls again. The ledger makes the second attempt see the first
claim and answer the model instead of repeating a side effect (DESIGN.md: "no tool run
twice"). A call that went through review runs only if its approval is decided and the digest
of the arguments about to run equals the approved digest (docs/decisions/0006), at any depth: the tool
node of a subagent claims through the same ledger (docs/decisions/0008). A call its gate reviewed but for
which no approval is stored is refused: nothing decided it, unless it runs under a trust grant
(docs/decisions/0022), which the claim checks the same way: live, and binding exactly the values of the
arguments about to run.

For an MCP tool, what was approved includes the tool's definition: an approved call runs only
while the tool about to run has the pinned definition digest its card was made under, and a
trust grant covers only calls under the definition of its card
(docs/decisions/0046-mcp-pins-wiring.md). A call whose tool changed since is never sent
(`Claim.DEFINITION_CHANGED`), and its card says so.

A call that ran to its end has its result recorded (`record`), so a node re-run after a crash
answers with that result (`Claim.FINISHED`) instead of "outcome unknown": the result is durable
as soon as the tool returns, whatever the checkpoint's durability mode. Only a call cut short
while its tool ran stays unknown (tool calls are at most once, docs/decisions/0009).

An MCP server may answer a call by asking the requester a question (elicitation), and the call
goes on as a new `tools/call` carrying the answer: a round. Each round after the first is
claimed once (`claim_round`) and never sent twice, and what a round asked is recorded
(`record_round`) so that a re-run of the tool node after a resume or a restart reads it
(`rounds`) instead of sending the round again (docs/decisions/0054-mcp-elicitation.md).

`PostgresLedger` (`bot.tools.ledger.postgres`) runs in production, `InMemoryLedger` in graph
tests; both pass one contract suite (tests/integration/tools/ledger/test_ledger_contract.py).
The approvals gate (NOT_APPROVED, DEFINITION_CHANGED, trust grants, STOPPED) is PostgreSQL's
alone: the in-memory ledger grants every call it has not claimed before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class Claim(StrEnum):
    """The answer to "may this call run now?"."""

    GRANTED = "granted"
    ASKED = "asked"
    """Claimed before, and its MCP server asked for input: the call goes on from its recorded
    rounds (`ToolRunLedger.rounds`), never sent again from the start."""
    ALREADY_STARTED = "already_started"
    """Started before and cut short: its outcome is unknown."""
    FINISHED = "finished"
    """Ran to its end before; its recorded result (`ToolRunLedger.recorded`) stands."""
    NOT_APPROVED = "not_approved"
    """Reviewed, but not approved for exactly these arguments."""
    DEFINITION_CHANGED = "definition_changed"
    """Approved, but the MCP tool's definition is no longer the one its card was made under:
    the call is not sent, and never will be (the model is told to ask again)."""
    STOPPED = "stopped"
    """A call under a trust grant, in a conversation whose turn was stopped (docs/decisions/0022): nobody
    approved this call itself, so a recorded stop keeps it from starting whatever the run has
    heard of the stop yet."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    """One round of a call whose server asked for input (round 0 is the call's own claim).

    Attributes:
        number: 0 for the call itself, then 1, 2, ... for each `tools/call` sent again.
        asked: the server's `InputRequiredResult` of the round (MCP's JSON), or None when the
            round was claimed and nothing it asked is recorded (it was cut short, or it ended
            with the call's result, which the ledger's `recorded` holds).
    """

    number: int
    asked: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustUse:
    """A reviewed call about to run without a card, under a trust grant (docs/decisions/0022).

    Attributes:
        grant_id: the grant that covered the call when it was checked.
        requester_id: whose call it is (the grant must be theirs).
    """

    grant_id: str
    requester_id: str


class ToolRunLedger(Protocol):
    """Records which tool calls have started."""

    async def claim(
        self,
        *,
        thread_id: str,
        tool_call_id: str,
        tool_name: str,
        args: Mapping[str, Any],
        reviewed: bool,
        trust: TrustUse | None = None,
        definition: str | None = None,
    ) -> Claim:
        """Claim a call before running it.

        Args:
            thread_id: the conversation (subagents share their conversation's thread id).
            tool_call_id: the call's id, unique in the thread.
            tool_name: for the record.
            args: the arguments about to run.
            reviewed: whether the call's policy needs review.
            trust: for a reviewed call with no card, the trust grant it runs under; the call
                runs only if the grant is live and binds exactly these arguments' values at
                the moment of the claim, and the run is audited as trusted by its approver.
            definition: the pinned digest of the definition of the MCP tool about to run
                (`bot.tools.registry.definition_of`); None for the bot's own tools. A call
                decided on runs only when it equals the one its card was made under, and a
                trust grant covers it only when it was made under it.

        Returns:
            GRANTED the first time for `(thread_id, tool_call_id)` when the call may run;
            after that ASKED once any round of it is in the ledger (`record_round`,
            `claim_round`; that answer changes nothing), else FINISHED once its result is recorded, else
            ALREADY_STARTED; NOT_APPROVED
            when its review (or its trust grant) does not cover `args`, or a reviewed call has
            neither a stored decision nor a trust grant; DEFINITION_CHANGED for an approved call
            that never started whose tool's definition is not its card's (its approval is
            marked so); STOPPED for a call under a trust grant once the conversation's turn is
            stopped.
        """
        ...

    async def record(self, *, thread_id: str, tool_call_id: str, result: ToolResult, cut_short: bool = False) -> None:
        """Record the result of a granted call that ran to its end (an error result included).

        Args:
            thread_id: the conversation.
            tool_call_id: the call.
            result: what the model reads of it.
            cut_short: a stop cancelled the tool while it ran (`bot.turns.stop.signal`): the
                result says so, and whether the call took effect is unknown (a decided call's
                card says so too).
        """
        ...

    async def recorded(self, *, thread_id: str, tool_call_id: str) -> ToolResult | None:
        """The recorded result of a call, if it ran to its end."""
        ...

    async def started(self, *, thread_id: str, tool_call_id: str) -> bool:
        """Whether the call was claimed before (it ran, or may have), whether or not its result is recorded.

        Read only: nothing is claimed. For a call the tool node would refuse now (its tool is
        not offered, or its arguments no longer fit the tool's schema) after a process that
        claimed it died: the ledger's answer stands then (`claim`), not the refusal's "nothing ran".
        """
        ...

    async def claim_round(self, *, thread_id: str, tool_call_id: str, number: int) -> bool:
        """Claim round `number` (1 or more) of a call before sending it; True once, False ever after."""
        ...

    async def record_round(self, *, thread_id: str, tool_call_id: str, number: int, asked: Mapping[str, Any]) -> None:
        """Record what round `number` (0 or more) of a call asked (its `InputRequiredResult` as JSON)."""
        ...

    async def rounds(self, *, thread_id: str, tool_call_id: str) -> list[Round]:
        """The call's rounds recorded so far, in order; empty for a call whose server never asked."""
        ...


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returned, as the ledger keeps it.

    Attributes:
        content: the result message's content (a string, or LangChain content blocks).
        status: `success` or `error`.
    """

    content: str | list[Any]
    status: str = "success"
