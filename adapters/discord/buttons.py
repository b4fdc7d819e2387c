"""Persistent buttons: `DynamicItem`s whose `custom_id` names the approval.

`cs:<action>:<approval id>` (43 characters; Discord allows 100); `trust` (Approve and trust,
issue 12) is one more action on a card that offers it. The classes are registered
once in `setup_hook` with `Client.add_dynamic_items`, so a click on any card, from before a
restart or after any view timeout, is parsed from its `custom_id` and handled.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import discord

from adapters.discord import messages as msg
from adapters.display import duration_words

if TYPE_CHECKING:
    from adapters.discord.interactions import InteractionHandler

ACTIONS = ("approve", "edit", "reject")
_LABELS = {
    "approve": msg.BUTTON_APPROVE,
    "trust": msg.BUTTON_TRUST,
    "edit": msg.BUTTON_EDIT,
    "reject": msg.BUTTON_REJECT,
}
_STYLES = {
    "approve": discord.ButtonStyle.success,
    "trust": discord.ButtonStyle.primary,
    "edit": discord.ButtonStyle.secondary,
    "reject": discord.ButtonStyle.danger,
}


TEMPLATE = r"cs:(?P<action>approve|trust|edit|reject):(?P<approval_id>[0-9a-f]{32})(?::(?P<version>[0-9a-f]{8}))?"
"""A card button's `custom_id`."""
_TEMPLATE = re.compile(TEMPLATE)


class ApprovalButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=TEMPLATE):
    """One of Approve / Approve and trust / Edit / Reject on a card.

    Args:
        action: `approve`, `trust`, `edit` or `reject`.
        approval_id: the approval's id (32 hex characters).
        version: the version of the arguments the card shows (`ApprovalRecord.version`); an
            approval from a card drawn before an edit is refused. `cs:approve:<id>:<version>`
            is 52 characters, within Discord's 100.
        label: the button text (defaults to the action's label).
    """

    def __init__(self, action: str, approval_id: str, version: str | None = None, *, label: str | None = None) -> None:
        custom_id = f"cs:{action}:{approval_id}" + (f":{version}" if version else "")
        super().__init__(discord.ui.Button(label=label or _LABELS[action], style=_STYLES[action], custom_id=custom_id))
        self.action = action
        self.approval_id = approval_id
        self.version = version

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> ApprovalButton:
        """Rebuild the button from a clicked `custom_id` (no state but the id)."""
        return cls(match["action"], match["approval_id"], match["version"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's interaction handler."""
        handler: InteractionHandler = interaction.client.interactions
        await handler.on_button(interaction, self.action, self.approval_id, self.version)


def card_view(approval_id: str, version: str | None = None, trust_s: int | None = None) -> discord.ui.View:
    """A view with the card's buttons; stopped after sending, the registry dispatches clicks.

    Args:
        approval_id: the approval.
        version: the arguments' version the card shows.
        trust_s: the trust the card offers, in seconds: adds "Approve and trust for ..." after
            Approve (issue 12); None: no such button.
    """
    view = discord.ui.View(timeout=None)
    for action in ACTIONS:
        view.add_item(ApprovalButton(action, approval_id, version))
        if action == "approve" and trust_s:
            label = msg.BUTTON_TRUST.format(duration=duration_words(trust_s))
            view.add_item(ApprovalButton("trust", approval_id, version, label=label))
    return view


def edit_again_view(approval_id: str) -> discord.ui.View:
    """A single Edit button, for the ephemeral message after a refused edit."""
    view = discord.ui.View(timeout=None)
    view.add_item(ApprovalButton("edit", approval_id, label=msg.BUTTON_EDIT_AGAIN))
    return view


def parse_button_id(custom_id: str) -> re.Match[str] | None:
    """The parts of a card button's `custom_id` (`action`, `approval_id`, `version`), else None."""
    return _TEMPLATE.fullmatch(custom_id)


def dispatched_to_a_button(interaction: discord.Interaction[Any]) -> bool:
    """Whether discord.py hands this component interaction to `ApprovalButton`.

    It does only for a button whose `custom_id` fits the template and which the clicked
    message shows (`ViewStore.schedule_dynamic_item_call` looks the item up on the message);
    anything else it drops without a word, and Discord then tells the clicker "This
    interaction failed".
    """
    data: dict[str, Any] = dict(interaction.data or {})
    custom_id = data.get("custom_id")
    if data.get("component_type") != discord.ComponentType.button.value or not isinstance(custom_id, str):
        return False
    if parse_button_id(custom_id) is None or interaction.message is None:
        return False
    return custom_id in _custom_ids(interaction.message.components)


def _custom_ids(components: Any) -> set[str]:
    found: set[str] = set()
    for component in components or ():
        custom_id = getattr(component, "custom_id", None)
        if isinstance(custom_id, str):
            found.add(custom_id)
        found |= _custom_ids(getattr(component, "children", None))
    return found
