"""The Edit and Reject modals, and reading their submissions.

Submissions are read from the raw interaction data in `on_interaction`, not through a
`Modal.on_submit` callback: discord.py keeps sent modals in memory, so after a restart it would
drop the submission of a modal opened before it. The modal's own `custom_id`
(`cs:edit-modal:<approval id>`, `cs:reject-all-modal:<review id>`) carries all the state needed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import discord

from adapters.discord import messages as msg
from adapters.words.cards import REJECT_INTRO

TEXT_INPUT_CHARS = 4000
REASON_CHARS = 2000
ARGS_INPUT = "args"
REASON_INPUT = "reason"
_MODAL_ID = re.compile(r"cs:(?P<kind>edit|reject|reject-all)-modal:(?P<subject_id>[0-9a-f]{32})")


class _Form(discord.ui.Modal):
    """A modal whose submission is handled in `on_interaction` (see the module docstring)."""

    async def on_submit(self, interaction: discord.Interaction[Any], /) -> None:
        return None  # answered by InteractionHandler.on_modal_submit


def edit_modal(approval_id: str, prefill: str) -> discord.ui.Modal:
    """The Edit modal, prefilled with the arguments as JSON (callers check the length)."""
    form = _Form(title=msg.EDIT_TITLE, custom_id=f"cs:edit-modal:{approval_id}", timeout=None)
    form.add_item(
        discord.ui.Label(
            text=msg.EDIT_LABEL,
            description=msg.EDIT_DESCRIPTION,
            component=discord.ui.TextInput(
                custom_id=ARGS_INPUT,
                style=discord.TextStyle.paragraph,
                default=prefill,
                max_length=TEXT_INPUT_CHARS,
            ),
        )
    )
    return form


def reject_modal(approval_id: str) -> discord.ui.Modal:
    """The Reject modal with an optional reason."""
    form = _Form(title=msg.REJECT_TITLE, custom_id=f"cs:reject-modal:{approval_id}", timeout=None)
    form.add_item(
        discord.ui.Label(
            text=msg.REJECT_LABEL,
            description=REJECT_INTRO,
            component=discord.ui.TextInput(
                custom_id=REASON_INPUT,
                style=discord.TextStyle.paragraph,
                required=False,
                max_length=REASON_CHARS,
            ),
        )
    )
    return form


def reject_all_modal(review_id: str) -> discord.ui.Modal:
    """The Reject all modal: one optional reason for every call of the pause the clicker may reject."""
    form = _Form(title=msg.REJECT_ALL_TITLE, custom_id=f"cs:reject-all-modal:{review_id}", timeout=None)
    form.add_item(
        discord.ui.Label(
            text=msg.REJECT_ALL_LABEL,
            description=msg.REJECT_ALL_DESCRIPTION,
            component=discord.ui.TextInput(
                custom_id=REASON_INPUT,
                style=discord.TextStyle.paragraph,
                required=False,
                max_length=REASON_CHARS,
            ),
        )
    )
    return form


def parse_modal_id(custom_id: str) -> tuple[str, str] | None:
    """`(kind, id)` for one of our modals (`edit` / `reject`: an approval id; `reject-all`: a review id), else None."""
    match = _MODAL_ID.fullmatch(custom_id)
    return (match["kind"], match["subject_id"]) if match else None


def submitted_values(data: Mapping[str, Any]) -> dict[str, str]:
    """Text input values by `custom_id` from MODAL_SUBMIT data (action rows or labels)."""
    return {
        str(component["custom_id"]): str(component.get("value") or "")
        for component in _walk(data.get("components", []))
        if "custom_id" in component and "value" in component
    }


def _walk(components: Any) -> Iterator[Mapping[str, Any]]:
    for component in components or []:
        if not isinstance(component, Mapping):
            continue
        yield component
        yield from _walk(component.get("components"))
        inner = component.get("component")
        if isinstance(inner, Mapping):
            yield from _walk([inner])
