"""The core's `Platform` port, implemented with discord.py."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime

import aiohttp
import discord

from adapters.chunking import split_message
from adapters.discord import messages as msg
from adapters.discord.buttons import card_view, stop_view
from adapters.discord.cards import card_embed, shows_all_button, target_mention
from adapters.discord.cards import unshowable as unshowable_in_discord
from adapters.discord.conversations import DM, known_guild, parse_message_ref, strip_bot_mention, target_channel_id
from adapters.discord.forms import Outcome, finished_question_embed, question_embed, question_view
from adapters.discord.markup import MESSAGE_CHARS, NO_PINGS
from adapters.words import model as model_msg
from adapters.words.cards import CARDS_IN_DMS
from adapters.words.conversation import MESSAGE_FAILED, RESUME_NOT_RUN, RESUME_OUTCOME_UNKNOWN, TURN_FAILED
from adapters.words.display import (
    excerpt,
    given_up_calls,
    is_blank,
    model_failed_text,
    offers_stop,
    progress_line,
    shows_something,
)
from adapters.words.mcp import held_text
from bot.base.conversation import Actor, ConversationRef
from bot.ports import (
    Activity,
    ApprovalCard,
    ApprovalExpired,
    AskElsewhere,
    CardsElsewhere,
    CardTarget,
    ModelFailed,
    Notice,
    ResumeGivenUp,
    ReviewPending,
    ToolsHeld,
    TurnFailed,
    TurnStopped,
)
from bot.reviews.escalation.rules import TargetKind
from bot.reviews.shown import Arguments, Unshowable
from bot.tools.mcp.elicitation.forms import Action
from bot.tools.mcp.elicitation.store import QuestionRecord, QuestionStatus

log = logging.getLogger(__name__)

_SPOILER = re.compile(r"\|\|.*?\|\|", re.DOTALL)
"""Discord's spoiler markup (`||hidden||`), masked where the bot quotes a person's text."""
"""Agent text and cards never ping: no @everyone, @here, role or user mentions."""


def card_ref(channel_id: int, message_id: int) -> str:
    """Our reference to a posted card: `<channel id>/<message id>`."""
    return f"{channel_id}/{message_id}"


def _tools(names: list[str]) -> str:
    """Call names for a notice, each as code: `send`, `researcher: lookup` (names of configured tools and subagents)."""
    return ", ".join(f"`{name}`" for name in names)


def _card_view(card: ApprovalCard) -> discord.ui.View:
    """A card's buttons: no Approve where Discord cannot show the arguments in full (`cards.unshowable`).

    All arguments where a value is shortened (`cards.shows_all_button`).
    """
    approval = card.approval
    showable = not approval.is_pending or unshowable_in_discord(card.under_vote) is None
    return card_view(
        approval.id,
        approval.version,
        pending=approval.is_pending,
        batch=card.batch,
        trust_s=approval.trust_offer_s if showable else None,
        approve=showable,
        show_all=shows_all_button(card),
    )


def _tool_of(question: QuestionRecord) -> str:
    """The tool's own name on the server, as the card shows it (the registry name is `<server>__<tool>`)."""
    prefix = f"{question.server}__"
    return question.tool_name.removeprefix(prefix)


def _split_ref(ref: str) -> tuple[int, int]:
    channel, message = ref.split("/", 1)
    return int(channel), int(message)


