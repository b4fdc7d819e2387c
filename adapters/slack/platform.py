"""The core's `Platform` port, implemented with the Slack Web API."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import messages as msg
from adapters.slack.blocks import card_blocks, card_text, progress_blocks, target_mention
from adapters.slack.blocks import unshowable as unshowable_in_slack
from adapters.slack.forms import Outcome, finished_question_blocks, question_blocks, question_text
from adapters.slack.text import escape, split_message, to_mrkdwn
from adapters.slack.workspaces import WorkspaceClients
from adapters.words import model as model_msg
from adapters.words.cards import CARDS_IN_DMS
from adapters.words.conversation import MESSAGE_FAILED, RESUME_NOT_RUN, RESUME_OUTCOME_UNKNOWN, TURN_FAILED
from adapters.words.display import (
    excerpt,
    given_up_calls,
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
from bot.reviews.shown import Arguments, Unshowable
from bot.tools.mcp.elicitation.forms import Action
from bot.tools.mcp.elicitation.store import QuestionRecord, QuestionStatus

log = logging.getLogger(__name__)

_USER_TTL_S = 300.0


@dataclass(frozen=True, slots=True)
class SlackUser:
    """What we need of a Slack user (from `users.info`)."""

    user_id: str
    display_name: str
    is_admin: bool
    """An admin or owner of the workspace asked about (never for a user of another workspace)."""
    active: bool = True
    """False for a deactivated account (`deleted` in Slack's user object)."""


class UserDirectory:
    """`users.info` with a short cache: names for cards, admin flags for authorisation.

    Admin and owner flags come from Slack's user object (`is_admin`, `is_owner`,
    `is_primary_owner`), and count only for a user of the workspace asked about (`belongs_to`):
    a Slack Connect user from another organisation carries their own organisation's flags, and is
    never an admin here. Entries live five minutes, so a demoted admin loses the right soon.
    Entries are per workspace, asked with that workspace's token.

    Args:
        clients: the Web API client of each workspace.
    """

    def __init__(self, clients: WorkspaceClients) -> None:
        self._clients = clients
        self._cache: dict[tuple[str, str], tuple[float, SlackUser]] = {}
        self._groups: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}

    async def group_members(self, team_id: str, group_id: str) -> frozenset[str]:
        """Members of a user group of workspace `team_id`, cached like users (an unknown group has none)."""
        hit = self._groups.get((team_id, group_id))
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        try:
            client = await self._clients.client(team_id)
            response = await client.usergroups_users_list(usergroup=group_id)
        except SlackApiError as exc:
            log.warning("usergroups.users.list failed for %s: %s", group_id, exc.response.get("error"))
            return frozenset()
        members = frozenset(str(u) for u in response.get("users") or ())
        self._groups[(team_id, group_id)] = (time.monotonic() + _USER_TTL_S, members)
        return members

    async def get(self, team_id: str, user_id: str) -> SlackUser:
        """The user of workspace `team_id`, from the cache or Slack; an unknown user is a non-admin named by id."""
        hit = self._cache.get((team_id, user_id))
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        try:
            client = await self._clients.client(team_id)
            response = await client.users_info(user=user_id)
        except SlackApiError as exc:
            log.warning("users.info failed for %s: %s", user_id, exc.response.get("error"))
            return SlackUser(user_id=user_id, display_name=user_id, is_admin=False)
        data = response["user"]
        profile = data.get("profile") or {}
        name = profile.get("display_name") or data.get("real_name") or data.get("name") or user_id
        flagged = bool(data.get("is_admin") or data.get("is_owner") or data.get("is_primary_owner"))
        if flagged and not belongs_to(data, team_id):
            log.info("%s is an admin of another workspace (%s), not of %s", user_id, data.get("team_id"), team_id)
        user = SlackUser(
            user_id=user_id,
            display_name=str(name),
            is_admin=flagged and belongs_to(data, team_id),
            active=not data.get("deleted"),
        )
        self._cache[(team_id, user_id)] = (time.monotonic() + _USER_TTL_S, user)
        return user


def belongs_to(user: dict[str, Any], team_id: str) -> bool:
    """Whether a `users.info` user object is of a user of workspace `team_id`.

    Their home workspace (`team_id`) is it, or, in an Enterprise Grid organisation, it is one of
    the organisation's workspaces they belong to (`enterprise_user.teams`). A Slack Connect user
    from another organisation is neither: their admin flags are their own organisation's
    (docs/decisions/0035-dms-and-escalation-audiences.md).
    """
    if user.get("team_id") == team_id:
        return True
    enterprise = user.get("enterprise_user")
    teams = enterprise.get("teams") if isinstance(enterprise, dict) else None
    return isinstance(teams, list) and team_id in teams


