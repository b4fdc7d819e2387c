"""The port trust grants are kept behind: `PostgresTrustStore` in production, `InMemoryTrustStore` in tests.

A grant (docs/decisions/0022) is made with the vote that approves its card (`bot.reviews.trust.postgres.insert_grant`
in the vote's transaction; `InMemoryTrustStore.grant`), read for each call that would otherwise
need a card, and ended by time or by a revoke. A grant is LIVE while it is neither revoked nor
expired, by the store's clock (`bot.reviews.lifecycle.trust_status`); nothing is cached, so a
revoke is seen by the next call. Both implementations pass one contract suite
(tests/integration/reviews/trust/test_trust_store_contract.py; docs/decisions/0063-store-ports.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from bot.base.conversation import Actor
from bot.reviews.trust.grants import TrustGrant


class TrustStore(Protocol):
    """Reads and revokes trust grants."""

    async def live_for(self, thread_id: str, tool_name: str, requester_id: str) -> tuple[list[TrustGrant], datetime]:
        """The live grants of one conversation, tool and requester (newest first), and the store's now.

        Callers ask only for a call that would otherwise need a card.
        """
        ...

    async def live_in(
        self, platform: str, workspace_id: str, *, channel_id: str | None = None
    ) -> tuple[list[TrustGrant], datetime]:
        """The live grants of a workspace (or of one channel), soonest to expire first, and the store's now."""
        ...

    async def get(self, grant_id: str) -> TrustGrant | None:
        """The grant with this id, live or not, or None."""
        ...

    async def revoke(self, grant_id: str, actor: Actor) -> TrustGrant | None:
        """End a live grant now, with its audit row (`trust_revoked`), atomically.

        Of two revokes of one grant, or a revoke and its expiry, only one ends it.

        Returns:
            The grant as revoked (`revoked_at` and `revoked_by_*` set), or None when it is not
            live (unknown, expired or revoked already): nothing changed and nothing audited.
        """
        ...
