"""What needs review: each tool call gets a mode before anything runs.

The mode comes from, in order: an admin's rule for the channel, the workspace's rule, the
tool's built-in default (`ToolSpec`). For an MCP tool, its own rules come first, then its
server's `<server>__*` rules, and, where an admin let it count, the server's read-only hint
(`rule_here`, docs/decisions/0045-server-wide-mcp-rules.md). A `review` rule may carry a CEL
condition: review only when it holds; an evaluation error counts as holding (fail closed).

A Discord DM belongs to no server, so no admin's rule is its own: there the servers the
requester shares with the bot have their say (`DmRules`, docs/decisions/0007 and
docs/decisions/0035-dms-and-escalation-audiences.md), and a call is never laxer in a DM than in
the strictest of them.

Conditions judge the call's canonical arguments (`bot.tools.canonical`), the spelling the tool
itself will use, never a spelling the tool would read otherwise (docs/decisions/0010).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import ToolCall

from bot.base.conversation import DM_WORKSPACE, ConversationRef
from bot.base.errors import InvalidArgumentsError, InvalidDecisionError
from bot.base.mode import Mode
from bot.policy.conditions import (
    Condition,
    ConditionEvaluationError,
    InvalidConditionError,
    compile_condition,
)
from bot.policy.config import ToolRule, WorkspaceConfig
from bot.reviews.decisions import validate_tool_args
from bot.tools.canonical import canonical_args
from bot.tools.registry import ToolRegistry, ToolSpec
from bot.tools.server_wide import server_patterns

log = logging.getLogger(__name__)

ConfigLoader = Callable[[str, str], Awaitable[WorkspaceConfig]]
"""`(platform, workspace_id) -> WorkspaceConfig`."""

REQUESTER_KEY = "countersign_requester"
"""The run config's `configurable` key holding the run's `Requester` (see `PolicyContext.from_config`)."""


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asked for the run's calls: the author of the conversation's last human message.

    Put in the run config by `bot.turns.runner.TurnRunner`, so that the graph's nodes at any depth (a
    subagent's history holds only its query) know whose calls they gate. An object rather
    than a string: LangGraph copies a run config's plain string values into the metadata of
    every checkpoint, which need not carry it.
    """

    user_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """Where a call is being made, and for whom.

    Attributes:
        requester_id: the user whose message led to the call ("" when unknown: nothing the
            requester alone could allow, such as a trust grant, applies).
    """

    thread_id: str
    platform: str
    workspace_id: str
    channel_id: str
    requester_id: str = ""

    @classmethod
    def from_thread_id(cls, thread_id: str, *, requester_id: str = "") -> PolicyContext:
        """The context of a Countersign thread id (an unparsable id gets empty fields)."""
        try:
            ref = ConversationRef.from_thread_id(thread_id)
        except ValueError:
            return cls(thread_id=thread_id, platform="", workspace_id="", channel_id="", requester_id=requester_id)
        return cls(
            thread_id=thread_id,
            platform=ref.platform,
            workspace_id=ref.workspace_id,
            channel_id=ref.channel_id,
            requester_id=requester_id,
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PolicyContext:
        """The context of a node's run config: its `thread_id` and its `Requester`, if any."""
        configurable = config.get("configurable") or {}
        requester = configurable.get(REQUESTER_KEY)
        return cls.from_thread_id(
            str(configurable.get("thread_id", "")),
            requester_id=requester.user_id if isinstance(requester, Requester) else "",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Ruling:
    """A call's mode, and, for a call refused where it was asked, where it could be asked instead.

    Attributes:
        mode: what happens to the call.
        ask_in: with `DENY` in a Discord DM: the servers (workspace ids) the requester shares
            with the bot whose rules need someone other than the requester to decide this call
            (self-approval off, or a quorum above one), which nobody can in a DM; the requester
            is told to ask there.
        unchecked: with `DENY` in a Discord DM: some server that could be stricter could not be
            checked (a lookup failed, or more servers than `bot.policy.dm_rules.MAX_SERVERS` could be),
            so the call is refused (fail closed) and the requester is told to ask in a server.
    """

    mode: Mode
    ask_in: tuple[str, ...] = ()
    unchecked: bool = False

    @property
    def referred(self) -> bool:
        """Whether the call is refused here for want of a decider, and the requester is to be told where to ask."""
        return self.mode is Mode.DENY and (bool(self.ask_in) or self.unchecked)


class ReviewPolicy(Protocol):
    """Decides each tool call's mode."""

    def configured_tools(self) -> frozenset[str]:
        """Names of the tools this policy has rules for (checked against the graph's tools)."""
        ...

    async def mode_for(self, call: ToolCall, context: PolicyContext) -> Mode:
        """The mode for `call` in `context`; must fail closed (REVIEW or DENY) when unsure."""
        ...

    async def ruling_for(self, call: ToolCall, context: PolicyContext) -> Ruling:
        """`mode_for`, with where to ask instead when the call is refused for want of a decider."""
        ...


class DmRules(Protocol):
    """What the servers a Discord DM's requester shares with the bot require of a call there.

    Implemented by `bot.policy.dm_rules.SharedServerRules` (it reads other workspaces' configuration and
    asks the platform who is a member).
    """

    async def ruling(self, tool_name: str, args: Mapping[str, Any], context: PolicyContext, own: Mode) -> Ruling:
        """The call's ruling in the DM of `context`, given `own`, its mode under the DM's own rules.

        Never laxer than `own`; never raises (a failure refuses the call, `Ruling.unchecked`).
        """
        ...


def rule_here(config: WorkspaceConfig, spec: ToolSpec | None, tool_name: str, channel_id: str) -> ToolRule | None:
    """The rule that decides a call of `tool_name` in `channel_id`, or None for the tool's default.

    In order: the tool's own rule (the channel's, else the workspace's); its MCP server's
    `deny` (`<server>__*`); the server's read-only hint as `auto`, when an admin let that
    server's hint count (`read-only-hint <server> auto`, `WorkspaceConfig.read_only_auto`) and
    the tool says it is read-only and not destructive; its server's other rule; none. So a
    hint never beats a rule an admin gave the tool, never runs what its server's rule denies,
    and never makes a call run without review unless an admin opted in for that server.

    Args:
        config: the workspace's configuration.
        spec: the tool as offered (or last offered), for its hints; None for an unknown tool.
        tool_name: the tool called.
        channel_id: where it is called ("" for workspace-wide rules only).
    """
    info = spec.mcp if spec is not None else None
    if info is None:
        return config.rule_for(tool_name, channel_id)
    return hinted_rule(
        config, tool_name, channel_id, read_only=info.hints.read_only, destructive=info.hints.destructive
    )


def hinted_rule(
    config: WorkspaceConfig, tool_name: str, channel_id: str, *, read_only: bool | None, destructive: bool | None
) -> ToolRule | None:
    """`rule_here` for an MCP tool given its server's hints (its `readOnlyHint` and `destructiveHint`).

    Also for a definition not offered yet (`bot.admin.outlook`: what an accept will let run).

    Args:
        config: the workspace's configuration.
        tool_name: the tool's `<server>__<tool>` name.
        channel_id: where it is called ("" for workspace-wide rules only).
        read_only: the server's `readOnlyHint` (None: not given).
        destructive: the server's `destructiveHint` (None: not given).
    """
    rule = config.rule_for(tool_name, channel_id)
    if rule is not None and (not rule.server_wide or rule.mode is Mode.DENY):
        return rule
    if read_only is not True or destructive is True:
        return rule
    if not config.read_only_auto(tool_name):
        return rule
    pattern = next(iter(server_patterns(tool_name)), tool_name)
    return ToolRule(tool_name=pattern, mode=Mode.AUTO, channel_id=rule.channel_id if rule else "", from_hint=True)


def effective_mode(spec: ToolSpec | None, rule: ToolRule | None, args: Mapping[str, Any], *, where: str = "") -> Mode:
    """The mode of one call: the admin's rule if any, else the tool's default.

    Conditions (the admin's and the built-in `review_when`) read the canonical arguments
    (`bot.tools.canonical.canonical_args`; already canonical for calls that entered through the
    model or an edit, so this is the same form again). Unknown tools get AUTO: they never run
    anyway (the tool node answers with the real tool list) and a card for a tool that does not
    exist would only confuse. Any failure while evaluating a condition gives REVIEW, and so do
    arguments without a canonical form (the tool would refuse them) whenever a condition
    decides, and arguments outside the tool's schema when an admin condition decides. (A call
    its tool refuses is answered before review whatever its mode but DENY, `bot.tools.refusals`;
    the REVIEW here holds wherever that answer is not given, e.g. a form that breaks.)

    Args:
        spec: the tool's spec; None for an unknown tool.
        rule: the admin's rule for the tool here (channel, else workspace), or None.
        args: the call's arguments.
        where: the thread id, for log lines.
    """
    if spec is None:
        return Mode.AUTO
    try:
        judged: dict[str, Any] | None = canonical_args(spec.tool, args)
    except InvalidArgumentsError as exc:
        log.info("arguments of %s have no canonical form (%s) (%s)", spec.name, exc.message, where)
        judged = None
    if rule is not None:
        if rule.mode is not Mode.REVIEW or not rule.condition:
            return rule.mode
        if judged is None:
            # The tool refuses these arguments; whatever they seem to say, a human looks.
            return Mode.REVIEW
        args = judged
        try:
            validate_tool_args(spec.tool, args, tool_checks=False)
        except InvalidDecisionError as exc:
            # Arguments outside the schema may mean something else to the tool than to the
            # condition (a number sent as text, say). Only arguments that fit the tool's
            # schema are trusted to mean what the condition sees.
            log.warning("arguments outside %s's schema (%s); requiring review (%s)", spec.name, exc, where)
            return Mode.REVIEW
        condition: Condition | None = None
        try:
            condition = compile_condition(rule.condition)
            return Mode.REVIEW if condition.holds(args) else Mode.AUTO
        except (ConditionEvaluationError, InvalidConditionError) as exc:
            _condition_failed(spec, rule, condition, exc, where)
            return Mode.REVIEW
    mode = Mode(spec.default_mode)
    if mode is Mode.REVIEW and spec.review_when is not None:
        if judged is None:
            return Mode.REVIEW
        try:
            return Mode.REVIEW if spec.review_when(judged) else Mode.AUTO
        except Exception:
            log.warning("built-in condition of %s failed; requiring review (%s)", spec.name, where, exc_info=True)
            return Mode.REVIEW
    return mode


_MISSING_WARNED: set[tuple[str, str, str]] = set()
"""(rule's name, condition, tool) of server-wide conditions already warned about a missing argument."""
_MISSING_WARNED_MAX = 10_000
"""Past this many, the set starts afresh (rules and tools are few; only conditions edited over and over add)."""


def _condition_failed(
    spec: ToolSpec, rule: ToolRule, condition: Condition | None, failure: Exception, where: str
) -> None:
    """Log why an admin's condition failed: the call then needs review (fail closed).

    A server-wide condition (`<server>__* review when args.repo == ...`) reads arguments some of
    the server's tools do not have; it cannot be checked against them when saved
    (docs/decisions/0045-server-wide-mcp-rules.md). For such a tool its evaluation fails on every
    call: that is warned once per rule and tool in this process (then at DEBUG), naming both and
    the missing arguments. The call still needs review, rather than the missing argument counting
    as "does not match": a team writing `review when args.repo == 'prod'` expects no call to run
    unreviewed because a tool spells its argument differently (`repository`) or hides it in
    another; one that wants such tools to run without review says so with `has(args.repo) && ...`
    or a rule for the tool. Any other failure (a wrong type in this call's arguments) is warned
    at each call.
    """
    missing = sorted(condition.arguments - set(spec.argument_names)) if condition and rule.server_wide else []
    if not missing:
        log.warning("%s; requiring review (%s)", failure, where)
        return
    key = (rule.tool_name, rule.condition or "", spec.name)
    if key in _MISSING_WARNED:
        log.debug(
            "%s has no %s for the condition of %s; requiring review (%s)", spec.name, missing, rule.tool_name, where
        )
        return
    if len(_MISSING_WARNED) >= _MISSING_WARNED_MAX:
        _MISSING_WARNED.clear()
    _MISSING_WARNED.add(key)
    log.warning(
        "the condition %r of %s reads %s, which %s does not have: its calls need review; said once per rule and "
        "tool until the bot restarts (%s)",
        rule.condition,
        rule.tool_name,
        ", ".join(repr(name) for name in missing),
        spec.name,
        where,
    )


class DefaultPolicy:
    """Each registered tool's built-in default only (no admin configuration)."""

    def __init__(self, registry: ToolRegistry) -> None:
        self._registry = registry

    def configured_tools(self) -> frozenset[str]:
        """All registered tool names."""
        return frozenset(self._registry.names())

    async def mode_for(self, call: ToolCall, context: PolicyContext) -> Mode:
        """The tool's default mode and condition."""
        return effective_mode(self._registry.get(call["name"]), None, call.get("args") or {}, where=context.thread_id)

    async def ruling_for(self, call: ToolCall, context: PolicyContext) -> Ruling:
        """`mode_for`, never referred elsewhere."""
        return Ruling(mode=await self.mode_for(call, context))


class ConfiguredPolicy:
    """Admin rules over the built-in defaults.

    Args:
        registry: the tools and their defaults.
        load: reads a workspace's configuration.
        dms: for a call in a Discord DM, which belongs to no server: what the servers its
            requester shares with the bot require (strictest wins, so a DM is no way around a
            server's `deny`, quorum or self-approval off). None: a DM follows the defaults alone.
    """

    def __init__(self, registry: ToolRegistry, load: ConfigLoader, dms: DmRules | None = None) -> None:
        self._registry = registry
        self._load = load
        self._dms = dms

    def configured_tools(self) -> frozenset[str]:
        """All registered tool names (admin rules are checked against them when saved)."""
        return frozenset(self._registry.names())

    async def mode_for(self, call: ToolCall, context: PolicyContext) -> Mode:
        """The channel's rule, else the workspace's, else the default; REVIEW when unsure.

        In a Discord DM, never laxer than the servers its requester shares with the bot, and
        DENY when those cannot be checked (`DmRules`).
        """
        return (await self.ruling_for(call, context)).mode

    async def ruling_for(self, call: ToolCall, context: PolicyContext) -> Ruling:
        """`mode_for`; in a Discord DM, also what the requester's servers require (see `DmRules`)."""
        try:
            config = await self._load(context.platform, context.workspace_id)
        except Exception:
            log.exception("could not read the policy; requiring review (thread_id=%s)", context.thread_id)
            return Ruling(mode=Mode.REVIEW)
        args = call.get("args") or {}
        spec = self._registry.get(call["name"])
        rule = rule_here(config, spec, call["name"], context.channel_id)
        own = effective_mode(spec, rule, args, where=context.thread_id)
        if context.workspace_id == DM_WORKSPACE and self._dms is not None:
            return await self._dms.ruling(call["name"], args, context, own)
        return Ruling(mode=own)