def message_failed_text(thread_id: str, message: str) -> str:
    """What the sender of a message that could not be answered reads: `MESSAGE_FAILED`, quoting the message.

    Args:
        thread_id: the conversation, as the log names it.
        message: the message's text; its first `adapters.words.display.EXCERPT_CHARS` characters are quoted.
    """
    return MESSAGE_FAILED.format(excerpt=escape(excerpt(message)), thread_id=thread_id)


def card_ref(channel: str, ts: str) -> str:
    """Our reference to a posted card: `<channel>/<ts>`."""
    return f"{channel}/{ts}"


def parse_message_ref(conversation: ConversationRef, ref: str) -> tuple[str, str]:
    """`(channel, ts)` from a card reference or a bare message ts in the conversation."""
    if "/" in ref:
        channel, ts = ref.split("/", 1)
        return channel, ts
    return conversation.channel_id, ref


class SlackPlatform:
    """Posts answers, cards and notices to Slack for the core.

    Every call uses the conversation's workspace's client (`WorkspaceClients`): with OAuth
    installs, that workspace's own bot token, also for work outside any Slack request.

    Args:
        clients: the Web API clients per workspace (`SLACK_API_URL` as base URL); their
            `quick` ones do not wait out rate limits, for what only decorates a turn
            (removing the progress message): a 429 there must not hold up the answer.
        users: the user directory.
    """

    name = "slack"

    def __init__(self, clients: WorkspaceClients, users: UserDirectory) -> None:
        self._clients = clients
        self._users = users

    async def post_answer(self, conversation: ConversationRef, text: str) -> None:
        """Post the agent's answer, escaped, split at Slack's message size."""
        client = await self._clients.client(conversation.workspace_id)
        for chunk in split_message(to_mrkdwn(text)):
            await client.chat_postMessage(
                channel=conversation.channel_id,
                thread_ts=conversation.thread,
                text=chunk,
                unfurl_links=False,
                unfurl_media=False,
            )

    async def post_card(self, target: CardTarget, card: ApprovalCard) -> str:
        """Post the card in the conversation, an approvals channel or a DM; return `<channel>/<ts>`.

        Posting to a user id delivers to the user's DM with the app (Slack's chat.postMessage).
        An escalated copy posted in a conversation names the user or group it escalated to in
        its notification text.
        """
        conversation = target.conversation
        channel = target.user_id or target.channel_id or conversation.channel_id
        thread = conversation.thread if channel == conversation.channel_id else None
        text = card_text(card)
        escalated = target.escalated_to
        if escalated is not None and target.user_id is None and target.channel_id is None:
            text = msg.CARD_ESCALATED_TEXT.format(mention=target_mention(escalated), card=text)
        client = await self._clients.client(conversation.workspace_id)
        response = await client.chat_postMessage(channel=channel, thread_ts=thread, text=text, blocks=card_blocks(card))
        return card_ref(str(response["channel"]), str(response["ts"]))

    async def update_card(self, conversation: ConversationRef, card_ref: str, card: ApprovalCard) -> None:
        """Redraw the card in place with `chat.update`."""
        channel, ts = parse_message_ref(conversation, card_ref)
        client = await self._clients.client(conversation.workspace_id)
        await client.chat_update(channel=channel, ts=ts, text=card_text(card), blocks=card_blocks(card))

    def unshowable(self, arguments: Arguments) -> Unshowable | None:
        """Why Slack cannot show `arguments` in full (`adapters.slack.blocks.unshowable`), else None."""
        return unshowable_in_slack(arguments)

    async def notify(self, conversation: ConversationRef, notice: Notice, *, recipient: Actor | None) -> None:
        """Ephemeral to `recipient` when given, else a message in the conversation."""
        text = await self._render(conversation, notice)
        if recipient is not None:
            await self.whisper(
                conversation.workspace_id,
                conversation.channel_id,
                recipient.user_id,
                text,
                thread_ts=conversation.thread,
            )
            return
        client = await self._clients.client(conversation.workspace_id)
        await client.chat_postMessage(channel=conversation.channel_id, thread_ts=conversation.thread, text=text)

    async def post_question(self, conversation: ConversationRef, question: QuestionRecord) -> str:
        """Post the question's card in the conversation, mentioning its requester; return `<channel>/<ts>`.

        The card offers *Answer…* (a form) or *Open link…* (a link), *Decline* and *Cancel*; it
        never holds a link (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md).
        """
        blocks = question_blocks(
            question.question,
            question_id=question.id,
            requester_id=question.requester_id,
            server=question.server,
            tool=question.tool_name,
        )
        client = await self._clients.client(conversation.workspace_id)
        response = await client.chat_postMessage(
            channel=conversation.channel_id,
            thread_ts=conversation.thread,
            text=question_text(server=question.server, tool=question.tool_name),
            blocks=blocks,
        )
        return card_ref(str(response["channel"]), str(response["ts"]))

    async def update_question(self, conversation: ConversationRef, ref: str, question: QuestionRecord) -> None:
        """Redraw a closed question's card in place (`chat.update`): how it ended, by whom, when; no buttons.

        An expired question names nobody; one closed by a Stop reads as cancelled by whoever stopped.
        """
        outcome: Outcome = (
            "expired"
            if question.status is QuestionStatus.EXPIRED
            else (question.answer.action if question.answer is not None else Action.CANCEL)
        )
        by_id = None if question.status is QuestionStatus.EXPIRED else question.answered_by_id
        blocks = finished_question_blocks(
            question.question,
            requester_id=question.requester_id,
            server=question.server,
            tool=question.tool_name,
            outcome=outcome,
            by_id=by_id,
            at=question.answered_at or datetime.now(UTC),
        )
        channel, ts = parse_message_ref(conversation, ref)
        client = await self._clients.client(conversation.workspace_id)
        await client.chat_update(
            channel=channel,
            ts=ts,
            text=question_text(server=question.server, tool=question.tool_name, outcome=outcome),
            blocks=blocks,
        )

    async def whisper(
        self,
        team_id: str,
        channel: str,
        user: str,
        text: str,
        *,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> None:
        """An ephemeral message only `user` sees, in a channel of workspace `team_id` (`blocks` beside `text`)."""
        client = await self._clients.client(team_id)
        await client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts, blocks=blocks)

    @asynccontextmanager
    async def working(self, conversation: ConversationRef, anchor: str | None) -> AsyncIterator[SlackProgress]:
        """An hourglass reaction on the anchor message while the agent works.

        The reaction is added and removed in the background: neither the run nor its answer
        waits for Slack's reply (the answer may appear a moment before the hourglass goes).

        With subagents, also a progress message naming those at work (see `SlackProgress`).
        """
        team = conversation.workspace_id
        client = await self._clients.client(team)
        progress = SlackProgress(client, conversation, quick=await self._clients.quick(team))
        if anchor is None:
            try:
                yield progress
            finally:
                await progress.clear()
            return
        # The reaction is decoration: the run does not wait for it, and the answer does not
        # wait for its removal (each is a Web API round trip on a turn's critical path).
        channel, ts = parse_message_ref(conversation, anchor)
        adding = asyncio.create_task(
            self._react(client, "reactions_add", channel, ts), name=f"hourglass on {channel}/{ts}"
        )
        try:
            yield progress
        finally:
            try:
                await progress.clear()
            finally:
                _in_background(self._unreact(client, adding, channel, ts), name=f"hourglass off {channel}/{ts}")

    async def is_admin(self, actor: Actor) -> bool:
        """Workspace admin or owner, per `users.info`; never a user of another workspace (Slack Connect)."""
        return (await self._users.get(actor.workspace_id, actor.user_id)).is_admin

    async def member(self, workspace_id: str, user_id: str) -> Actor | None:
        """The user with their admin flag (`users.info`, cached like every lookup); None once deactivated.

        User groups are not listed here: `member_of` asks Slack for the groups that matter.
        """
        user = await self._users.get(workspace_id, user_id)
        if not user.active:
            return None
        return Actor(
            platform=self.name,
            workspace_id=workspace_id,
            user_id=user_id,
            display_name=user.display_name,
            is_admin=user.is_admin,
        )

    async def member_of(self, actor: Actor, group_ids: frozenset[str]) -> frozenset[str]:
        """The user groups among `group_ids` that list the actor (`usergroups.users.list`)."""
        return frozenset(
            [g for g in sorted(group_ids) if actor.user_id in await self._users.group_members(actor.workspace_id, g)]
        )

    async def group_members(self, workspace_id: str, group_id: str) -> frozenset[str]:
        """The user group's members (`usergroups.users.list`, with that workspace's token)."""
        return await self._users.group_members(workspace_id, group_id)

    async def _unreact(self, client: AsyncWebClient, adding: asyncio.Task[bool], channel: str, ts: str) -> None:
        """Remove the progress reaction once it was added (an add that failed needs no removal)."""
        if await adding:
            await self._react(client, "reactions_remove", channel, ts)

    async def _react(self, client: AsyncWebClient, method: str, channel: str, ts: str) -> bool:
        """Add or remove the progress reaction; decoration, so no failure may reach the turn."""
        try:
            await getattr(client, method)(channel=channel, timestamp=ts, name=msg.WORKING_REACTION)
        except SlackApiError as exc:
            log.info("%s on %s/%s: %s", method, channel, ts, exc.response.get("error"))
            return False
        except Exception as exc:  # a connection error or a timeout: the answer must still go out
            log.warning("%s on %s/%s failed: %s: %s", method, channel, ts, type(exc).__name__, exc)
            return False
        return True

    async def _render(self, conversation: ConversationRef, notice: Notice) -> str:
        if isinstance(notice, ReviewPending) and not notice.approvals and notice.questions:
            waiting = notice.questions[0]
            return msg.QUESTION_PENDING.format(
                name=escape(waiting.requester_name or waiting.requester_id), server=escape(waiting.server)
            )
        if isinstance(notice, ReviewPending) and not notice.approvals:
            return msg.REVIEW_BUSY
        if isinstance(notice, ReviewPending):
            links = []
            for approval in notice.approvals:
                url = await self._permalink(conversation, approval.card_ref)
                label = f"{approval.position + 1}"
                tool = f"{approval.source}: {approval.tool_name}" if approval.source else approval.tool_name
                links.append(
                    msg.REVIEW_PENDING_LINK.format(url=url, tool=escape(tool), position=label)
                    if url
                    else f"`{escape(tool)}`"
                )
            return msg.REVIEW_PENDING.format(links=", ".join(links))
        if isinstance(notice, ModelFailed):
            return model_failed_text(
                notice,
                by_kind=model_msg.MODEL_FAILED,
                no_answer=model_msg.MODEL_NO_ANSWER,
                busy_for=model_msg.MODEL_BUSY_FOR,
            )
        if isinstance(notice, TurnFailed) and notice.message is not None:
            return message_failed_text(notice.thread_id, notice.message)
        if isinstance(notice, TurnFailed):
            return TURN_FAILED.format(thread_id=notice.thread_id)
        if isinstance(notice, CardsElsewhere):
            tools = ", ".join(f"`{escape(a.tool_name)}`" for a in notice.approvals)
            if notice.channel_id is None:
                return CARDS_IN_DMS.format(tools=tools)
            first = notice.approvals[0].card_ref if notice.approvals else None
            url = await self._permalink(conversation, first)
            link = f" (<{url}|open>)" if url else ""
            return msg.CARDS_IN_CHANNEL.format(tools=tools, channel=notice.channel_id, link=link)
        if isinstance(notice, ApprovalExpired):
            return msg.EXPIRED_NOTICE.format(tool=escape(notice.approval.tool_name))
        if isinstance(notice, TurnStopped):
            return msg.STOPPED_NOTICE.format(user=escape(notice.stopped_by_id))
        if isinstance(notice, AskElsewhere):  # a Slack DM is its workspace's: never sent today
            return msg.ASK_ELSEWHERE.format(tool=escape(notice.tool_name))
        if isinstance(notice, ToolsHeld):
            return held_text(notice, lambda text: f"*{text}*", escape)
        if isinstance(notice, ResumeGivenUp):
            not_run, unknown = given_up_calls(notice)
            return msg.RESUME_GIVEN_UP.format(
                not_run=RESUME_NOT_RUN.format(tools=_tools(not_run)) if not_run else "",
                unknown=RESUME_OUTCOME_UNKNOWN.format(tools=_tools(unknown)) if unknown else "",
            )
        raise TypeError(f"unknown notice {notice!r}")

    async def _permalink(self, conversation: ConversationRef, ref: str | None) -> str | None:
        if ref is None:
            return None
        channel, ts = parse_message_ref(conversation, ref)
        try:
            client = await self._clients.client(conversation.workspace_id)
            response = await client.chat_getPermalink(channel=channel, message_ts=ts)
        except SlackApiError as exc:
            log.warning("chat.getPermalink failed: %s", exc.response.get("error"))
            return None
        return str(response["permalink"])


