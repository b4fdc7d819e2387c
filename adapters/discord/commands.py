"""`/countersign` on Discord: an application command group with typed options.

The same subcommands as Slack, with options of the same names: tools autocomplete from the
registry, channels, roles and users are Discord's own pickers. Every reply is ephemeral; the
interaction is deferred first, so a slow database never misses Discord's 3 seconds.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from typing import Any, Literal

import discord
from discord import app_commands

from adapters.chunking import split_message
from adapters.discord import messages as msg
from adapters.discord.conversations import clicker_actor, scoped_conversation
from adapters.discord.markup import DISCORD_MARKUP, MESSAGE_CHARS
from adapters.words.admin import error_text, render
from bot.admin.commands import (
    IN_A_CONVERSATION,
    AcceptMcp,
    ChangeAdmins,
    ChangeApprovers,
    Command,
    Help,
    ListTrust,
    ResetContext,
    RevokeTrust,
    SetAgent,
    SetCards,
    SetExpiry,
    SetPolicy,
    SetQuorum,
    SetReadOnlyHint,
    SetScope,
    SetSelfApproval,
    SetTrust,
    Show,
    ShowAudit,
    ShowContext,
    ShowMcp,
    StopTurn,
)
from bot.admin.parse import CommandError, escalation, parse_duration, parse_matching, parse_trust_duration
from bot.admin.service import AdminService
from bot.base.agent_kind import AgentKind
from bot.base.errors import CountersignError
from bot.base.mode import Mode
from bot.policy.config import ApproverKind, CardRouting, ConversationScope
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.service import Countersign

log = logging.getLogger(__name__)

Interaction = discord.Interaction[Any]

_MODES = {"auto": Mode.AUTO, "review": Mode.REVIEW, "deny": Mode.DENY, "default": None}
_ADD_REMOVE = ("add", "remove")


class OptionMismatchError(app_commands.CheckFailure):
    """The options sent are not the ones registered (an unknown name, or a value of another type)."""


class _CheckedGroup(app_commands.Group):
    """The `/countersign` group, refusing options that do not fit the registered command.

    discord.py hands a command whatever options arrive: an unknown option is dropped and a
    value of another type (a number for a text option) reaches the callback as it is. Discord
    sends only what was registered, but a client holding an older registration (or a forged
    payload) may send anything, so each option's name and type are checked first.
    """

    async def interaction_check(self, interaction: Interaction, /) -> bool:
        """Raise `OptionMismatchError` when an option does not fit; else let the command run."""
        command = interaction.command
        if not isinstance(command, app_commands.Command):
            return True
        registered = {parameter.display_name: parameter.type for parameter in command.parameters}
        for option in _leaf_options(dict(interaction.data or {})):
            name = str(option.get("name"))
            expected = registered.get(name)
            if expected is None:
                raise OptionMismatchError(msg.OPTION_UNKNOWN.format(option=name))
            if option.get("type") != expected.value:
                kind = msg.OPTION_KINDS.get(expected.name, expected.name)
                raise OptionMismatchError(msg.OPTION_WRONG_TYPE.format(option=name, kind=kind))
        return True


def _leaf_options(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The options of the subcommand invoked (below its subcommand and group levels)."""
    options = data.get("options") or []
    while len(options) == 1 and isinstance(options[0], dict) and options[0].get("type") in (1, 2):
        options = options[0].get("options") or []
    return [option for option in options if isinstance(option, dict)]