class DiscordPlatform:
    """Posts answers, cards and notices to Discord for the core.

    Args:
        client: the connected discord.py client.
    """

    name = "discord"

    def __init__(self, client: discord.Client) -> None:
        self._client = client

    def _channel(self, channel_id: int) -> discord.PartialMessageable:
        return self._client.get_partial_messageable(channel_id)

    async def post_answer(self, conversation: ConversationRef, text: str) -> None:
        """Post the answer in pieces of at most 2,000 characters, pinging nobody."""
        channel = self._channel(target_channel_id(conversation))
        for chunk in split_message(text, MESSAGE_CHARS):
            await channel.send(chunk, allowed_mentions=NO_PINGS)

    async def post_card(self, target: CardTarget, card: ApprovalCard) -> str:
        """Post the embed with its buttons in the conversation, a channel or a DM.

        An escalated copy posted in the conversation pings the role (or user) it escalated to,
        and nobody else: a role's members cannot be listed without the privileged Server
        Members intent, so the ping is how they learn of it.

        Returns:
            `<channel id>/<message id>`.
        """
        if target.user_id is not None:
            user = self._client.get_user(int(target.user_id)) or await self._client.fetch_user(int(target.user_id))
            channel_id = (await user.create_dm()).id
        elif target.channel_id is not None:
            channel_id = int(target.channel_id)
        else:
            channel_id = target_channel_id(target.conversation)
        content, mentions = None, NO_PINGS
        escalated = target.escalated_to
        if escalated is not None and target.user_id is None and target.channel_id is None:
            if escalated.kind is TargetKind.ROLE:
                mentions = discord.AllowedMentions(
                    everyone=False, users=False, roles=[discord.Object(int(escalated.subject_id))]
                )
            elif escalated.kind is TargetKind.USER:
                mentions = discord.AllowedMentions(
                    everyone=False, roles=False, users=[discord.Object(int(escalated.subject_id))]
                )
            content = msg.ESCALATED_PING.format(mention=target_mention(escalated))
        view = _card_view(card)
        message = await self._channel(channel_id).send(
            content, embed=card_embed(card), view=view, allowed_mentions=mentions
        )
        view.stop()  # clicks are dispatched by the DynamicItem registry, not this view
        return card_ref(channel_id, message.id)

    async def update_card(self, conversation: ConversationRef, card_ref: str, card: ApprovalCard) -> None:
        """Edit the card in place; its buttons go once decided, the batch buttons once fewer than two calls wait."""
        channel_id, message_id = _split_ref(card_ref)
        pending = card.approval.is_pending
        view = _card_view(card) if pending or card.batch is not None else None
        await (
            self._channel(channel_id)
            .get_partial_message(message_id)
            .edit(embed=card_embed(card), view=view, allowed_mentions=NO_PINGS)
        )
        if view is not None:
            view.stop()

    def unshowable(self, arguments: Arguments) -> Unshowable | None:
        """Why Discord cannot show `arguments` in full (`adapters.discord.cards.unshowable`), else None."""
        return unshowable_in_discord(arguments)

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> None:
        """Post a notice in the conversation (plain messages cannot be ephemeral on Discord).

        Only an expiry notice and a given-up pause's may ping, and only their requester. A call
        refused in a DM (`AskElsewhere`) names the servers where to ask (a server the bot can no
        longer see is left out; with none left, "a server"). A notice about a message that could
        not be answered quotes it only while it is still there (`_message_failed`).
        """
        if isinstance(notice, AskElsewhere):
            text = await self._ask_elsewhere(notice)
        elif isinstance(notice, TurnFailed) and notice.message is not None:
            text = await self._message_failed(conversation, notice)
        else:
            text = self._render(conversation, notice, recipient)
        mentions = NO_PINGS
        if isinstance(notice, ApprovalExpired):
            mentions = discord.AllowedMentions(users=[discord.Object(int(notice.approval.requester_id))])
        if isinstance(notice, ResumeGivenUp) and recipient is not None:
            mentions = discord.AllowedMentions(users=[discord.Object(int(recipient.user_id))])
        channel = self._channel(target_channel_id(conversation))
        for chunk in split_message(text, MESSAGE_CHARS):
            await channel.send(chunk, allowed_mentions=mentions)

    async def post_question(self, conversation: ConversationRef, question: QuestionRecord) -> str:
        """Post an MCP server's question as a card in the conversation, pinging only its requester.

        The card (`forms.question_embed`) names no link; its buttons (`forms.question_view`)
        carry only the question id and are dispatched by the `DynamicItem` registry. The
        requester's mention is in the message content: a mention inside an embed notifies
        nobody (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md).

        Returns:
            `<channel id>/<message id>`, for `update_question`.
        """
        channel_id = target_channel_id(conversation)
        asked = question.question
        embed = question_embed(
            asked, requester_id=question.requester_id, server=question.server, tool=_tool_of(question)
        )
        view = question_view(asked, question.id)
        mentions = discord.AllowedMentions(
            everyone=False, roles=False, users=[discord.Object(int(question.requester_id))]
        )
        message = await self._channel(channel_id).send(
            msg.QUESTION_PING.format(user=question.requester_id), embed=embed, view=view, allowed_mentions=mentions
        )
        view.stop()  # clicks are dispatched by the DynamicItem registry, not this view
        return card_ref(channel_id, message.id)

    async def update_question(self, conversation: ConversationRef, ref: str, question: QuestionRecord) -> None:
        """Redraw a closed question's card: answered, declined, cancelled or expired, by whom and when; no buttons."""
        if question.is_open:
            return
        channel_id, message_id = _split_ref(ref)
        outcome: Outcome
        if question.status is QuestionStatus.EXPIRED:
            outcome = "expired"
        elif question.status is QuestionStatus.STOPPED or question.answer is None:
            outcome = Action.CANCEL
        else:
            outcome = question.answer.action
        embed = finished_question_embed(
            question.question,
            requester_id=question.requester_id,
            server=question.server,
            tool=_tool_of(question),
            outcome=outcome,
            by_id=question.answered_by_id,
            at=question.answered_at or datetime.now(UTC),
        )
        await (
            self._channel(channel_id)
            .get_partial_message(message_id)
            .edit(embed=embed, view=None, allowed_mentions=NO_PINGS)
        )

    @asynccontextmanager
    async def working(self, conversation: ConversationRef, anchor: str | None) -> AsyncIterator[DiscordProgress]:
        """The typing indicator for as long as the agent works, plus a status line for subagents.

        Both are decoration: when Discord refuses the typing indicator (it is sent when the
        turn starts), the turn runs and answers without it.
        """
        channel = self._channel(target_channel_id(conversation))
        progress = DiscordProgress(channel)
        async with AsyncExitStack() as typing:
            try:
                await typing.enter_async_context(channel.typing())
            except discord.HTTPException as exc:
                log.info("could not show typing: %s", exc)
            try:
                yield progress
            finally:
                await progress.clear()

    async def is_admin(self, actor: Actor) -> bool:
        """Manage Server in the actor's guild; never in a DM.

        The guild may be on a shard another process runs (a DM click reaches shard 0): it is
        then read over REST (`known_guild`).
        """
        if actor.workspace_id == DM:
            return False
        try:
            guild = await known_guild(self._client, actor.workspace_id)
        except discord.HTTPException:
            log.warning("could not fetch guild %s", actor.workspace_id)
            return False
        if guild is None:
            return False
        try:
            member = guild.get_member(int(actor.user_id)) or await guild.fetch_member(int(actor.user_id))
        except discord.HTTPException:
            log.warning("could not fetch member %s of guild %s", actor.user_id, actor.workspace_id)
            return False
        return member.guild_permissions.manage_guild

    async def member(self, workspace_id: str, user_id: str) -> Actor | None:
        """The member with their Manage Server permission and roles, from the cache or REST; None in a DM or if gone.

        Discord user ids are global; the standing is the guild's (`GET /guilds/{id}/members/{user}`
        when the member is not cached, which needs no privileged intent).
        """
        if workspace_id == DM or not user_id.isdecimal():
            return None
        try:
            guild = await known_guild(self._client, workspace_id)
            if guild is None:
                return None
            found = guild.get_member(int(user_id)) or await guild.fetch_member(int(user_id))
        except discord.NotFound:
            return None
        return Actor(
            platform=self.name,
            workspace_id=workspace_id,
            user_id=str(found.id),
            display_name=found.display_name,
            is_admin=found.guild_permissions.manage_guild,
            groups=frozenset(str(role.id) for role in found.roles),
        )

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        """The actor's roles among `group_ids` (the interaction carried the member's roles)."""
        return group_ids & actor.groups

    async def group_members(self, workspace_id: str, group_id: str) -> frozenset[str]:
        """None: listing a role's members needs the privileged Server Members intent we do not ask for."""
        return frozenset()

    async def _ask_elsewhere(self, notice: AskElsewhere) -> str:
        """Where to ask for a call a DM refused: the servers by name (from the cache or `GET /guilds/{id}`)."""
        names = []
        for guild_id in notice.workspace_ids:
            try:
                guild = await known_guild(self._client, guild_id)
            except discord.HTTPException as exc:
                log.info("could not name guild %s: %s", guild_id, exc)
                guild = None
            if guild is not None:
                names.append(msg.SERVER_NAME.format(name=discord.utils.escape_markdown(guild.name)))
        if not names:
            return msg.ASK_IN_A_SERVER.format(tool=notice.tool_name)
        servers = names[0] if len(names) == 1 else msg.SERVERS_OR.format(some=", ".join(names[:-1]), last=names[-1])
        return msg.ASK_IN_SERVERS.format(tool=notice.tool_name, servers=servers)

    async def _message_failed(self, conversation: ConversationRef, notice: TurnFailed) -> str:
        """The notice for a message that could not be answered: quoted as it reads now, never as it was sent.

        The notice is public, and a message given up was sent up to `bot.upkeep.unfinished_work.MAX_ATTEMPTS`
        attempts (about 15 minutes) before: its author may have deleted it meanwhile, or edited
        out what they should not have posted, and the bot must not show again what they took
        back. So the message is read first (`GET /channels/{id}/messages/{id}`). Still there:
        its content now is quoted (60 characters, the bot's mention left out as when it was
        accepted, spoilers masked); nothing left of it but the mention: linked, not quoted.
        Gone (404: Unknown Message, or Unknown Channel): the notice says a deleted message
        could not be answered, without a word of it. Not readable for another reason (no Read
        Message History in the channel, Discord failing): not quoted either, but linked, since
        it may be there (docs/decisions/0036-messages-given-up.md).
        """
        found = None if notice.message_id is None else parse_message_ref(conversation, notice.message_id)
        if found is None:
            return TURN_FAILED.format(thread_id=notice.thread_id)  # no id to check it by
        channel_id, message_id = found
        guild = "@me" if conversation.workspace_id == DM else conversation.workspace_id
        url = f"https://discord.com/channels/{guild}/{channel_id}/{message_id}"
        try:
            current = await self._channel(channel_id).fetch_message(message_id)
        except discord.NotFound:
            log.info("not quoting message %s in a notice: it was deleted", message_id)
            return msg.MESSAGE_FAILED_DELETED.format(thread_id=notice.thread_id)
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("not quoting message %s in a notice: it could not be read (%s)", message_id, exc)
            return msg.MESSAGE_FAILED_LINKED.format(url=url, thread_id=notice.thread_id)
        me = self._client.user
        text = current.content if me is None else strip_bot_mention(current.content, me.id)
        if is_blank(text):
            log.info("not quoting message %s in a notice: its author left nothing in it but the mention", message_id)
            return msg.MESSAGE_FAILED_LINKED.format(url=url, thread_id=notice.thread_id)
        # The notice is public: text its author hid as a spoiler stays hidden.
        quoted = discord.utils.escape_markdown(excerpt(_SPOILER.sub("▒▒▒", text)))
        return MESSAGE_FAILED.format(excerpt=quoted, thread_id=notice.thread_id)

    def _render(self, conversation: ConversationRef, notice: Notice, recipient: Actor | None) -> str:
        if isinstance(notice, ReviewPending) and not notice.approvals and notice.questions:
            waiting = notice.questions[0]
            return msg.QUESTION_PENDING.format(
                user=recipient.user_id if recipient else "",
                name=_plain(waiting.requester_name or waiting.requester_id),
                server=_plain(waiting.server),
            )
        if isinstance(notice, ReviewPending) and not notice.approvals:
            return msg.REVIEW_BUSY.format(user=recipient.user_id if recipient else "")
        if isinstance(notice, ReviewPending):
            guild = "@me" if conversation.workspace_id == DM else conversation.workspace_id
            links = []
            for approval in notice.approvals:
                position = str(approval.position + 1)
                if approval.card_ref is None:
                    links.append(f"`{approval.tool_name}`")
                    continue
                channel_id, message_id = _split_ref(approval.card_ref)
                url = f"https://discord.com/channels/{guild}/{channel_id}/{message_id}"
                tool = f"{approval.source}: {approval.tool_name}" if approval.source else approval.tool_name
                links.append(msg.REVIEW_PENDING_LINK.format(tool=tool, position=position, url=url))
            user = recipient.user_id if recipient else ""
            return msg.REVIEW_PENDING.format(user=user, links=", ".join(links))
        if isinstance(notice, ModelFailed):
            return model_failed_text(
                notice,
                by_kind=model_msg.MODEL_FAILED,
                no_answer=model_msg.MODEL_NO_ANSWER,
                busy_for=model_msg.MODEL_BUSY_FOR,
            )
        if isinstance(notice, TurnFailed):
            return TURN_FAILED.format(thread_id=notice.thread_id)
        if isinstance(notice, CardsElsewhere):
            tools = ", ".join(f"`{a.tool_name}`" for a in notice.approvals)
            if notice.channel_id is None:
                return CARDS_IN_DMS.format(tools=tools)
            return msg.CARDS_IN_CHANNEL.format(tools=tools, channel=notice.channel_id)
        if isinstance(notice, ApprovalExpired):
            return msg.EXPIRED_NOTICE.format(user=notice.approval.requester_id, tool=notice.approval.tool_name)
        if isinstance(notice, TurnStopped):
            return msg.STOPPED_NOTICE.format(user=notice.stopped_by_id)
        if isinstance(notice, AskElsewhere):  # rendered with server names by `notify`
            return msg.ASK_IN_A_SERVER.format(tool=notice.tool_name)
        if isinstance(notice, ToolsHeld):
            return held_text(notice, lambda text: f"**{text}**", lambda text: text)
        if isinstance(notice, ResumeGivenUp):
            not_run, unknown = given_up_calls(notice)
            template = msg.RESUME_GIVEN_UP if recipient is not None else msg.RESUME_GIVEN_UP_NOBODY
            return template.format(
                user=recipient.user_id if recipient is not None else "",
                not_run=RESUME_NOT_RUN.format(tools=_tools(not_run)) if not_run else "",
                unknown=RESUME_OUTCOME_UNKNOWN.format(tools=_tools(unknown)) if unknown else "",
            )
        raise TypeError(f"unknown notice {notice!r}")