class SlackProgress:
    """A progress message in the conversation saying which subagents work, with a Stop button.

    Posted when the first subagent starts, a model call waits to be retried, or the run has
    gone on for a while (`bot.turns.runner.OFFER_STOP_AFTER_S`); updated in place (`chat.update`),
    deleted when the turn ends (`chat.delete`), so it never stays in the thread. A quick plain
    turn posts none. While the turn can be stopped the message carries a Stop button naming
    it (`blocks.progress_blocks`); once stopped, it says so, without the button.

    Args:
        client: the Web API client.
        conversation: where the agent works.
        quick: a client that does not wait out rate limits (see `SlackPlatform`).
    """

    def __init__(
        self, client: AsyncWebClient, conversation: ConversationRef, *, quick: AsyncWebClient | None = None
    ) -> None:
        self._client = client
        self._quick = quick or client
        self._conversation = conversation
        self._ts: str | None = None
        self._channel: str | None = None
        self._shown: tuple[str, str | None] = ("", None)

    async def show(self, activity: Activity) -> None:
        """Post or update the progress message; a failure is logged, never raised."""
        if self._ts is None and not shows_something(activity):
            return  # nothing to say yet: a quick plain turn shows only the reaction
        text = progress_line(activity, msg.PROGRESS, escape)
        shown = (text, activity.turn_id if offers_stop(activity) else None)
        if shown == self._shown:
            return
        blocks = progress_blocks(*shown)
        try:
            if self._ts is None:
                response = await self._client.chat_postMessage(
                    channel=self._conversation.channel_id, thread_ts=self._conversation.thread, text=text, blocks=blocks
                )
                self._ts, self._channel = str(response["ts"]), str(response["channel"])
            else:
                await self._client.chat_update(
                    channel=self._channel or self._conversation.channel_id, ts=self._ts, text=text, blocks=blocks
                )
            self._shown = shown
        except SlackApiError as exc:
            log.info("could not show progress: %s", exc.response.get("error"))
        except Exception as exc:  # a connection error or a timeout: progress is decoration
            log.warning("could not show progress: %s: %s", type(exc).__name__, exc)

    async def clear(self) -> None:
        """Delete the progress message before the answer follows.

        Rate limited (429), the deletion is left to a background task that waits as long as
        Slack asks: the answer is not held up by decoration.
        """
        if self._ts is None:
            return
        channel, ts = self._channel or self._conversation.channel_id, self._ts
        self._ts = None
        try:
            await self._quick.chat_delete(channel=channel, ts=ts)
        except SlackApiError as exc:
            if exc.response.status_code == 429:
                wait = float(exc.response.headers.get("Retry-After") or 1)
                _in_background(self._delete_later(channel, ts, wait), name=f"delete progress {channel}/{ts}")
            else:
                log.info("could not delete the progress message: %s", exc.response.get("error"))
        except Exception as exc:  # a connection error or a timeout: the answer must still go out
            log.warning("could not delete the progress message: %s: %s", type(exc).__name__, exc)

    async def _delete_later(self, channel: str, ts: str, wait_s: float) -> None:
        await asyncio.sleep(wait_s)
        try:
            await self._client.chat_delete(channel=channel, ts=ts)
        except Exception as exc:
            log.warning("could not delete the progress message: %s: %s", type(exc).__name__, exc)