def build_command_group(admin: AdminService, service: Countersign, tool_names: list[str]) -> app_commands.Group:
    """The `/countersign` group, bound to the admin use case (`service` decides a command's conversation)."""
    group = _CheckedGroup(name="countersign", description="Countersign: approvals for the agent's tools")

    async def run(interaction: Interaction, command: Command | None = None, problem: str | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            if problem is not None or command is None:
                raise CommandError(problem or "incomplete command")
            here = _settings_channel(interaction.channel) if interaction.channel is not None else None
            conversation = None
            if isinstance(command, IN_A_CONVERSATION) and interaction.channel is not None:
                # The conversation a message typed here would belong to (threads follow `scope`).
                conversation = await scoped_conversation(interaction.channel, interaction.guild_id, service)
            reply = await admin.execute(clicker_actor(interaction), command, here=here, conversation=conversation)
            text = render(reply, DISCORD_MARKUP)
        except CountersignError as exc:
            text = error_text(exc, DISCORD_MARKUP)
        except Exception as exc:
            log.exception("/countersign failed for %s", interaction.user.id)
            text = error_text(exc, DISCORD_MARKUP)
        for chunk in split_message(text, MESSAGE_CHARS):
            await interaction.followup.send(chunk, ephemeral=True, allowed_mentions=discord.AllowedMentions.none())

    async def tools(interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=n, value=n) for n in tool_names if current.lower() in n.lower()][:25]

    @group.command(name="help", description="What the subcommands do, with examples")
    async def help_(interaction: Interaction) -> None:
        await run(interaction, Help())

    @group.command(name="show", description="The effective policy for a channel")
    @app_commands.describe(channel="The channel (default: this one)")
    async def show(interaction: Interaction, channel: discord.abc.GuildChannel | discord.Thread | None = None) -> None:
        await run(interaction, Show(channel_id=_settings_channel(channel) if channel else None))

    @group.command(name="policy", description="A tool's mode: auto, review, deny, or back to default")
    @app_commands.describe(
        tool="The tool",
        mode="auto, review, deny or default",
        channel="Only in this channel (default: the whole server)",
        when="Review only when this CEL condition holds, e.g. args.method != 'GET'",
    )
    @app_commands.autocomplete(tool=tools)
    async def policy(
        interaction: Interaction,
        tool: str,
        mode: Literal["auto", "review", "deny", "default"],
        channel: discord.abc.GuildChannel | discord.Thread | None = None,
        when: str | None = None,
    ) -> None:
        if problem := _not_a_choice(mode=(mode, _MODES)):
            await run(interaction, problem=problem)
            return
        if when is not None and mode != "review":
            await run(interaction, problem="a `when` condition only goes with `review`")
            return
        await run(
            interaction,
            SetPolicy(
                tool=tool, mode=_MODES[mode], channel_id=_settings_channel(channel) if channel else None, condition=when
            ),
        )

    @group.command(name="approvers", description="Who may approve (a user or a role), for all tools or one")
    @app_commands.autocomplete(tool=tools)
    async def approvers(
        interaction: Interaction,
        action: Literal["add", "remove"],
        user: discord.User | None = None,
        role: discord.Role | None = None,
        tool: str | None = None,
    ) -> None:
        if problem := _not_a_choice(action=(action, _ADD_REMOVE)):
            await run(interaction, problem=problem)
            return
        if (user is None) == (role is None):
            await run(interaction, problem="give exactly one of `user` or `role`")
            return
        kind, subject = (ApproverKind.USER, user.id) if user is not None else (ApproverKind.ROLE, role.id)  # type: ignore[union-attr]
        await run(interaction, ChangeApprovers(add=action == "add", kind=kind, subject_id=str(subject), tool=tool))

    @group.command(name="admins", description="Bot admins, besides members with Manage Server")
    async def admins(interaction: Interaction, action: Literal["add", "remove"], user: discord.User) -> None:
        if problem := _not_a_choice(action=(action, _ADD_REMOVE)):
            await run(interaction, problem=problem)
            return
        await run(interaction, ChangeAdmins(add=action == "add", user_id=str(user.id)))

    @group.command(name="quorum", description="How many different people must approve a tool's calls")
    @app_commands.autocomplete(tool=tools)
    async def quorum(interaction: Interaction, tool: str, count: app_commands.Range[int, 1, 10]) -> None:
        await run(interaction, SetQuorum(tool=tool, count=count))

    @group.command(name="self-approval", description="Whether requesters may approve their own calls")
    @app_commands.autocomplete(tool=tools)
    async def self_approval(interaction: Interaction, state: Literal["on", "off"], tool: str | None = None) -> None:
        if problem := _not_a_choice(state=(state, ("on", "off"))):
            await run(interaction, problem=problem)
            return
        await run(interaction, SetSelfApproval(allowed=state == "on", tool=tool))

    @group.command(name="expiry", description="How long a card waits: 90s, 30m, 4h, 2d, or off")
    @app_commands.autocomplete(tool=tools)
    async def expiry(interaction: Interaction, duration: str, tool: str | None = None) -> None:
        try:
            seconds = None if duration.strip().lower() == "off" else parse_duration(duration)
        except CommandError as exc:
            await run(interaction, problem=exc.message)
            return
        await run(interaction, SetExpiry(seconds=seconds, tool=tool))

    @group.command(
        name="read-only-hint", description="Whether an MCP server's read-only hint runs a call without a card"
    )
    @app_commands.describe(
        server="The MCP server, as in its tools' names (<server>__<tool>)",
        mode="auto: its read-only tools run without a card; review: the default",
    )
    async def read_only_hint(interaction: Interaction, server: str, mode: Literal["auto", "review"]) -> None:
        if problem := _not_a_choice(mode=(mode, ("auto", "review"))):
            await run(interaction, problem=problem)
            return
        await run(interaction, SetReadOnlyHint(server=server.removesuffix("__*"), auto=mode == "auto"))

    @group.command(name="cards", description="Where approval cards are posted")
    async def cards(
        interaction: Interaction,
        where: Literal["here", "dm", "channel"],
        channel: discord.abc.GuildChannel | discord.Thread | None = None,
    ) -> None:
        if problem := _not_a_choice(where=(where, [r.value for r in CardRouting])):
            await run(interaction, problem=problem)
            return
        if where == "channel" and channel is None:
            await run(interaction, problem="`cards channel` needs the `channel` option")
            return
        routing = CardRouting(where)
        target = str(channel.id) if channel is not None and routing is CardRouting.CHANNEL else None
        await run(interaction, SetCards(routing=routing, channel_id=target))

    @group.command(name="escalate", description="Post a card still undecided after a while to someone else too")
    @app_commands.describe(
        tool="The tool",
        after="How long a card waits before it escalates: 90s, 30m, 4h, 2d; or off to stop escalating",
        user="Escalate to this person (a card in their DMs)",
        role="Escalate to this role (a card in the conversation, mentioning it)",
        channel="Escalate to this channel (a card there; whoever clicks there may decide)",
    )
    @app_commands.autocomplete(tool=tools)
    async def escalate(
        interaction: Interaction,
        tool: str,
        after: str,
        user: discord.User | None = None,
        role: discord.Role | None = None,
        channel: discord.abc.GuildChannel | discord.Thread | None = None,
    ) -> None:
        given = [
            EscalationTarget(kind=kind, subject_id=str(value.id))
            for kind, value in ((TargetKind.USER, user), (TargetKind.ROLE, role), (TargetKind.CHANNEL, channel))
            if value is not None
        ]
        if len(given) > 1:
            await run(interaction, problem="give at most one of `user`, `role` or `channel`")
            return
        try:
            command = escalation(tool, after, given[0] if given else None)
        except CommandError as exc:
            await run(interaction, problem=exc.message)
            return
        await run(interaction, command)

    @group.command(name="scope", description="One conversation per channel, or per thread (ticket)")
    async def scope(
        interaction: Interaction,
        kind: Literal["channel", "thread"],
        channel: discord.abc.GuildChannel | discord.Thread | None = None,
    ) -> None:
        if problem := _not_a_choice(kind=(kind, [c.value for c in ConversationScope])):
            await run(interaction, problem=problem)
            return
        where = _settings_channel(channel) if channel else None
        await run(interaction, SetScope(scope=ConversationScope(kind), channel_id=where))

    @group.command(name="agent", description="Which agent answers: the ReAct agent or the supervisor with subagents")
    async def agent(
        interaction: Interaction,
        kind: Literal["react", "subagents", "default"],
        channel: discord.abc.GuildChannel | discord.Thread | None = None,
    ) -> None:
        if problem := _not_a_choice(kind=(kind, [*(a.value for a in AgentKind), "default"])):
            await run(interaction, problem=problem)
            return
        where = _settings_channel(channel) if channel else None
        await run(interaction, SetAgent(agent=None if kind == "default" else AgentKind(kind), channel_id=where))

    @group.command(name="context", description="This conversation's summary and window size; reset starts afresh")
    @app_commands.describe(reset="Start the model's view of this conversation afresh (admins)")
    async def context(interaction: Interaction, reset: bool = False) -> None:
        await run(interaction, ResetContext() if reset else ShowContext())

    @group.command(name="stop", description="Stop the bot's running turn in this conversation (who asked, or admins)")
    async def stop(interaction: Interaction) -> None:
        await run(interaction, StopTurn())

    @group.command(name="audit", description="Recent decisions, refusals, expiries and changes")
    @app_commands.autocomplete(tool=tools)
    async def audit(
        interaction: Interaction,
        tool: str | None = None,
        user: discord.User | None = None,
        limit: app_commands.Range[int, 1, 100] = 20,
    ) -> None:
        await run(interaction, ShowAudit(tool=tool, user_id=str(user.id) if user else None, limit=limit))

    trust = _CheckedGroup(
        name="trust", description="Let cards offer “Approve and trust” for a while; list and end trusts", parent=group
    )

    async def trust_ids(interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
        grants = await admin.visible_trusts(clicker_actor(interaction))
        return [
            app_commands.Choice(name=f"{g.id} · {g.tool_name} · by {g.granted_by_name}"[:100], value=g.id)
            for g in grants
            if current.lower() in g.id or current.lower() in g.tool_name.lower()
        ][:25]

    @trust.command(name="set", description="Let a tool's cards offer “Approve and trust” for at most this long")
    @app_commands.rename(up_to="up-to")
    @app_commands.describe(
        tool="The tool",
        up_to="The longest a trust lasts (1m to 1d, e.g. 30m); off: never here; default: as the server says",
        matching="The arguments whose values a trust binds, e.g. method,url (default: every argument)",
        channel="Only in this channel (default: the whole server)",
    )
    @app_commands.autocomplete(tool=tools)
    async def trust_set(
        interaction: Interaction,
        tool: str,
        up_to: str,
        matching: str | None = None,
        channel: discord.abc.GuildChannel | discord.Thread | None = None,
    ) -> None:
        word = up_to.strip().lower()
        try:
            seconds = {"off": 0, "default": None}[word] if word in ("off", "default") else parse_trust_duration(up_to)
            names = parse_matching(matching) if matching is not None else ()
        except CommandError as exc:
            await run(interaction, problem=exc.message)
            return
        if names and not seconds:
            await run(interaction, problem="`matching` goes only with a duration")
            return
        where = _settings_channel(channel) if channel else None
        await run(interaction, SetTrust(tool=tool, up_to_s=seconds, matching=names, channel_id=where))

    @trust.command(name="list", description="Live trusts (admins: all; others: those they granted or that cover them)")
    async def trust_list(
        interaction: Interaction, channel: discord.abc.GuildChannel | discord.Thread | None = None
    ) -> None:
        await run(interaction, ListTrust(channel_id=_settings_channel(channel) if channel else None))

    @trust.command(name="revoke", description="End a live trust now")
    @app_commands.rename(grant="id")
    @app_commands.describe(grant="The trust's id, as trust list shows it")
    @app_commands.autocomplete(grant=trust_ids)
    async def trust_revoke(interaction: Interaction, grant: str) -> None:
        grant_id = grant.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{8}", grant_id):
            await run(interaction, problem=f"`{grant[:40]}` is not a trust id; `trust list` shows them")
            return
        await run(interaction, RevokeTrust(grant_id=grant_id))

    mcp = _CheckedGroup(name="mcp", description="The MCP servers: their state, tools and held tools", parent=group)

    async def servers(interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=k, value=k) for k in admin.mcp_servers() if current.lower() in k.lower()][:25]

    @mcp.command(name="status", description="The MCP servers: state, tools with their hints, held tools (admins)")
    async def mcp_status(interaction: Interaction) -> None:
        await run(interaction, ShowMcp())

    @mcp.command(name="accept", description="Accept an MCP server's changed or new tools, as shown (admins)")
    @app_commands.describe(server="The server, as /countersign mcp status names it")
    @app_commands.autocomplete(server=servers)
    async def mcp_accept(interaction: Interaction, server: str) -> None:
        await run(interaction, AcceptMcp(server=server))

    return group