class DiscordProgress:
    """A short status line saying which subagents work, edited in place and deleted at the end.

    Nothing is posted until a subagent starts, a model call waits to be retried, or the run has
    gone on for a while (`bot.turns.runner.OFFER_STOP_AFTER_S`), so a quick plain turn shows only
    typing. While the turn can be stopped, the line carries a persistent Stop button naming it
    (`buttons.StopButton`); once stopped, it says so, without the button.

    Args:
        channel: where the conversation is (the thread, for a ticket).
    """

    def __init__(self, channel: discord.abc.Messageable) -> None:
        self._channel = channel
        self._message: discord.Message | None = None
        self._shown: tuple[str, str | None] = ("", None)

    async def show(self, activity: Activity) -> None:
        """Post or edit the status line; a failure is logged, never raised."""
        if self._message is None and not shows_something(activity):
            return  # nothing to say yet: a quick plain turn shows only typing
        text = progress_line(activity, msg.PROGRESS, str)
        shown = (text, activity.turn_id if offers_stop(activity) else None)
        if shown == self._shown:
            return
        view = stop_view(shown[1]) if shown[1] is not None else None
        try:
            if self._message is None:
                self._message = await self._channel.send(
                    text, view=view or discord.utils.MISSING, allowed_mentions=NO_PINGS
                )
            else:
                await self._message.edit(content=text, view=view, allowed_mentions=NO_PINGS)
            self._shown = shown
        except discord.HTTPException as exc:
            log.info("could not show progress: %s", exc)
        finally:
            if view is not None:
                view.stop()  # clicks are dispatched by the DynamicItem registry, not this view

    async def clear(self) -> None:
        """Delete the status line (the answer follows)."""
        if self._message is None:
            return
        try:
            await self._message.delete()
        except discord.HTTPException as exc:
            log.info("could not delete the progress line: %s", exc)
        self._message = None


def _plain(text: str) -> str:
    """`text` shown as written in a Discord message: no markdown, no mentions."""
    return discord.utils.escape_mentions(discord.utils.escape_markdown(text))
