"""Persistent buttons: `DynamicItem`s whose `custom_id` names the approval, the pause or the turn to stop.

`cs:<action>:<approval id>` (43 characters; Discord allows 100; `trust`, Approve and trust, is
one more action on a card that offers it), on a pause's first card
`cs:all-<approve|reject>:<review id>:<version>` (59), `cs:stop:<turn id>` (40) on a status
line while the agent works, `cs:args:<approval id>` (40) for All arguments on a
card and `cs:page:<approval id>:<version>:<page>` (at most 56) for Previous / Next on its pages
(docs/decisions/0034-arguments-approvers-can-see.md). The classes are registered once in
`setup_hook` with `Client.add_dynamic_items`, so a click on any card, page or status line, from
before a restart or after any view timeout, is parsed from its `custom_id` and handled.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import discord

from adapters.discord import messages as msg
from adapters.discord.forms import BUTTON_TEMPLATE as QUESTION_TEMPLATE
from adapters.discord.forms import CONTINUE_TEMPLATE
from adapters.words.cards import BUTTON_TRUST
from adapters.words.display import duration_words
from bot.ports import BatchOffer


class CardClicks(Protocol):
    """What the client's interaction handler does with these buttons (`adapters.discord.interactions`).

    A protocol, so that this module never imports the handler, which draws these buttons.
    """

    async def on_button(
        self, interaction: discord.Interaction[Any], action: str, approval_id: str, version: str | None
    ) -> None:
        """Approve, Approve and trust, Edit or Reject pressed on a card."""

    async def on_arguments(
        self, interaction: discord.Interaction[Any], approval_id: str, version: str | None, page: int
    ) -> None:
        """All arguments on a card (`version` None), or Previous / Next on its pages."""

    async def on_stop(self, interaction: discord.Interaction[Any], turn_id: str) -> None:
        """Stop pressed on a status line."""

    async def on_batch(
        self, interaction: discord.Interaction[Any], action: str, review_id: str, version: str | None
    ) -> None:
        """Approve all or Reject all pressed on a pause's first card."""


