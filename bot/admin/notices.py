"""Where the bot tells its admins what needs them: MCP tools held until an admin accepts them.

Nothing else reached admins as such before: cards go to approvers, notices to a conversation.
An MCP server is the bot's, not a workspace's, so the operator names the admins' channels
(`COUNTERSIGN_ADMIN_CHANNELS`: `<platform>:<workspace id>:<channel id>`, comma-separated), and
the terminal (`countersign chat`) adds its own conversation: its operator is the admin there.
When channels are named, the admins of their workspaces are the ones who may accept held
definitions (`governs`); when none are, any workspace's admins may
(docs/decisions/0046-mcp-pins-wiring.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from bot.admin.outlook import outlook
from bot.base.conversation import Actor, ConversationRef
from bot.policy.outlook import ToolOutlook
from bot.policy.review import ConfigLoader
from bot.ports import Platform, ToolsHeld
from bot.tools.mcp.pins import HoldNotice

log = logging.getLogger(__name__)


def channel_ref(entry: str) -> ConversationRef:
    """`<platform>:<workspace id>:<channel id>` as the conversation of that channel.

    Raises:
        ValueError: `entry` is not three non-empty parts (`bot.settings.ToolSettings` checks first).
    """
    platform, workspace_id, channel_id = entry.split(":")
    if not (platform and workspace_id and channel_id):
        raise ValueError(f"{entry!r} is not <platform>:<workspace id>:<channel id>")
    return ConversationRef(platform=platform, workspace_id=workspace_id, channel_id=channel_id)


class AdminChannels:
    """The admins' channels, and who governs the bot's MCP servers.

    Args:
        platforms: the adapters' `Platform`s by name (filled before the MCP servers start).
        channels: the channels the operator named (`COUNTERSIGN_ADMIN_CHANNELS`).
        config: reads a workspace's configuration, to say in each channel how the held tools'
            calls will be decided there once accepted (`bot.admin.outlook`); None: not said.
    """

    def __init__(
        self,
        platforms: Mapping[str, Platform],
        channels: Iterable[ConversationRef] = (),
        config: ConfigLoader | None = None,
    ) -> None:
        self._platforms = platforms
        self._config = config
        self._channels = list(dict.fromkeys(channels))
        self._named = bool(self._channels)

    def add(self, channel: ConversationRef) -> None:
        """Tell the admins in `channel` too (the terminal's conversation in `countersign chat`)."""
        if channel not in self._channels:
            self._channels.append(channel)

    def governs(self, actor: Actor) -> bool:
        """Whether `actor`'s workspace's admins may accept held MCP definitions (the admin check is the caller's).

        True for every workspace when the operator named no channel; else only for the
        workspaces of the admins' channels (and the terminal's).
        """
        if not self._named:
            return True
        return any((c.platform, c.workspace_id) == (actor.platform, actor.workspace_id) for c in self._channels)

    async def tools_held(self, notice: HoldNotice) -> None:
        """Post one message about newly held tools in each admins' channel this process serves.

        Each message says how each tool's calls will be decided in that channel's workspace once
        accepted (its configuration read now; one that cannot be read is logged and not said).
        A channel whose platform is not served by this process, or whose post fails, is
        logged; the hold stays (`/countersign mcp` shows it).
        """
        for channel in self._channels:
            told = ToolsHeld(
                server=notice.server,
                changes=notice.changes,
                accept_command=notice.accept_command,
                after=await self._after(channel, notice),
            )
            platform = self._platforms.get(channel.platform)
            if platform is None:
                log.warning(
                    "admins' channel %s: the platform %s is not served here", channel.channel_id, channel.platform
                )
                continue
            try:
                await platform.notify(channel, told, recipient=None)
            except Exception:
                log.exception(
                    "admins' channel %s: the message about held MCP tools could not be posted", channel.channel_id
                )
        if not self._channels:
            log.warning(
                "no admins' channel (COUNTERSIGN_ADMIN_CHANNELS) to tell that MCP server %s has held tools",
                notice.server,
            )

    async def _after(self, channel: ConversationRef, notice: HoldNotice) -> tuple[ToolOutlook, ...]:
        """How the held tools' calls will be decided in `channel`'s workspace once accepted; empty if unknown."""
        if self._config is None or not notice.definitions:
            return ()
        try:
            config = await self._config(channel.platform, channel.workspace_id)
        except Exception:
            log.exception("admins' channel %s: the workspace's configuration could not be read", channel.channel_id)
            return ()
        return tuple(outlook(config, definition) for definition in notice.definitions)
