"""The port pinned definitions are kept behind: `PostgresPinStore` in production, `InMemoryPinStore` in tests.

The store is the truth, not a process's memory: every worker and replica reads a server's pins
and holds from it (`load`), so a hold recorded by one refuses the tool's calls on all of them,
and survives restarts. Every change is conditional, so that workers racing on the same listing
record it once: the first sight of a server once, each held definition once, each admins'
message once, and an accept only for what the admins were shown. Both implementations pass one
contract suite (tests/integration/tools/mcp/pins/test_mcp_pins.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.base.conversation import Actor
from bot.tools.mcp.pins.definitions import ToolDefinition
from bot.tools.mcp.pins.rules import AcceptPlan, HeldTool, ServerPins


class PinStore(Protocol):
    """Pinned and held MCP tool definitions, per server (docs/decisions/0043-pinned-mcp-definitions.md)."""

    async def load(self, server: str) -> ServerPins:
        """The server's pins and holds as one consistent snapshot (never seen: `seen` False, nothing else)."""
        ...

    async def record_first_sight(self, server: str, definitions: Sequence[ToolDefinition]) -> bool:
        """Pin `definitions` as the server's first sight, audited (`pinned` rows), unless it was seen before.

        Args:
            server: the server's key.
            definitions: every tool it lists (may be empty: the server counts as seen, and
                any tool it lists later is new).

        Returns:
            True when this call recorded the first sight; False when the server was seen
            already (another worker's first sight won: load again and judge against its pins).
        """
        ...

    async def record_holds(
        self, server: str, *, hold: Sequence[ToolDefinition], release: Sequence[ToolDefinition]
    ) -> None:
        """Record held definitions and lift holds, against the pins as they are at that moment.

        Args:
            server: the server's key (seen before).
            hold: definitions to hold; one whose tool is pinned with that very digest by now (an
                accept meanwhile) is skipped; one replaces a hold of another digest (`held_at`
                is then now, and its message is due again).
            release: definitions listed equal to their pin; the tool's hold is lifted only if
                the tool is pinned with that digest at that moment.

        Raises:
            ValueError: the server was never seen.
        """
        ...

    async def claim_notice(self, server: str, held: Sequence[HeldTool]) -> tuple[HeldTool, ...]:
        """Claim the admins' message about each held definition, before it is sent; audited (`held` rows).

        A claim is a conditional insert keyed by the server, tool and digest: of workers racing
        on the same change, exactly one claims it, so the admins get one message per change.
        Claimed before sending, a message is at most once: one lost to a crash right after the
        claim is not sent again (the hold still shows in `/countersign mcp`, and the refused
        calls name the accept command).

        Args:
            server: the server's key.
            held: held tools the caller would tell the admins about.

        Returns:
            Those claimed by this call, in the given order: the ones still held with that digest
            whose message nobody claimed before. Send one message naming them when not empty.
        """
        ...

    async def accept(self, plan: AcceptPlan, actor: Actor) -> bool:
        """Pin the plan's definitions and lift the server's holds, audited (`accepted` rows), or change nothing.

        Atomic: it applies only if the server's holds are exactly what the admins were shown
        (`plan.shown`, tool to digest): a definition held, changed or added after the admin
        looked refuses the whole accept.

        Args:
            plan: from `rules.plan_accept` over the state the admin was shown.
            actor: the admin who accepted (their workspace is the audit rows').

        Returns:
            True when accepted; False when the holds changed meanwhile (nothing changed).
        """
        ...
