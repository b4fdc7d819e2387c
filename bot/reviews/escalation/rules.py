"""Escalation: who else gets an undecided card, and after how long (`/countersign escalate`).

An admin sets one escalation per tool (`escalate <tool> after <duration> to <target>`). When a
review opens, each reviewed call of that tool stores when it escalates and to whom (a later
change of the setting does not rewrite cards already waiting); the escalation sweeper
(`bot.reviews.escalation.sweep`) posts a card still pending at that time to the target, which then may decide
that call (`bot.reviews.authorization`). Its states are in `bot.reviews.lifecycle`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class TargetKind(StrEnum):
    """What an escalation target names."""

    USER = "user"
    """One person: the card goes to their DMs."""
    ROLE = "role"
    """A Discord role: a card in the conversation mentions it (its members cannot be listed
    without the privileged Server Members intent)."""
    GROUP = "group"
    """A Slack user group: the card goes to its members' DMs (at most `bot.reviews.cards.MAX_DM_CARDS`)."""
    CHANNEL = "channel"
    """A channel: the card is posted there, and whoever can click in that channel may decide."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationTarget:
    """Where an escalated card goes, and who may then decide it.

    Attributes:
        kind: user, role, group or channel.
        subject_id: the platform's id of that user, role, group or channel.
    """

    kind: TargetKind
    subject_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EscalationRule:
    """A tool's escalation in one workspace.

    Attributes:
        tool_name: the tool.
        after_s: seconds from the moment a review opens until its card escalates.
        target: where it goes.
    """

    tool_name: str
    after_s: int
    target: EscalationTarget
