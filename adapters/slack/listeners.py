"""Bolt listeners: Slack events and interactions in, core calls out.

Each listener acknowledges first (Bolt acks events itself; interactions call `ack()` at once)
and hands what follows to the service's background tasks (`adapters.slack.after_ack`), which
turn the signed payload into an authenticated `Actor` and a `ConversationRef` and call one core
entry point. A modal's submission is the exception: it is checked and applied before its ack,
which carries the form's errors. Refusals go back to the clicker as ephemeral messages, or
inside the modal for a form that can be corrected.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest

from adapters.slack import blocks, forms
from adapters.slack import messages as msg
from adapters.slack.after_ack import AfterAck
from adapters.slack.errors import edit_refusal_text, error_text, question_error_text
from adapters.slack.markup import SLACK_MARKUP
from adapters.slack.platform import SlackPlatform, UserDirectory, message_failed_text
from adapters.slack.text import escape, plain_text
from adapters.words.admin import error_text as admin_error_text
from adapters.words.admin import render
from adapters.words.batch import batch_summary
from adapters.words.conversation import EMPTY_MENTION
from adapters.words.decisions import DECISION_FAILED, VOTE_RECORDED, parse_edited_args
from adapters.words.display import is_blank
from bot.base.conversation import Actor, ConversationRef, IncomingMessage
from bot.base.errors import CountersignError
from bot.base.log_context import about
from bot.ports import BatchOffer
from bot.reviews.decisions import Approve, Edit, EditedAction, Reject
from bot.service import Countersign
from bot.tools.mcp.elicitation.desk import AlreadyAnsweredError
from bot.tools.mcp.elicitation.forms import Action, Answer, AnswerError, Form, LinkRequest, read_answer
from bot.tools.mcp.elicitation.store import QuestionRecord

log = logging.getLogger(__name__)

PLATFORM = "slack"
_PERSON_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})
"""Message subtypes that are something a person wrote to the bot (Slack's message subtypes)."""

_MENTION = re.compile(r"<@([A-Z0-9]+)(\|[^>]*)?>")
_TAKEN = "countersign_taken"
"""Bolt context key: what the middleware took (an `IncomingMessage` it claimed, an `_Empty`
mention, or None), for the listener to start."""
LAST_RETRY = 3
"""`X-Slack-Retry-Num` of Slack's last delivery of an event it got no 200 for: Slack retries
three times (Slack's Events API, "Retries"). Over Socket Mode the envelope's `retry_attempt`,
which Bolt hands on as the same header."""


@dataclass(frozen=True, slots=True)
class _Empty:
    """A mention without words, to be answered with a hint."""

    conversation: ConversationRef
    user_id: str


class SlackListeners:
    """Registers the bot's listeners on a Bolt app.

    Args:
        service: the core.
        platform: the outbound port (for ephemeral replies).
        users: the user directory (display names).
        after_ack: runs what a listener does once its request is acked.
    """

    def __init__(
        self,
        service: Countersign,
        platform: SlackPlatform,
        users: UserDirectory,
        after_ack: AfterAck,
    ) -> None:
        self._after_ack = after_ack.run
        self._service = service
        self._platform = platform
        self._users = users

    def register(self, app: AsyncApp) -> None:
        """Attach every listener; each subscribed event type has one (Bolt answers 404 else).

        Messages are accepted in listener middleware, which Bolt runs before it acknowledges
        the event (`accept_mention`, `accept_message`); the listener then starts the turn.
        """
        app.event("app_mention", middleware=[self.accept_mention])(self.start_turn)
        app.event("message", middleware=[self.accept_message])(self.start_turn)
        app.action(blocks.ACTION_APPROVE)(self.on_approve)
        app.action(blocks.ACTION_TRUST)(self.on_trust)
        app.action(blocks.ACTION_EDIT)(self.on_edit)
        app.action(blocks.ACTION_REJECT)(self.on_reject)
        app.action(blocks.ACTION_SHOW_ARGS)(self.on_show_args)
        app.action(blocks.ACTION_STOP)(self.on_stop)
        app.action(blocks.ACTION_APPROVE_ALL)(self.on_approve_all)
        app.action(blocks.ACTION_REJECT_ALL)(self.on_reject_all)
        app.view(blocks.VIEW_EDIT)(self.on_edit_submitted)
        app.view(blocks.VIEW_REJECT)(self.on_reject_submitted)
        app.view(blocks.VIEW_REJECT_ALL)(self.on_reject_all_submitted)
        app.action(forms.ACTION_ANSWER)(self.on_question_answer)
        app.action(forms.ACTION_OPEN_LINK)(self.on_question_link)
        app.action(forms.ACTION_DECLINE)(self.on_question_decline)
        app.action(forms.ACTION_CANCEL)(self.on_question_cancel)
        app.action(forms.ACTION_FOLLOW_LINK)(self.on_question_follow_link)
        app.view(forms.VIEW_QUESTION)(self.on_question_submitted)

    # --- messages ------------------------------------------------------------------------
    #
    # Bolt acknowledges an event before its listener runs (Slack wants an answer within 3 s),
    # and Slack does not deliver an acknowledged event again. A message is therefore claimed in
    # the inbox in the middleware, before the acknowledgement: once Slack has its 200, the
    # message is in PostgreSQL and a live replica answers it whatever happens to this process.
    # If the claim fails (the database is down), Bolt answers 500 and Slack delivers the event
    # again later (docs/decisions/0009); after its last retry, the sender is told
    # (docs/decisions/0036-messages-given-up.md).

    async def accept_mention(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        context: AsyncBoltContext,
        request: AsyncBoltRequest,
        next: Callable[[], Awaitable[None]],
    ) -> None:
        """A mention in a channel: the conversation is the thread under it (or its thread).

        With `/countersign scope channel`, the whole channel is one conversation instead and
        the bot answers in the channel.
        """
        if not _from_a_bot(event, context):
            await self._take(
                event, body, context, request, lambda: self._mention_conversation(event, body), addressed=True
            )
        await next()

    async def accept_message(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        context: AsyncBoltContext,
        request: AsyncBoltRequest,
        next: Callable[[], Awaitable[None]],
    ) -> None:
        """A DM, or a reply in a thread the bot takes part in.

        Edits, deletions, joins and other subtypes are ignored, as are bots (itself included);
        a reply also sent to the channel (`thread_broadcast`) or with a file (`file_share`) is
        a person's message like any other.
        """
        if event.get("subtype") not in _PERSON_SUBTYPES or _from_a_bot(event, context):
            await next()
            return
        bot_user_id = context.bot_user_id
        await self._take(
            event,
            body,
            context,
            request,
            lambda: self._conversation_of_message(event, body, bot_user_id),
            addressed=event.get("channel_type") == "im",
        )
        await next()

    async def _mention_conversation(self, event: dict[str, Any], body: dict[str, Any]) -> ConversationRef:
        place = _mention_thread(event, body)
        scoped = await self._service.conversation_at(
            PLATFORM, place.workspace_id, place.channel_id, place.thread, is_dm=False
        )
        return scoped or place  # never None: a mention always names its thread

    async def _conversation_of_message(
        self, event: dict[str, Any], body: dict[str, Any], bot_user_id: str | None
    ) -> ConversationRef | None:
        if event.get("subtype") == "file_share" and not str(event.get("text") or "").strip():
            return None  # a file without words: nothing the agent could read
        team = _team_of(body, event)
        thread_ts = event.get("thread_ts")
        if event.get("channel_type") == "im":
            return await self._service.conversation_at(PLATFORM, team, event["channel"], thread_ts, is_dm=True)
        if thread_ts is None or _mentions(event.get("text", ""), bot_user_id):
            return None  # channel chatter, or a mention that app_mention already delivers
        conversation = await self._service.conversation_at(PLATFORM, team, event["channel"], thread_ts, is_dm=False)
        if conversation is None or conversation.thread is None:
            return None  # one conversation per channel: only mentions reach it
        return conversation if await self._service.knows_conversation(conversation) else None

    async def _take(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        context: AsyncBoltContext,
        request: AsyncBoltRequest,
        find: Callable[[], Awaitable[ConversationRef | None]],
        *,
        addressed: bool,
    ) -> None:
        """Find the message's conversation and claim the message, before the acknowledgement.

        What was taken is left in the Bolt context for `start_turn`. Whatever fails (the
        database is down) is raised: Bolt answers 500 and Slack delivers the event again. On
        Slack's last retry (`LAST_RETRY`) a last try follows the answer (`_last_try`), so that
        the sender is told if the message still cannot be taken.

        Args:
            event: the `message` or `app_mention` event.
            body: the request's payload (its `team_id`).
            context: Bolt's context of the request.
            request: Bolt's request (its `x-slack-retry-num` header).
            find: the message's conversation, or None when the message is not for the bot.
            addressed: whether the message is for the bot whatever `find` says (a mention, a
                DM): a thread reply is, only once `find` said the bot takes part there.
        """
        bot_user_id = context.bot_user_id
        try:
            conversation = await find()
            taken = None if conversation is None else await self._claim(event, conversation, bot_user_id)
        except Exception:
            if retry_num(request) >= LAST_RETRY:
                last_try = self._last_try(event, body, find, bot_user_id, addressed=addressed)
                self._after_ack(last_try, "a message's last try")
            raise
        context[_TAKEN] = taken

    async def _claim(
        self, event: dict[str, Any], conversation: ConversationRef, bot_user_id: str | None
    ) -> IncomingMessage | _Empty | None:
        """Claim the message: the message to handle, an empty mention to answer, or None (a repeated delivery).

        Raises:
            Exception: when the database cannot take it (nothing is claimed).
        """
        text = plain_text(_strip_mentions(event.get("text", ""), bot_user_id))
        user_id = event["user"]
        if is_blank(text):
            return _Empty(conversation, user_id)
        user = await self._users.get(conversation.workspace_id, user_id)
        actor = Actor(
            platform=PLATFORM,
            workspace_id=conversation.workspace_id,
            user_id=user_id,
            display_name=user.display_name,
        )
        message = IncomingMessage(actor=actor, conversation=conversation, text=text, message_id=event["ts"])
        return message if await self._service.accept(message) else None

    async def start_turn(self, context: AsyncBoltContext) -> None:
        """After the acknowledgement: start the turn of an accepted message (or say it was empty)."""
        self._start(context.get(_TAKEN))

    def _start(self, taken: object) -> None:
        if isinstance(taken, _Empty):
            conversation = taken.conversation
            whisper = self._whisper(
                conversation.workspace_id,
                conversation.channel_id,
                taken.user_id,
                EMPTY_MENTION,
                conversation.thread,
            )
            self._after_ack(whisper, "an empty mention's answer")
        elif isinstance(taken, IncomingMessage):
            self._service.submit_accepted(taken)

    async def _last_try(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        find: Callable[[], Awaitable[ConversationRef | None]],
        bot_user_id: str | None,
        *,
        addressed: bool,
    ) -> None:
        """After Slack's last delivery of a message failed: try once more, and tell the sender if that fails too.

        The try comes first so that a message stored after all is never both answered and
        given up: a claim that reached the inbox although its delivery failed (the connection
        dropped after the commit) is found there now, and handled, not reported. The notice is
        the one a message given up gets (`TurnFailed` with its text), as an ephemeral message
        where the sender wrote (in the channel, or in the thread of a reply). A reply in a
        thread whose conversation could not be looked up gets none: the bot may not take part
        there.
        """
        conversation: ConversationRef | None = None
        try:
            conversation = await find()
            if conversation is None:
                return  # not a message for the bot after all
            taken = await self._claim(event, conversation, bot_user_id)
        except Exception:
            thread_id = (conversation or _mention_thread(event, body)).thread_id
            text = plain_text(_strip_mentions(event.get("text", ""), bot_user_id))
            with about(thread_id, event_id=event.get("ts")):
                if conversation is None and not addressed:
                    log.exception("Slack will not deliver a message again; whether it was for the bot is unknown")
                    return
                if is_blank(text):
                    log.exception("Slack will not deliver an empty mention again; it could not be answered")
                    return
                log.exception("Slack will not deliver a message again and it could not be taken; its sender is told")
            notice = message_failed_text(thread_id, text)
            await self._whisper(_team_of(body, event), event["channel"], event["user"], notice, event.get("thread_ts"))
            return
        if isinstance(taken, IncomingMessage):
            with about(conversation.thread_id, event_id=taken.message_id):
                log.info("a message was taken on a last try after Slack's last delivery of it failed")
        self._start(taken)

    # --- buttons -------------------------------------------------------------------------

    async def on_approve(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        """Approve: record the decision; a refusal is told to the clicker only."""
        await ack()
        self._after_ack(self._approve(body, action, trust=False), "Approve")

    async def on_trust(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        """Approve and trust (docs/decisions/0022): the approval and its grant, or a refusal to the clicker only."""
        await ack()
        self._after_ack(self._approve(body, action, trust=True), "Approve and trust")

    async def _approve(self, body: dict[str, Any], action: dict[str, Any], *, trust: bool) -> None:
        actor = await self._clicker(body)
        if actor is None:
            return
        try:
            approval = await self._service.decide(
                _text_at(action, "value", empty=True) or "",
                actor,
                Approve(),
                seen_version=blocks.version_of(_text_at(action, "block_id")),
                trust=trust,
            )
        except Exception as exc:
            await self._refuse(body, exc)
            return
        if approval.is_pending:  # a quorum waits for more approvals
            text = VOTE_RECORDED.format(count=len(approval.votes), quorum=approval.quorum)
            await self._refuse_text(body, text)

    async def on_edit(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        """Edit: check the clicker may decide, then open the modal prefilled with the arguments."""
        await ack()
        self._after_ack(self._open_edit(body, action, context), "Edit")

    async def _open_edit(self, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext) -> None:
        actor = await self._clicker(body)
        if actor is None:
            return
        try:
            approval = await self._service.check_decider(
                _text_at(action, "value", empty=True) or "", actor, attempted="edit"
            )
        except Exception as exc:
            await self._refuse(body, exc)
            return
        prefill = blocks.args_json(self._service.arranged(approval.tool_name, approval.args_under_vote).as_dict())
        if len(prefill) > blocks.INPUT_CHARS:
            await self._refuse_text(body, msg.EDIT_TOO_LONG.format(length=len(prefill), limit=blocks.INPUT_CHARS))
            return
        modal = blocks.edit_modal(approval, prefill, clicked_in=actor.channel_id)
        await context.client.views_open(trigger_id=_text_at(body, "trigger_id"), view=modal)

    async def on_show_args(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        """All arguments: open a modal with every key and value of the call, in the tool's order."""
        await ack()
        self._after_ack(self._open_arguments(body, action, context), "All arguments")

    async def _open_arguments(self, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext) -> None:
        actor = await self._clicker(body)
        if actor is None:
            return
        try:
            approval, arguments = await self._service.shown_arguments(
                _text_at(action, "value", empty=True) or "", actor
            )
        except Exception as exc:
            await self._refuse(body, exc)
            return
        view = blocks.arguments_view(approval, arguments)
        if view is None:  # only a forged click: the card offers no such button then
            await self._refuse_text(body, msg.ARGS_VIEW_TOO_LONG)
            return
        await context.client.views_open(trigger_id=_text_at(body, "trigger_id"), view=view)

    async def on_reject(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        """Reject: check the clicker may decide, then open the modal asking for a reason."""
        await ack()
        self._after_ack(self._open_reject(body, action, context), "Reject")

    async def _open_reject(self, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext) -> None:
        actor = await self._clicker(body)
        if actor is None:
            return
        try:
            approval = await self._service.check_decider(
                _text_at(action, "value", empty=True) or "", actor, attempted="reject"
            )
        except Exception as exc:
            await self._refuse(body, exc)
            return
        modal = blocks.reject_modal(approval, clicked_in=actor.channel_id)
        await context.client.views_open(trigger_id=_text_at(body, "trigger_id"), view=modal)

    async def on_approve_all(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        """Approve all: each pending call of the pause, as its own Approve would; the clicker reads what happened."""
        await ack()
        self._after_ack(self._approve_all(body, action), "Approve all")

    async def _approve_all(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        actor = await self._clicker(body)
        if actor is None:
            return
        try:
            outcome = await self._service.decide_all(
                _text_at(action, "value", empty=True) or "",
                actor,
                Approve(),
                seen_version=blocks.batch_version_of(_text_at(action, "block_id")),
            )
        except Exception as exc:
            await self._refuse(body, exc)
            return
        await self._refuse_text(body, batch_summary(outcome, msg, blocks.when_token, escape))

    async def on_reject_all(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        """Reject all: check the clicker may reject some call of the pause, then ask for one optional reason."""
        await ack()
        self._after_ack(self._open_reject_all(body, action, context), "Reject all")

    async def _open_reject_all(self, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext) -> None:
        actor = await self._clicker(body)
        if actor is None:
            return
        review_id = _text_at(action, "value", empty=True) or ""
        try:
            pending = await self._service.check_batch(review_id, actor, attempted="reject")
        except Exception as exc:
            await self._refuse(body, exc)
            return
        batch = BatchOffer(review_id=review_id, pending=len(pending), version="")
        modal = blocks.reject_all_modal(batch, clicked_in=actor.channel_id)
        await context.client.views_open(trigger_id=_text_at(body, "trigger_id"), view=modal)

    async def on_stop(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        """Stop on a progress message: stop the turn it names; the clicker is told privately how it went."""
        await ack()
        self._after_ack(self._stop(body, action), "Stop")

    async def _stop(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        actor = await self._clicker(body)
        if actor is None:
            return
        try:
            reply = await self._service.stop_turn(actor, turn_id=_text_at(action, "value", empty=True) or "")
        except Exception as exc:
            if not isinstance(exc, CountersignError):
                log.error("handling a Stop click failed", exc_info=exc)
            await self._refuse_text(body, admin_error_text(exc, SLACK_MARKUP))
            return
        await self._refuse_text(body, render(reply, SLACK_MARKUP))

    # --- modals --------------------------------------------------------------------------

    async def on_edit_submitted(self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The edited JSON: invalid input is shown in the modal and nothing changes."""
        args, problem = parse_edited_args(_input_value(view, blocks.EDIT_BLOCK, blocks.EDIT_INPUT) or "", msg)
        if args is None:
            await ack(response_action="errors", errors={blocks.EDIT_BLOCK: problem or msg.EDIT_NOT_OBJECT})
            return
        actor = await self._clicker(body)
        if actor is None:
            await ack(response_action="errors", errors={blocks.EDIT_BLOCK: DECISION_FAILED})
            return
        approval_id, clicked_in = blocks.parse_form_metadata(_text_at(view, "private_metadata", empty=True) or "")
        actor = replace(actor, channel_id=clicked_in)
        try:
            approval = await self._service.approval(approval_id, actor=actor)
            edit = Edit(edited_action=EditedAction(name=approval.tool_name, args=args))
            await self._service.decide(approval_id, actor, edit)
        except Exception as exc:
            if not isinstance(exc, CountersignError):
                log.exception("edit of approval %s failed", approval_id)
            await ack(response_action="errors", errors={blocks.EDIT_BLOCK: _clip(edit_refusal_text(exc))})
            return
        await ack()

    async def on_reject_submitted(self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The reject reason (optional); the decision is recorded before the modal closes."""
        reason = (_input_value(view, blocks.REASON_BLOCK, blocks.REASON_INPUT) or "").strip() or None
        actor = await self._clicker(body)
        if actor is None:
            await ack(response_action="errors", errors={blocks.REASON_BLOCK: DECISION_FAILED})
            return
        approval_id, clicked_in = blocks.parse_form_metadata(_text_at(view, "private_metadata", empty=True) or "")
        actor = replace(actor, channel_id=clicked_in)
        try:
            await self._service.decide(approval_id, actor, Reject(message=reason))
        except Exception as exc:
            if not isinstance(exc, CountersignError):
                log.exception("reject of approval %s failed", approval_id)
            await ack(response_action="errors", errors={blocks.REASON_BLOCK: _clip(error_text(exc))})
            return
        await ack()

    async def on_reject_all_submitted(self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The Reject all reason (optional): each call is decided before the modal shows what happened."""
        reason = (_input_value(view, blocks.REASON_BLOCK, blocks.REASON_INPUT) or "").strip() or None
        actor = await self._clicker(body)
        if actor is None:
            await ack(response_action="errors", errors={blocks.REASON_BLOCK: DECISION_FAILED})
            return
        review_id, clicked_in = blocks.parse_form_metadata(_text_at(view, "private_metadata", empty=True) or "")
        try:
            outcome = await self._service.decide_all(
                review_id, replace(actor, channel_id=clicked_in), Reject(message=reason)
            )
        except Exception as exc:
            if not isinstance(exc, CountersignError):
                log.exception("reject all of pause %s failed", review_id[:40])
            await ack(response_action="errors", errors={blocks.REASON_BLOCK: _clip(error_text(exc))})
            return
        summary = batch_summary(outcome, msg, blocks.when_token, escape)
        await ack(response_action="update", view=blocks.batch_done_view(summary))

    # --- an MCP server's questions -------------------------------------------------------
    #
    # Only the requester answers (docs/decisions/0054-mcp-elicitation.md); the card's buttons
    # carry the question id alone (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md).
    # The question is read first, so that anyone else is told whose it is, and a closed one
    # says how it ended, before any modal opens; `answer_question` checks both again.

    async def on_question_answer(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        """*Answer…*: open the question's form for its requester; anyone else is told whose it is."""
        await ack()
        self._after_ack(self._open_question(body, action, context), "Answer")

    async def _open_question(self, body: dict[str, Any], action: dict[str, Any], context: AsyncBoltContext) -> None:
        asked = await self._asked(body, action)
        if asked is None:
            return
        record, _ = asked
        form = record.question
        if not isinstance(form, Form):  # only a forged click: a link's card has no Answer…
            await self._refuse_text(body, msg.QUESTION_NOT_A_FORM)
            return
        modal = forms.question_modal(form, question_id=record.id, title=record.server)
        await context.client.views_open(trigger_id=_text_at(body, "trigger_id"), view=modal)

    async def on_question_link(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        """*Open link…*: accept, and show the requester alone the link (never in the channel)."""
        await ack()
        self._after_ack(self._open_link(body, action), "Open link")

    async def _open_link(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        asked = await self._asked(body, action)
        if asked is None:
            return
        record, actor = asked
        link = record.question
        if not isinstance(link, LinkRequest):  # only a forged click: a form's card has no Open link…
            await self._refuse_text(body, msg.QUESTION_NOT_A_LINK)
            return
        if not await self._answer(body, record, actor, Answer(action=Action.ACCEPT)):
            return
        if actor.channel_id is None:
            log.warning("question %s accepted, but the click names no channel to show the link in", record.id)
            return
        shown = forms.link_blocks(link, question_id=record.id, server=record.server)
        try:
            await self._platform.whisper(
                actor.workspace_id,
                actor.channel_id,
                actor.user_id,
                forms.question_text(server=record.server, tool=record.tool_name),
                thread_ts=_text_at(body, "message", "thread_ts"),
                blocks=shown,
            )
        except Exception:
            log.exception("could not show question %s's link to its requester", record.id)

    async def on_question_decline(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        """*Decline*: the requester answers `decline`."""
        await ack()
        self._after_ack(self._answer_with(body, action, Action.DECLINE), "Decline")

    async def on_question_cancel(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        """*Cancel*: the requester answers `cancel`."""
        await ack()
        self._after_ack(self._answer_with(body, action, Action.CANCEL), "Cancel")

    async def _answer_with(self, body: dict[str, Any], action: dict[str, Any], answer: Action) -> None:
        asked = await self._asked(body, action)
        if asked is not None:
            await self._answer(body, *asked, Answer(action=answer))

    async def on_question_follow_link(self, ack: AsyncAck) -> None:
        """The link button of the requester's ephemeral message: Slack opens the URL; only an ack is due."""
        await ack()

    async def on_question_submitted(self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The answer form: an answer that does not fit is shown at its field and nothing changes."""
        question_id = _text_at(view, "private_metadata", empty=True) or ""
        actor = await self._clicker(body)
        try:
            if actor is None:
                raise CountersignError("no user")
            record = await self._service.question(question_id)
        except Exception as exc:
            refusal = self._question_refusal(exc, question_id)
            await ack(response_action="update", view=forms.question_notice_view(refusal))
            return
        form = record.question
        if not isinstance(form, Form):  # only a forged submission
            await ack(response_action="update", view=forms.question_notice_view(msg.QUESTION_NOT_A_FORM))
            return
        values = view.get("state", {}).get("values") if isinstance(view.get("state"), dict) else None
        raw = forms.raw_answers(form, values if isinstance(values, dict) else {})
        try:
            answer = Answer(action=Action.ACCEPT, content=read_answer(form, raw))
            await self._service.answer_question(question_id, actor, answer)
        except AnswerError as exc:
            errors = forms.field_errors(form, exc)
            if errors:
                await ack(response_action="errors", errors=errors)
            else:
                await ack(response_action="update", view=forms.question_notice_view(question_error_text(exc)))
            return
        except Exception as exc:
            refusal = question_error_text(exc, requester_id=record.requester_id)
            if not isinstance(exc, CountersignError):
                log.exception("answering question %s failed", question_id)
            await ack(response_action="update", view=forms.question_notice_view(refusal))
            return
        await ack()

    async def _asked(self, body: dict[str, Any], action: dict[str, Any]) -> tuple[QuestionRecord, Actor] | None:
        """The open question a button names, and its requester who clicked; else the clicker is told why and None."""
        actor = await self._clicker(body)
        if actor is None:
            return None
        question_id = _text_at(action, "value", empty=True) or ""
        try:
            record = await self._service.question(question_id)
        except Exception as exc:
            await self._refuse_text(body, self._question_refusal(exc, question_id))
            return None
        if (actor.workspace_id, actor.user_id) != (record.workspace_id, record.requester_id):
            await self._refuse_text(body, msg.QUESTION_NOT_YOURS.format(user=record.requester_id))
            return None
        if not record.is_open:
            await self._refuse_text(body, question_error_text(AlreadyAnsweredError(record.status)))
            return None
        return record, actor

    async def _answer(self, body: dict[str, Any], record: QuestionRecord, actor: Actor, answer: Answer) -> bool:
        """Answer the question; a refusal is told to the clicker only. Whether it was taken."""
        try:
            await self._service.answer_question(record.id, actor, answer)
        except Exception as exc:
            if not isinstance(exc, CountersignError):
                log.error("answering question %s failed", record.id, exc_info=exc)
            await self._refuse_text(body, question_error_text(exc, requester_id=record.requester_id))
            return False
        return True

    @staticmethod
    def _question_refusal(error: Exception, question_id: str) -> str:
        if not isinstance(error, CountersignError):
            log.error("reading question %s failed", question_id[:40], exc_info=error)
        return question_error_text(error)

    # --- helpers -------------------------------------------------------------------------

    async def _clicker(self, body: dict[str, Any]) -> Actor | None:
        """The authenticated clicker: ids from the signed payload, the name from users.info.

        The channel of the clicked message is the payload's too (a card escalated to a
        channel may be decided by whoever clicks there). A clicker whose home workspace
        (`user.team_id`) is neither the workspace nor its Enterprise Grid organisation is a
        Slack Connect user of another organisation: never this workspace's admin, whatever
        users.info says (they may still be a listed approver or bot admin by user id). None
        (and a warning) for a payload naming no user or no workspace: there is nobody to
        decide anything for, or to tell.
        """
        user_id = _text_at(body, "user", "id")
        team = _text_at(body, "team", "id") or _text_at(body, "user", "team_id")
        if user_id is None or team is None or ":" in team:
            log.warning("ignored a Slack interaction that names no user or workspace (%s)", _kind_of(body))
            return None
        user = await self._users.get(team, user_id)
        channel = _text_at(body, "channel", "id") or _text_at(body, "container", "channel_id")
        home = _text_at(body, "user", "team_id")
        organisation = _text_at(body, "enterprise", "id") or _text_at(body, "team", "enterprise_id")
        outsider = home is not None and home not in (team, organisation)
        return Actor(
            platform=PLATFORM,
            workspace_id=team,
            user_id=user_id,
            display_name=user.display_name,
            is_admin=False if outsider else None,
            channel_id=channel,
        )

    async def _refuse(self, body: dict[str, Any], error: Exception) -> None:
        if not isinstance(error, CountersignError):
            log.error("handling a click failed", exc_info=error)
        await self._refuse_text(body, error_text(error))

    async def _refuse_text(self, body: dict[str, Any], text: str) -> None:
        channel = _text_at(body, "channel", "id") or _text_at(body, "container", "channel_id")
        user = _text_at(body, "user", "id")
        team = _text_at(body, "team", "id") or _text_at(body, "user", "team_id")
        if channel and user and team:
            await self._whisper(team, channel, user, text, _text_at(body, "message", "thread_ts"))

    async def _whisper(self, team: str, channel: str, user: str, text: str, thread: str | None) -> None:
        try:
            await self._platform.whisper(team, channel, user, text, thread_ts=thread)
        except Exception:
            log.exception("could not send an ephemeral message to %s in %s", user, channel)


def _from_a_bot(event: dict[str, Any], context: AsyncBoltContext) -> bool:
    return bool(event.get("bot_id")) or event.get("user") in (None, context.bot_user_id)


def _team_of(body: dict[str, Any], event: dict[str, Any]) -> str:
    return str(body.get("team_id") or event.get("team") or "")


def _mention_thread(event: dict[str, Any], body: dict[str, Any]) -> ConversationRef:
    """A mention's conversation under the default scope: the thread under it, or the thread it is in."""
    thread: str = event.get("thread_ts") or event["ts"]
    return ConversationRef(
        platform=PLATFORM, workspace_id=_team_of(body, event), channel_id=event["channel"], thread=thread
    )


def retry_num(request: AsyncBoltRequest) -> int:
    """Which of Slack's retries the request is (`X-Slack-Retry-Num`): 0 for a first delivery."""
    values = request.headers.get("x-slack-retry-num") or ()
    number = values[0] if values else "0"
    return int(number) if number.isdecimal() else 0


def _mentions(text: str, bot_user_id: str | None) -> bool:
    return bot_user_id is not None and any(m.group(1) == bot_user_id for m in _MENTION.finditer(text))


def _strip_mentions(text: str, bot_user_id: str | None) -> str:
    """Remove the bot's own mention; other mentions stay (they are part of the request)."""
    return _MENTION.sub(lambda m: "" if m.group(1) == bot_user_id else m.group(0), text).strip()


def _input_value(view: dict[str, Any], block_id: str, action_id: str) -> str | None:
    return _text_at(view, "state", "values", block_id, action_id, "value", empty=True)


def _text_at(payload: Any, *path: str, empty: bool = False) -> str | None:
    """The string at `path` in a payload, else None (also for an empty one unless `empty`).

    Payloads are signed by Slack, but their shapes are only as good as the sender made them:
    a missing key or a value of another type means "not given", never an exception.
    """
    value = payload
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, str) and (value or empty) else None


def _kind_of(body: dict[str, Any]) -> str:
    return _text_at(body, "type") or "no type"


def _clip(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
