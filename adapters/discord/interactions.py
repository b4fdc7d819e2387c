"""Button clicks and modal submissions: acknowledge within 3 s, then call the core.

Discord's rule: every interaction is answered (or deferred) within 3 seconds. Approve defers
at once (a silent update), then records the decision; Edit and Reject answer with a modal
after a quick permission check; modal submissions defer before the database work. Refusals
go to the clicker only (ephemeral).
"""

from __future__ import annotations

import logging
from typing import Any

import discord

from adapters.admin_text import error_text as admin_error_text
from adapters.admin_text import render
from adapters.batch_text import batch_summary
from adapters.chunking import split_message
from adapters.decision_errors import parse_edited_args
from adapters.discord import messages as msg
from adapters.discord.buttons import dispatched_to_a_button, edit_again_view, pages_view, parse_button_id
from adapters.discord.cards import MAX_PAGES, args_json, arguments_page, arguments_pages
from adapters.discord.commands import DISCORD_MARKUP
from adapters.discord.conversations import DM, clicker_actor, member_actor
from adapters.discord.errors import edit_refusal_text, error_text, when
from adapters.discord.modals import (
    ARGS_INPUT,
    REASON_INPUT,
    TEXT_INPUT_CHARS,
    edit_modal,
    parse_modal_id,
    reject_all_modal,
    reject_modal,
    submitted_values,
)
from adapters.discord.platform import MESSAGE_CHARS
from bot.approvals.decisions import Approve, Edit, EditedAction, Reject
from bot.batch import BatchOutcome
from bot.conversation import Actor
from bot.errors import CountersignError, InvalidDecisionError
from bot.service import Countersign

log = logging.getLogger(__name__)

Interaction = discord.Interaction[Any]