_BACKGROUND: set[asyncio.Task[None]] = set()
"""Decoration finished after the turn (a progress reaction removed, a deletion waiting out a
rate limit), held here so the tasks are not garbage-collected."""


DECORATION_GRACE_S = 5.0
"""Seconds `finish_decorations` waits for the background decoration before cancelling it."""


def _tools(names: list[str]) -> str:
    """Call names for a notice, each as code: `send`, `researcher: lookup`."""
    return ", ".join(f"`{escape(name)}`" for name in names)


def _in_background(coro: Coroutine[Any, Any, None], *, name: str) -> None:
    task = asyncio.create_task(coro, name=name)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


async def finish_decorations(grace_s: float = DECORATION_GRACE_S) -> None:
    """Let the background decoration finish (up to `grace_s`), then cancel what is left.

    Called when the adapter closes, after the service drained its turns and before the Web API
    session closes: a turn that answered just before a stop still takes its hourglass off (the
    removal would otherwise fail on the closed session and leave it on the message for good),
    and no task is left pending when the loop closes.
    """
    if not _BACKGROUND:
        return
    _, pending = await asyncio.wait(set(_BACKGROUND), timeout=grace_s)
    for task in pending:
        log.warning("stopping: %s cancelled after %g s", task.get_name(), grace_s)
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=1)
