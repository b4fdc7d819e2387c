"""Trust for a while (docs/decisions/0022): the admin's trust setting, a trust grant, and what a grant binds.

An admin's *trust setting* (`/countersign trust <tool> up-to <duration> [matching <arg>,...]`)
lets a card of that tool offer "Approve and trust". One approver's click on it approves the card
and makes a *trust grant*: later calls of the same tool, in the same conversation, by the same
requester, whose matched arguments have the same values, run without a card until the grant
expires or is revoked. What the grant binds is `trust_key` of the approved (canonical) arguments.

Trust never widens: a grant covers a call only while a setting still allows it at least as
narrowly (`still_fits`), and only if its approver could still approve that call alone
(`bot.reviews.trust.check`). The grant's states are in `bot.reviews.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from langchain_core.messages import ToolCall

from bot.policy.config import TrustSetting
from bot.policy.review import PolicyContext
from bot.reviews.digest import args_digest, bound_to_definition
from bot.reviews.lifecycle import TrustStatus, trust_status

MIN_TRUST_S = 60
MAX_TRUST_S = 24 * 3600
"""A grant lasts one minute to one day: a trust that should outlive a working day is a policy
(`/countersign policy <tool> auto when ...`), which everyone can read with `show`."""

GRANT_ID_HEX = 8
"""Hex digits of a grant id: short enough to type in `trust revoke <id>`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustGrant:
    """One approver's "Approve and trust" on one card, as stored.

    Attributes:
        id: the short id people name in `trust revoke <id>` (8 hex digits).
        approval_id: the card whose approval made it.
        platform / workspace_id / channel_id / thread_id: where it applies (one conversation).
        tool_name: the tool it covers.
        source: the subagent whose call was approved (for the record only; a grant covers the
            tool in the conversation whoever calls it).
        requester_id / requester_name: whose calls it covers.
        matching: the argument names it binds (empty: every argument).
        matched: the values it binds (`trust_key` of the approved arguments).
        matched_digest: `key_digest` of the approved arguments: `args_digest(matched)`, bound
            to the MCP tool's definition the card was made under (a grant covers no call of
            another definition of the tool).
        granted_by_id / granted_by_name: the approver who clicked.
        granted_at / expires_at: the database's clock.
        revoked_at / revoked_by_id / revoked_by_name: set once revoked.
    """

    id: str
    approval_id: str
    platform: str
    workspace_id: str
    channel_id: str
    thread_id: str
    tool_name: str
    requester_id: str
    requester_name: str
    matched: dict[str, Any]
    matched_digest: str
    granted_by_id: str
    granted_by_name: str
    granted_at: datetime
    expires_at: datetime
    matching: tuple[str, ...] = ()
    source: str | None = None
    revoked_at: datetime | None = None
    revoked_by_id: str | None = None
    revoked_by_name: str | None = None

    def status(self, now: datetime) -> TrustStatus:
        """The grant's state at `now` (`bot.reviews.lifecycle.trust_status`)."""
        return trust_status(expires_at=self.expires_at, revoked_at=self.revoked_at, now=now)

    @property
    def duration_s(self) -> int:
        """How long it was granted for, in whole seconds."""
        return round((self.expires_at - self.granted_at).total_seconds())


@dataclass(frozen=True, slots=True, kw_only=True)
class NewGrant:
    """A grant to make with the vote that approves a card (see `ApprovalStore.vote`).

    The conversation, tool and requester are the approval's; the values it binds are taken
    from the arguments that vote approves, in its transaction.

    Attributes:
        matching: the setting's argument names (empty: every argument).
        duration_s: how long it lasts from the moment of the vote, in seconds.
    """

    matching: tuple[str, ...]
    duration_s: int


def trust_key(args: Mapping[str, Any], matching: Sequence[str]) -> dict[str, Any]:
    """The values a grant binds: every argument, or the named ones (a missing one as None).

    Args:
        args: a call's canonical arguments (`bot.tools.canonical`), the same form the approval
            binds (docs/decisions/0010), so two spellings of one call have one key.
        matching: argument names; empty means every argument.
    """
    if not matching:
        return dict(args)
    return {name: args.get(name) for name in sorted(set(matching))}


def key_digest(args: Mapping[str, Any], matching: Sequence[str], definition: str | None = None) -> str:
    """What a grant stores and a later call must equal: `args_digest(trust_key(args, matching))`.

    Args:
        args: canonical arguments, as for `trust_key`.
        matching: argument names; empty means every argument.
        definition: the MCP tool's pinned definition digest (`bot.tools.registry.definition_of`):
            the card's, for the grant it makes; the tool's now, for a later call. The digest is
            bound to it (`bound_to_definition`), so a grant made under one definition covers no
            call under another. None for the bot's own tools.
    """
    return bound_to_definition(args_digest(trust_key(args, matching)), definition)


def at_least_as_narrow(granted: Sequence[str], wanted: Sequence[str]) -> bool:
    """Whether a grant binding `granted` binds at least what a setting naming `wanted` asks now.

    Binding every argument (empty) is the narrowest; a grant binding some names is too wide for
    a setting that now wants every argument, or names it does not bind.
    """
    if not granted:
        return True
    if not wanted:
        return False
    return set(wanted) <= set(granted)


def still_fits(grant: TrustGrant, setting: TrustSetting | None, now: datetime) -> bool:
    """Whether the setting in force now still allows `grant` (trust never widens).

    A grant made under an older setting applies only while a setting for its tool and channel
    is enabled, binds at least the arguments that setting names, and is within that setting's
    `max_s` of the moment it was granted (an admin who shortens `up-to` shortens live grants).
    """
    if setting is None or not setting.enabled:
        return False
    if not at_least_as_narrow(grant.matching, setting.matching):
        return False
    return now < grant.granted_at + timedelta(seconds=setting.max_s)


class TrustCheck(Protocol):
    """Finds the live grant that covers a call exactly, for the graph (`bot.reviews.trust.check.TrustGate`)."""

    async def covering(self, call: ToolCall, context: PolicyContext) -> TrustGrant | None:
        """The grant under which `call` may run without a card now, else None (a card; never raises).

        Args:
            call: the call, with its canonical arguments.
            context: where it is made, with the requester (`PolicyContext.requester_id`); a
                context without a requester is never covered.
        """
        ...