async def on_command_error(interaction: Interaction, error: app_commands.AppCommandError) -> None:
    """Answer privately a `/countersign` that discord.py could not run (the tree's error handler).

    Without an answer Discord shows "The application did not respond". A subcommand or options
    that are not (or no longer) the ones registered, and an option discord.py cannot turn into
    its type (a channel it cannot see, a number out of range), are refused in words with a
    warning; anything else is a bug: logged with its traceback, answered without it.
    """
    if isinstance(error, app_commands.CommandNotFound | app_commands.CommandSignatureMismatch):
        log.warning("refused /countersign: %s", error)
        text = error_text(CommandError(msg.COMMAND_UNKNOWN), DISCORD_MARKUP)
    elif isinstance(error, OptionMismatchError):
        log.warning("refused /countersign: %s", error)
        text = error_text(CommandError(str(error)), DISCORD_MARKUP)
    elif isinstance(error, app_commands.TransformerError):
        log.warning("refused /countersign: %s", error)
        text = error_text(CommandError(msg.OPTION_UNREADABLE.format(kind=error.type.name)), DISCORD_MARKUP)
    else:
        log.error("/countersign failed for %s", interaction.user.id, exc_info=error)
        text = error_text(error, DISCORD_MARKUP)
    try:
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none())
        else:
            await interaction.response.send_message(
                text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
            )
    except discord.HTTPException as exc:
        log.warning("could not answer a refused /countersign: %s", exc)


def _not_a_choice(**options: tuple[str, Collection[str]]) -> str | None:
    """The problem with the first option whose value is not one of its choices, else None.

    Discord offers only the registered choices, but discord.py passes on whatever value
    arrives (an out-of-date client, a forged payload): "bogus" must not read as "remove".
    """
    for option, (value, choices) in options.items():
        if value not in choices:
            return msg.OPTION_NOT_A_CHOICE.format(option=option, choices=", ".join(f"`{c}`" for c in choices))
    return None


def _settings_channel(channel: Any) -> str:
    """The channel whose settings apply: a thread or forum post follows its parent channel.

    Policy overrides, the conversation scope and the agent are per channel (DESIGN.md); a ticket is a
    conversation under its channel, so a rule "in" a thread is a rule in its parent.
    """
    if isinstance(channel, discord.Thread | app_commands.AppCommandThread) and channel.parent_id:
        return str(channel.parent_id)
    return str(channel.id)
