"""A Discord DM is never laxer than the servers its requester shares with the bot.

A DM belongs to no server (`discord:dm:<channel>`), so no admin's rule is its own, and by
default its requester decides their own calls. Without more, a member refused in a server
(quorum 2, self-approval off) could ask the same in a DM and approve it alone. So a call in a
DM is also judged by each server that could be stricter (docs/decisions/0007 and
docs/decisions/0035-dms-and-escalation-audiences.md), strictest first:

1. a tool switched off (`deny`) workspace-wide in any server of the platform is off in DMs
   (no lookup needed: `ConfigStore.denied_in_any_workspace`);
2. a call that, in a server the requester shares with the bot, would need a decision by someone
   other than the requester (it needs review there, and self-approval is off or the quorum is
   above one) is refused in the DM, before any card; the requester is told to ask in that
   server (`bot.policy.review.Ruling.ask_in`), the model that it was rejected by policy;
3. a call that needs review in such a server, where the requester could approve it alone, gets
   a card in the DM (which its requester decides), even where the defaults would run it at once;
4. otherwise the defaults.

Only servers with stored configuration can differ from the defaults a DM uses; the store lists
those that could be stricter for the call (`ConfigStore.could_be_stricter`), at most
`MAX_SERVERS`, and each is judged by its whole configuration (workspace-wide rules only: a
channel's rule governs that channel, not the server's DMs). Membership is asked of the
platform (`Platform.member`: Discord's `GET /guilds/{id}/members/{user}`, no privileged intent)
only for servers stricter than the DM, concurrently, and remembered for `MEMBERSHIP_TTL_S`.

Fail closed: a lookup that fails counts as a membership (the call is refused with
`Ruling.unchecked` when that server would refuse it), more than `MAX_SERVERS` candidates refuse
the call as unchecked, and so does any other failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any

from bot.base.conversation import DM_WORKSPACE
from bot.base.mode import Mode
from bot.policy.config import ALL, WorkspaceConfig
from bot.policy.review import PolicyContext, Ruling, effective_mode, rule_here
from bot.policy.store import ConfigStore
from bot.reviews.authorization import MemberDirectory
from bot.tools.registry import ToolRegistry, ToolSpec

log = logging.getLogger(__name__)

MAX_SERVERS = 20
"""Servers with stored configuration that could be stricter for one DM call that are checked;
with more, the call is refused as unchecked (each needs a configuration read, and possibly a
membership lookup at Discord)."""

MEMBERSHIP_TTL_S = 60.0
"""Seconds a membership answer (member or not) is remembered: someone who just joined a strict
server is judged by it within a minute."""

MAX_REMEMBERED = 10_000
"""Membership answers kept at most; the oldest are forgotten first."""


class _Level(IntEnum):
    """How strict a server (or the DM itself) is about one call, least strict first."""

    AUTO = 0
    """Runs at once."""
    REVIEW = 1
    """A card, which the requester may decide alone."""
    OTHERS = 2
    """A card someone other than the requester must decide (self-approval off, quorum above one)."""
    DENY = 3
    """Never runs."""


_OWN = {Mode.AUTO: _Level.AUTO, Mode.REVIEW: _Level.REVIEW, Mode.DENY: _Level.DENY}


class SharedServerRules:
    """`bot.policy.review.DmRules` over PostgreSQL and the platforms' member lookups.

    Args:
        config: the admin configuration of every workspace.
        registry: the tools (their built-in policy and canonical forms).
        directory_for: the platform directory by platform name (`member` says who is a member
            of a server now).
        max_servers: see `MAX_SERVERS`.
        ttl_s: see `MEMBERSHIP_TTL_S`.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        *,
        config: ConfigStore,
        registry: ToolRegistry,
        directory_for: Callable[[str], MemberDirectory],
        max_servers: int = MAX_SERVERS,
        ttl_s: float = MEMBERSHIP_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._registry = registry
        self._directory_for = directory_for
        self._max_servers = max_servers
        self._ttl_s = ttl_s
        self._clock = clock
        self._members: dict[tuple[str, str, str], tuple[float, bool]] = {}

    async def ruling(self, tool_name: str, args: Mapping[str, Any], context: PolicyContext, own: Mode) -> Ruling:
        """The call's ruling in the DM of `context` (see the module docstring); never raises.

        Args:
            tool_name: the call's tool.
            args: its arguments.
            context: where it is made (a Discord DM) and for whom (`requester_id`; unknown: no
                membership can be checked, so every server that could be stricter counts).
            own: its mode under the DM's own rules (the built-in defaults).
        """
        try:
            return await self._ruling(tool_name, args, context, own)
        except Exception:
            log.exception(
                "could not check the servers of a DM's requester; refusing %s (thread_id=%s)",
                tool_name,
                context.thread_id,
            )
            return Ruling(mode=Mode.DENY, unchecked=True)

    async def _ruling(self, tool_name: str, args: Mapping[str, Any], context: PolicyContext, own: Mode) -> Ruling:
        spec = self._registry.get(tool_name)
        if own is Mode.DENY or spec is None:
            return Ruling(mode=own)  # nothing is stricter; an unknown tool never runs anyway
        if await self._config.denied_in_any_workspace(context.platform, tool_name):
            return Ruling(mode=Mode.DENY)
        floor = _OWN[own]
        candidates = await self._config.could_be_stricter(
            context.platform,
            tool_name,
            settings_too=own is Mode.REVIEW,
            limit=self._max_servers + 1,
            besides=DM_WORKSPACE,
        )
        if len(candidates) > self._max_servers:
            log.warning(
                "more than %d servers could be stricter for %s; refusing it in a DM (thread_id=%s)",
                self._max_servers,
                tool_name,
                context.thread_id,
            )
            return Ruling(mode=Mode.DENY, unchecked=True)
        stricter: dict[str, _Level] = {}
        for workspace_id in candidates:
            config = await self._config.load(context.platform, workspace_id)
            level = _level(spec, config, args, where=context.thread_id)
            if level > floor:
                stricter[workspace_id] = level
        if not stricter:
            return Ruling(mode=own)
        shared = await asyncio.gather(
            *(self._shares(context.platform, workspace_id, context.requester_id) for workspace_id in stricter)
        )
        found = {ws: level for (ws, level), member in zip(stricter.items(), shared, strict=True) if member is True}
        unknown = {ws: level for (ws, level), member in zip(stricter.items(), shared, strict=True) if member is None}
        # A server that could not be checked counts as shared (fail closed).
        top = max([floor, *found.values(), *unknown.values()])
        if top == floor:
            return Ruling(mode=own)
        if top == _Level.REVIEW:
            return Ruling(mode=Mode.REVIEW)
        if top == _Level.DENY:  # denied since `denied_in_any_workspace` was read
            return Ruling(mode=Mode.DENY, unchecked=_Level.DENY not in found.values())
        ask_in = tuple(ws for ws, level in found.items() if level == _Level.OTHERS)
        log.info(
            "%s in a DM needs a decision by someone else in %s; refused (thread_id=%s)",
            tool_name,
            ", ".join(ask_in) or "a server that could not be checked",
            context.thread_id,
        )
        return Ruling(mode=Mode.DENY, ask_in=ask_in, unchecked=_Level.OTHERS in unknown.values())

    async def _shares(self, platform: str, workspace_id: str, user_id: str) -> bool | None:
        """Whether `user_id` is a member of `workspace_id` now; None when that cannot be told."""
        if not user_id:
            return None
        key = (platform, workspace_id, user_id)
        now = self._clock()
        remembered = self._members.get(key)
        if remembered is not None and remembered[0] > now:
            return remembered[1]
        try:
            member = await self._directory_for(platform).member(workspace_id, user_id)
        except Exception as exc:
            log.warning("could not tell whether %s is a member of %s: %s", user_id, workspace_id, exc)
            return None
        self._remember(key, member is not None, now)
        return member is not None

    def _remember(self, key: tuple[str, str, str], member: bool, now: float) -> None:
        self._members.pop(key, None)
        self._members[key] = (now + self._ttl_s, member)
        if len(self._members) > MAX_REMEMBERED:
            for old in [k for k, (until, _) in self._members.items() if until <= now] or [next(iter(self._members))]:
                del self._members[old]


def _level(spec: ToolSpec, config: WorkspaceConfig, args: Mapping[str, Any], *, where: str) -> _Level:
    """How strict `config` (a server's) is about the call, by its workspace-wide rules.

    The requester may approve their own call unless self-approval is off
    (`bot.reviews.authorization.ensure_may_decide`), and even then counts once towards the
    quorum: so a reviewed call needs someone else when self-approval is off or the quorum is
    above one, whoever the requester is there (approver, admin).
    """
    mode = effective_mode(spec, rule_here(config, spec, spec.name, ALL), args, where=where)
    if mode is Mode.DENY:
        return _Level.DENY
    if mode is Mode.AUTO:
        return _Level.AUTO
    if config.quorum(spec.name) > 1 or not config.self_approval(spec.name):
        return _Level.OTHERS
    return _Level.REVIEW