ACTIONS = ("approve", "edit", "reject")
_LABELS = {
    "approve": msg.BUTTON_APPROVE,
    "trust": BUTTON_TRUST,
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
ARGS_TEMPLATE = r"cs:args:(?P<approval_id>[0-9a-f]{32})"
"""All arguments on a card: its pages, from the first."""
_ARGS_TEMPLATE = re.compile(ARGS_TEMPLATE)
PAGE_TEMPLATE = r"cs:page:(?P<approval_id>[0-9a-f]{32}):(?P<version>[0-9a-f]{8}):(?P<page>[0-9]{1,4})"
"""Previous / Next on a page of All arguments: the page to show, of the arguments' version the pages showed."""
_PAGE_TEMPLATE = re.compile(PAGE_TEMPLATE)
STOP_TEMPLATE = r"cs:stop:(?P<turn_id>[0-9a-f]{32})"
"""A Stop button's `custom_id`: the turn it stops (`bot.turns.stop.stopper`)."""
_STOP_TEMPLATE = re.compile(STOP_TEMPLATE)
_QUESTION_TEMPLATE = re.compile(QUESTION_TEMPLATE)
_CONTINUE_TEMPLATE = re.compile(CONTINUE_TEMPLATE)


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
        handler: CardClicks = interaction.client.interactions
        await handler.on_button(interaction, self.action, self.approval_id, self.version)


class ArgumentsButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=ARGS_TEMPLATE):
    """All arguments on a card whose values are shortened: every key and value, a page at a time.

    Args:
        approval_id: the approval (32 hex characters); anyone who can see the card may open it.
    """

    def __init__(self, approval_id: str) -> None:
        super().__init__(
            discord.ui.Button(
                label=msg.BUTTON_SHOW_ARGS, style=discord.ButtonStyle.secondary, custom_id=f"cs:args:{approval_id}"
            )
        )
        self.approval_id = approval_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> ArgumentsButton:
        """Rebuild the button from a clicked `custom_id`."""
        return cls(match["approval_id"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's interaction handler."""
        handler: CardClicks = interaction.client.interactions
        await handler.on_arguments(interaction, self.approval_id, None, 1)


class PageButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=PAGE_TEMPLATE):
    """Previous or Next on a page of All arguments.

    Args:
        approval_id: the approval.
        version: the version of the arguments the page showed (`ApprovalRecord.version`); after
            an edit, a click shows the first page of the arguments as they are now.
        page: the page this button shows (1-based).
        label: Previous or Next.
        disabled: at either end there is no page to go to.
    """

    def __init__(
        self, approval_id: str, version: str, page: int, *, label: str = msg.BUTTON_NEXT, disabled: bool = False
    ) -> None:
        super().__init__(
            discord.ui.Button(
                label=label,
                style=discord.ButtonStyle.secondary,
                custom_id=f"cs:page:{approval_id}:{version}:{page}",
                disabled=disabled,
            )
        )
        self.approval_id = approval_id
        self.version = version
        self.page = page

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> PageButton:
        """Rebuild the button from a clicked `custom_id`."""
        return cls(match["approval_id"], match["version"], int(match["page"]))

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's interaction handler."""
        handler: CardClicks = interaction.client.interactions
        await handler.on_arguments(interaction, self.approval_id, self.version, self.page)


def pages_view(approval_id: str, version: str, page: int, pages: int) -> discord.ui.View:
    """Previous / Next under page `page` of `pages` of All arguments.

    Stopped after sending: the registry dispatches clicks.
    """
    view = discord.ui.View(timeout=None)
    view.add_item(PageButton(approval_id, version, page - 1, label=msg.BUTTON_PREVIOUS, disabled=page <= 1))
    view.add_item(PageButton(approval_id, version, page + 1, label=msg.BUTTON_NEXT, disabled=page >= pages))
    return view


class StopButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=STOP_TEMPLATE):
    """Stop on the status line of a running turn; only the turn id is on the button.

    Args:
        turn_id: the turn (32 hex characters); who may stop it is checked when it is clicked.
    """

    def __init__(self, turn_id: str) -> None:
        super().__init__(
            discord.ui.Button(label=msg.BUTTON_STOP, style=discord.ButtonStyle.danger, custom_id=f"cs:stop:{turn_id}")
        )
        self.turn_id = turn_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> StopButton:
        """Rebuild the button from a clicked `custom_id`."""
        return cls(match["turn_id"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's interaction handler."""
        handler: CardClicks = interaction.client.interactions
        await handler.on_stop(interaction, self.turn_id)


BATCH_TEMPLATE = r"cs:all-(?P<action>approve|reject):(?P<review_id>[0-9a-f]{32})(?::(?P<version>[0-9a-f]{8}))?"
"""A batch button's `custom_id` (Approve all / Reject all on a pause's first card)."""
_BATCH_TEMPLATE = re.compile(BATCH_TEMPLATE)
_BATCH_LABELS = {"approve": msg.BUTTON_APPROVE_ALL, "reject": msg.BUTTON_REJECT_ALL}


class BatchButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=BATCH_TEMPLATE):
    """Approve all or Reject all, on the second row of a pause's first card.

    Args:
        action: `approve` or `reject`.
        review_id: the pause (its review id, 32 hex characters).
        version: the pause's arguments' version (`BatchOffer.version`); Approve all from a card
            drawn before an edit is refused.
        pending: how many calls wait (shown on the label).
    """

    def __init__(self, action: str, review_id: str, version: str | None = None, *, pending: int = 0) -> None:
        custom_id = f"cs:all-{action}:{review_id}" + (f":{version}" if version else "")
        label = _BATCH_LABELS[action].format(count=pending) if pending else _BATCH_LABELS[action].format(count="")
        super().__init__(discord.ui.Button(label=label.strip(), style=_STYLES[action], custom_id=custom_id, row=1))
        self.action = action
        self.review_id = review_id
        self.version = version

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> BatchButton:
        """Rebuild the button from a clicked `custom_id` (no state but the ids)."""
        return cls(match["action"], match["review_id"], match["version"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's interaction handler."""
        handler: CardClicks = interaction.client.interactions
        await handler.on_batch(interaction, self.action, self.review_id, self.version)


def stop_view(turn_id: str) -> discord.ui.View:
    """A view with the Stop button; stopped after sending, the registry dispatches clicks."""
    view = discord.ui.View(timeout=None)
    view.add_item(StopButton(turn_id))
    return view


def card_view(
    approval_id: str,
    version: str | None = None,
    *,
    pending: bool = True,
    batch: BatchOffer | None = None,
    trust_s: int | None = None,
    approve: bool = True,
    show_all: bool = False,
) -> discord.ui.View:
    """A card's buttons; stopped after sending, the registry dispatches clicks.

    Args:
        approval_id: the approval.
        version: the version of its arguments.
        pending: whether the card's own Approve / Edit / Reject are shown.
        batch: Approve all / Reject all for its pause, on a second row.
        trust_s: the trust the card offers, in seconds: adds "Approve and trust for ..." after
            Approve, on the first row; None: no such button.
        approve: whether Approve (and Approve and trust) are shown: not where Discord cannot
            show the arguments in full (`adapters.discord.cards.unshowable`).
        show_all: adds All arguments last on the first row (five buttons at most, Discord's
            limit for a row).
    """
    view = discord.ui.View(timeout=None)
    if pending:
        for action in ACTIONS:
            if action == "approve" and not approve:
                continue
            view.add_item(ApprovalButton(action, approval_id, version))
            if action == "approve" and trust_s:
                label = BUTTON_TRUST.format(duration=duration_words(trust_s))
                view.add_item(ApprovalButton("trust", approval_id, version, label=label))
        if show_all:
            view.add_item(ArgumentsButton(approval_id))
    if batch is not None:
        for action in ("approve", "reject"):
            view.add_item(BatchButton(action, batch.review_id, batch.version, pending=batch.pending))
    return view


def edit_again_view(approval_id: str) -> discord.ui.View:
    """A single Edit button, for the ephemeral message after a refused edit."""
    view = discord.ui.View(timeout=None)
    view.add_item(ApprovalButton("edit", approval_id, label=msg.BUTTON_EDIT_AGAIN))
    return view


def parse_button_id(custom_id: str) -> re.Match[str] | None:
    """The parts of a card button's `custom_id` (`action`, `approval_id`, `version`), else None."""
    return _TEMPLATE.fullmatch(custom_id)


def parse_batch_id(custom_id: str) -> re.Match[str] | None:
    """The parts of a batch button's `custom_id` (`action`, `review_id`, `version`), else None."""
    return _BATCH_TEMPLATE.fullmatch(custom_id)


def dispatched_to_a_button(interaction: discord.Interaction[Any]) -> bool:
    """Whether discord.py hands this component interaction to one of our buttons (card, batch, Stop, pages, question).

    It does only for a button whose `custom_id` fits a template and which the clicked
    message shows (`ViewStore.schedule_dynamic_item_call` looks the item up on the message);
    anything else it drops without a word, and Discord then tells the clicker "This
    interaction failed".
    """
    data: dict[str, Any] = dict(interaction.data or {})
    custom_id = data.get("custom_id")
    if data.get("component_type") != discord.ComponentType.button.value or not isinstance(custom_id, str):
        return False
    templates = (
        _TEMPLATE,
        _BATCH_TEMPLATE,
        _STOP_TEMPLATE,
        _ARGS_TEMPLATE,
        _PAGE_TEMPLATE,
        _QUESTION_TEMPLATE,
        _CONTINUE_TEMPLATE,
    )
    if not any(template.fullmatch(custom_id) for template in templates) or interaction.message is None:
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
