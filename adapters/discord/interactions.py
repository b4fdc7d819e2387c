"""Button clicks and modal submissions: acknowledge within 3 s, then call the core.

Discord's rule: every interaction is answered (or deferred) within 3 seconds. Approve defers
at once (a silent update), then records the decision; Edit and Reject answer with a modal
after a quick permission check; modal submissions defer before the database work. Refusals
go to the clicker only (ephemeral).

An MCP server's question (`adapters.discord.forms`): *Answer…* and *Continue* answer with a
page of the form after checking that the clicker is the requester and the question still
open; *Open link…*, *Decline* and *Cancel* defer, then answer through
`Countersign.answer_question`. A submitted page is merged with the pages before it (held in
memory per question and person until the last page is in), checked, and answered with the next
page's button, the problem and a button to the page to fix, or, after the last, the answer.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

import discord

from adapters.chunking import split_message
from adapters.discord import messages as msg
from adapters.discord.buttons import dispatched_to_a_button, edit_again_view, pages_view, parse_button_id
from adapters.discord.cards import MAX_PAGES, args_json, arguments_page, arguments_pages
from adapters.discord.conversations import DM, clicker_actor, member_actor
from adapters.discord.errors import edit_refusal_text, error_text, question_error_text, when
from adapters.discord.forms import (
    ButtonAction,
    QuestionModal,
    continue_view,
    form_pages,
    link_message,
    page_of,
    page_problem,
    raw_answers,
)
from adapters.discord.forms import parse_modal_id as parse_question_modal_id
from adapters.discord.markup import DISCORD_MARKUP, MESSAGE_CHARS, NO_PINGS
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
from adapters.words.admin import error_text as admin_error_text
from adapters.words.admin import render
from adapters.words.batch import batch_summary
from adapters.words.decisions import VOTE_RECORDED, parse_edited_args
from bot.base.conversation import Actor
from bot.base.errors import CountersignError, InvalidDecisionError
from bot.reviews.batch import BatchOutcome
from bot.reviews.decisions import Approve, Edit, EditedAction, Reject
from bot.service import Countersign
from bot.tools.mcp.elicitation.forms import Action, Answer, AnswerError, Form, LinkRequest, read_answer
from bot.tools.mcp.elicitation.store import QuestionRecord

log = logging.getLogger(__name__)

Interaction = discord.Interaction[Any]

HELD_FORMS = 1000
"""Partly answered forms held in memory at most (the oldest is dropped: that person starts again)."""


class InteractionHandler:
    """Turns interactions into core calls.

    Args:
        service: the core.
    """

    def __init__(self, service: Countersign) -> None:
        self._service = service
        self._entered: OrderedDict[tuple[str, str], dict[str, object]] = OrderedDict()
        """Raw values of the pages submitted so far, by (question id, user id)."""

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
                text = VOTE_RECORDED.format(count=len(approval.votes), quorum=approval.quorum)
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

    async def on_question_button(self, interaction: Interaction, action: ButtonAction, question_id: str) -> None:
        """*Answer…*, *Open link…*, *Decline* or *Cancel* on a question's card; only its requester may.

        *Answer…* opens the form's first page (a form without fields is accepted at once);
        *Open link…* accepts and shows the link to the requester alone; *Decline* and *Cancel*
        answer so. Anyone else, or a question no longer open, is told so privately.
        """
        if action == "answer":
            record = await self._open_question(interaction, question_id)
            if record is None:
                return
            form = record.question
            if not isinstance(form, Form):  # only a forged click: a link's card offers Open link…
                await interaction.response.send_message(msg.QUESTION_NOT_A_FORM, ephemeral=True)
                return
            if form.fields:
                await self._send_page(interaction, record, form, 1)
                return
        await interaction.response.defer(ephemeral=True, thinking=False)
        answer = Answer(action=Action.DECLINE if action == "decline" else Action.CANCEL)
        if action in ("answer", "link"):
            answer = Answer(action=Action.ACCEPT, content={} if action == "answer" else None)
        try:
            record = await self._answer(interaction, question_id, answer)
        except AnswerError as error:  # not for these answers; said rather than dropped all the same
            await interaction.followup.send(question_error_text(error, requester_id=None), ephemeral=True)
            return
        if record is not None and action == "link" and isinstance(record.question, LinkRequest):
            content, view = link_message(record.question, server=record.server)
            await interaction.followup.send(content, view=view, ephemeral=True, allowed_mentions=NO_PINGS)

    async def on_question_page(self, interaction: Interaction, question_id: str, page: int) -> None:
        """*Continue (n/m)* or *Fix the answer…*: open page `page` of the question's form, showing what was entered."""
        record = await self._open_question(interaction, question_id)
        if record is None:
            return
        form = record.question
        if not isinstance(form, Form) or not 1 <= page <= len(form_pages(form)):
            await interaction.response.send_message(msg.QUESTION_NOT_A_FORM, ephemeral=True)
            return
        await self._send_page(interaction, record, form, page)

    async def _open_question(self, interaction: Interaction, question_id: str) -> QuestionRecord | None:
        """The question, when it is open and the clicker its requester; else None, the clicker told why."""
        try:
            record = await self._service.question(question_id)
        except Exception as exc:
            _log_unexpected(exc)
            await interaction.response.send_message(question_error_text(exc, requester_id=None), ephemeral=True)
            return None
        if str(interaction.user.id) != record.requester_id:
            text = msg.QUESTION_ONLY_REQUESTER_CLICK.format(user=record.requester_id)
        elif not record.is_open:
            text = msg.QUESTION_CLOSED[record.status.value]
        else:
            return record
        await interaction.response.send_message(text, ephemeral=True, allowed_mentions=NO_PINGS)
        return None

    async def _send_page(self, interaction: Interaction, record: QuestionRecord, form: Form, page: int) -> None:
        entered = self._entered.get((record.id, record.requester_id))
        modal = QuestionModal(form, question_id=record.id, page=page, title=record.server, entered=entered)
        await interaction.response.send_modal(modal)

    async def _answer(self, interaction: Interaction, question_id: str, answer: Answer) -> QuestionRecord | None:
        """Answer through the core after a deferral; the record as it was asked, or None (the clicker told why).

        An `AnswerError` is not caught: the form's caller reopens the page.
        """
        try:
            record = await self._service.question(question_id)
        except Exception as exc:
            _log_unexpected(exc)
            await interaction.followup.send(question_error_text(exc, requester_id=None), ephemeral=True)
            return None
        try:
            await self._service.answer_question(question_id, clicker_actor(interaction), answer)
        except AnswerError:
            raise
        except Exception as exc:
            _log_unexpected(exc)
            text = question_error_text(exc, requester_id=record.requester_id)
            await interaction.followup.send(text, ephemeral=True, allowed_mentions=NO_PINGS)
            return None
        self._entered.pop((question_id, record.requester_id), None)
        return record

    async def _question_page(self, interaction: Interaction, question_id: str, page: int) -> None:
        """A page of a question's form was submitted: keep it, then the next page, the problem, or the answer."""
        await interaction.response.defer(ephemeral=True, thinking=False)
        user_id = str(interaction.user.id)
        try:
            record = await self._service.question(question_id)
        except Exception as exc:
            _log_unexpected(exc)
            await interaction.followup.send(question_error_text(exc, requester_id=None), ephemeral=True)
            return
        form = record.question
        if user_id != record.requester_id or not record.is_open or not isinstance(form, Form):
            # Only a forged or late submission: the pages open for the requester of an open form.
            text = (
                msg.QUESTION_ONLY_REQUESTER_CLICK.format(user=record.requester_id)
                if user_id != record.requester_id
                else msg.QUESTION_CLOSED.get(record.status.value, msg.QUESTION_NOT_A_FORM)
            )
            await interaction.followup.send(text, ephemeral=True, allowed_mentions=NO_PINGS)
            return
        pages = len(form_pages(form))
        page = min(max(page, 1), pages)
        key = (question_id, user_id)
        entered = {**self._entered.pop(key, {}), **raw_answers(form, dict(interaction.data or {}))}
        self._entered[key] = entered
        while len(self._entered) > HELD_FORMS:
            self._entered.popitem(last=False)
        problem = page_problem(form, entered, page)
        if problem is None and page < pages:
            view = continue_view(question_id, page + 1, pages)
            text = msg.QUESTION_CONTINUE.format(done=page, pages=pages)
            await interaction.followup.send(text, view=view, ephemeral=True)
            view.stop()  # clicks are dispatched by the DynamicItem registry, not this view
            return
        try:
            if problem is not None:
                raise problem
            content = read_answer(form, entered)
            await self._answer(interaction, question_id, Answer(action=Action.ACCEPT, content=content))
        except AnswerError as error:
            fix = page_of(form, error.field) if error.field is not None else page
            view = continue_view(question_id, fix, pages, label=msg.BUTTON_ANSWER_AGAIN)
            text = question_error_text(error, requester_id=record.requester_id)
            await interaction.followup.send(text, view=view, ephemeral=True, allowed_mentions=NO_PINGS)
            view.stop()

    async def on_modal_submit(self, interaction: Interaction) -> None:
        """An Edit, Reject or question modal was submitted (also one opened before a restart)."""
        data: dict[str, Any] = dict(interaction.data or {})
        question_page = parse_question_modal_id(str(data.get("custom_id", "")))
        if question_page is not None:
            await self._question_page(interaction, *question_page)
            return
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