class InteractionHandler:
    """Turns interactions into core calls.

    Args:
        service: the core.
    """

    def __init__(self, service: Countersign) -> None:
        self._service = service

    async def on_button(self, interaction: Interaction, action: str, approval_id: str, version: str | None) -> None:
        """Approve, Approve and trust, Edit or Reject pressed on a card."""
        if action in ("approve", "trust"):
            await interaction.response.defer()
            try:
                actor = await self._actor(interaction, approval_id)
                approval = await self._service.decide(
                    approval_id, actor, Approve(), seen_version=version, trust=action == "trust"
                )
            except Exception as exc:
                await self._refuse_followup(interaction, exc)
                return
            if approval.is_pending:  # a quorum waits for more approvals
                text = msg.VOTE_RECORDED.format(count=len(approval.votes), quorum=approval.quorum)
                await interaction.followup.send(text, ephemeral=True)
            return
        try:
            actor = await self._actor(interaction, approval_id)
            approval = await self._service.check_decider(approval_id, actor, attempted=action)
        except Exception as exc:
            await self._refuse_now(interaction, exc)
            return
        if action == "reject":
            await interaction.response.send_modal(reject_modal(approval_id))
            return
        prefill = args_json(self._service.arranged(approval.tool_name, approval.args_under_vote).as_dict())
        if len(prefill) > TEXT_INPUT_CHARS:
            text = msg.EDIT_TOO_LONG.format(length=len(prefill), limit=TEXT_INPUT_CHARS)
            await interaction.response.send_message(text, ephemeral=True)
            return
        await interaction.response.send_modal(edit_modal(approval_id, prefill))

    async def on_arguments(self, interaction: Interaction, approval_id: str, version: str | None, page: int) -> None:
        """All arguments on a card (`version` None), or Previous / Next on its pages (`version` of the page).

        From the card, an ephemeral message; from a page, that message edited in place.

        Every key and value, in the tool's order, a page at a time. A page drawn before an edit
        of the arguments leads to the first page of the arguments as they are now, saying so.
        """
        try:
            actor = await self._actor(interaction, approval_id)
            approval, arguments = await self._service.shown_arguments(approval_id, actor)
        except Exception as exc:
            await self._refuse_now(interaction, exc)
            return
        pages = arguments_pages(arguments)
        if len(pages) > MAX_PAGES:  # only a forged click: the card offers no such button then
            await interaction.response.send_message(msg.ARGS_TOO_LONG, ephemeral=True)
            return
        content = None
        if version is not None and version != approval.version:
            content, page = msg.ARGS_CHANGED, 1
        page = min(max(page, 1), len(pages))  # the text is never empty: at least `{}`
        embed = arguments_page(approval, pages, page)
        view = pages_view(approval.id, approval.version, page, len(pages))
        if version is None:
            await interaction.response.send_message(content, embed=embed, view=view, ephemeral=True)
        else:
            await interaction.response.edit_message(content=content, embed=embed, view=view)
        view.stop()  # clicks are dispatched by the DynamicItem registry, not this view

    async def on_stop(self, interaction: Interaction, turn_id: str) -> None:
        """Stop pressed on a status line: stop the turn it names; the clicker is told privately."""
        await interaction.response.defer(ephemeral=True, thinking=False)
        try:
            reply = await self._service.stop_turn(clicker_actor(interaction), turn_id=turn_id)
            text = render(reply, DISCORD_MARKUP)
        except Exception as exc:
            _log_unexpected(exc)
            text = admin_error_text(exc, DISCORD_MARKUP)
        await interaction.followup.send(text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none())

    async def on_batch(self, interaction: Interaction, action: str, review_id: str, version: str | None) -> None:
        """Approve all or Reject all pressed on a pause's first card."""
        if action == "approve":
            await interaction.response.defer()
            try:
                actor = await self._batch_actor(interaction, review_id)
                outcome = await self._service.decide_all(review_id, actor, Approve(), seen_version=version)
            except Exception as exc:
                await self._refuse_followup(interaction, exc)
                return
            await self._tell_batch(interaction, outcome)
            return
        try:
            actor = await self._batch_actor(interaction, review_id)
            await self._service.check_batch(review_id, actor, attempted="reject")
        except Exception as exc:
            await self._refuse_now(interaction, exc)
            return
        await interaction.response.send_modal(reject_all_modal(review_id))

    async def on_component(self, interaction: Interaction) -> None:
        """A click discord.py does not hand to a card button: refused in words, audited if it names an approval.

        That is a click on a component the clicked message does not show, or whose `custom_id`
        is not a card button's (see `dispatched_to_a_button`): Discord would not send one, but
        a stale client or a forged payload may, and an unanswered click reads "This interaction
        failed".
        """
        if dispatched_to_a_button(interaction):
            return
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = str(data.get("custom_id", ""))
        log.warning("refused a click on a component the message does not show: %r", custom_id[:120])
        named = parse_button_id(custom_id)
        try:
            await interaction.response.send_message(msg.UNKNOWN_BUTTON, ephemeral=True)  # first: 3 s
        finally:
            if named is not None:
                await self._service.refuse(
                    named["approval_id"],
                    clicker_actor(interaction),
                    outcome="forged",
                    reason="a button the clicked message does not show",
                )

    async def on_modal_submit(self, interaction: Interaction) -> None:
        """An Edit or Reject modal was submitted (also one opened before a restart)."""
        data: dict[str, Any] = dict(interaction.data or {})
        parsed = parse_modal_id(str(data.get("custom_id", "")))
        if parsed is None:
            log.warning("refused a submission of a form that is not ours: %r", str(data.get("custom_id", ""))[:120])
            await interaction.response.send_message(msg.UNKNOWN_FORM, ephemeral=True)
            return
        kind, approval_id = parsed
        values = submitted_values(data)
        if kind == "reject-all":
            await self._reject_all(interaction, approval_id, values.get(REASON_INPUT, "").strip() or None)
            return
        if kind == "reject":
            reason = values.get(REASON_INPUT, "").strip() or None
            await self._decide(interaction, approval_id, reason=reason)
            return
        args, problem = parse_edited_args(values.get(ARGS_INPUT, ""), msg)
        if args is None:
            await self._edit_refused(interaction, approval_id, problem or msg.EDIT_NOT_OBJECT)
            return
        await self._decide(interaction, approval_id, args=args)

    async def _decide(
        self,
        interaction: Interaction,
        approval_id: str,
        *,
        args: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> None:
        """Record the edit (`args`) or the reject (`reason`) a modal submitted."""
        await interaction.response.defer(ephemeral=True, thinking=False)
        try:
            actor = await self._actor(interaction, approval_id)
            decision: Edit | Reject = Reject(message=reason)
            if args is not None:
                approval = await self._service.approval(approval_id)
                decision = Edit(edited_action=EditedAction(name=approval.tool_name, args=args))
            await self._service.decide(approval_id, actor, decision)
        except InvalidDecisionError as exc:
            # A refused reject (a reason over 2000 characters, which only a forged form can carry)
            # is no edit, and has no Edit again.
            text = edit_refusal_text(exc) if args is not None else error_text(exc)
            view = edit_again_view(approval_id) if args is not None else discord.utils.MISSING
            await interaction.followup.send(text, ephemeral=True, view=view)
        except Exception as exc:
            await self._refuse_followup(interaction, exc)

    async def _reject_all(self, interaction: Interaction, review_id: str, reason: str | None) -> None:
        """Record the Reject all a modal submitted, then tell the clicker what happened to each call."""
        await interaction.response.defer(ephemeral=True, thinking=False)
        try:
            actor = await self._batch_actor(interaction, review_id)
            outcome = await self._service.decide_all(review_id, actor, Reject(message=reason))
        except Exception as exc:
            await self._refuse_followup(interaction, exc)
            return
        await self._tell_batch(interaction, outcome)

    async def _tell_batch(self, interaction: Interaction, outcome: BatchOutcome) -> None:
        text = batch_summary(outcome, msg, when)
        for chunk in split_message(text, MESSAGE_CHARS):
            await interaction.followup.send(chunk, ephemeral=True, allowed_mentions=discord.AllowedMentions.none())

    async def _batch_actor(self, interaction: Interaction, review_id: str) -> Actor:
        """The clicker of a batch button; in a DM, as a member of the pause's guild (see `_actor`).

        Raises:
            ApprovalNotFoundError: for a DM click naming no pause.
        """
        if interaction.guild_id is not None:
            return clicker_actor(interaction)
        first = (await self._service.pause(review_id))[0]
        return await self._actor(interaction, first.id)

    async def _actor(self, interaction: Interaction, approval_id: str) -> Actor:
        """The clicker; for a click in a DM on a guild's card (cards routed to DMs), as that guild's member.

        Raises:
            ApprovalNotFoundError: for a DM click naming no approval.
        """
        actor = clicker_actor(interaction)
        if interaction.guild_id is not None:
            return actor
        approval = await self._service.approval(approval_id)
        if approval.workspace_id == DM:
            return actor
        return await member_actor(interaction.client, approval.workspace_id, interaction.user) or actor

    async def _edit_refused(self, interaction: Interaction, approval_id: str, text: str) -> None:
        await interaction.response.send_message(text, ephemeral=True, view=edit_again_view(approval_id))

    async def _refuse_now(self, interaction: Interaction, error: Exception) -> None:
        _log_unexpected(error)
        await interaction.response.send_message(error_text(error), ephemeral=True)

    async def _refuse_followup(self, interaction: Interaction, error: Exception) -> None:
        _log_unexpected(error)
        await interaction.followup.send(error_text(error), ephemeral=True)


def _log_unexpected(error: Exception) -> None:
    if not isinstance(error, CountersignError):
        log.error("handling an interaction failed", exc_info=error)
