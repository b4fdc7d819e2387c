"""Parsing `/countersign` text (Slack, and the terminal) into a `Command`.

Slack sends the words after the command; with "Escape channels, users, and links" on (see the
manifest), people, channels and user groups arrive as `<@U123|name>`, `<#C123|name>` and
`<!subteam^S123|@name>`. A Discord role mention (`<@&123>`) is accepted too. Everything after
the first `when` is the condition, taken as written (optionally wrapped in double quotes).
These are `CHAT_MENTIONS`; an adapter whose people are written otherwise (the terminal's
`@name` and `#name`) passes its own `Mentions` to `parse_command`, which matches mention
tokens with them and nothing else.
Discord's typed options meet the same checks through the helpers here (`parse_duration`,
`escalation`), so both platforms refuse the same things in the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.admin.commands import (
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
    SetEscalation,
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
from bot.base.agent_kind import AgentKind
from bot.base.errors import CountersignError
from bot.base.mode import Mode
from bot.policy.config import ApproverKind, CardRouting, ConversationScope
from bot.reviews.escalation.rules import EscalationTarget, TargetKind
from bot.reviews.trust.grants import MAX_TRUST_S, MIN_TRUST_S

MAX_QUORUM = 10
MIN_EXPIRY_S = 10
MAX_EXPIRY_S = 30 * 24 * 3600
MIN_ESCALATION_S = 10
MAX_ESCALATION_S = 30 * 24 * 3600
MAX_AUDIT_LIMIT = 100

_USER = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>|<@!?(\d+)>")
_ROLE = re.compile(r"<@&(\d+)>")
_GROUP = re.compile(r"<!subteam\^([A-Z0-9]+)(?:\|[^>]*)?>")
_CHANNEL = re.compile(r"<#([A-Z0-9]+|\d+)(?:\|[^>]*)?>")
_DURATION = re.compile(r"(\d+)\s*([smhd])")
_ARGUMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_TRUST_ID = re.compile(r"[0-9a-f]{8}")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, slots=True, kw_only=True)
class Mentions:
    """How command text names people, user groups, roles and channels on one platform.

    Each pattern must match a whole word; the id is its first group that matched. A kind
    without a pattern (None) is never recognised: such a word is taken for a person, and
    refused if it is not one.
    """

    user: re.Pattern[str]
    channel: re.Pattern[str]
    group: re.Pattern[str] | None = None
    role: re.Pattern[str] | None = None

    def match(self, kind: str, token: str) -> str | None:
        """The id in `token` when it is a mention of `kind` (`user`, `channel`, `group`, `role`), else None."""
        pattern: re.Pattern[str] | None = getattr(self, kind)
        found = pattern.fullmatch(token) if pattern is not None else None
        if found is None:
            return None
        return next(group for group in found.groups() if group is not None)


CHAT_MENTIONS = Mentions(user=_USER, channel=_CHANNEL, group=_GROUP, role=_ROLE)
"""Slack's escaped mentions and Discord's mention tokens: what `/countersign` text holds on both."""

USAGE = {
    "help": "help",
    "show": "show [in #channel]",
    "policy": "policy <tool>|<server>__* auto|review|deny|default [in #channel] [when <condition>]",
    "approvers": "approvers add|remove <@user|@group|@role> [for <tool>]",
    "admins": "admins add|remove <@user>",
    "quorum": "quorum <tool> <n>",
    "self-approval": "self-approval on|off [for <tool>]",
    "expiry": "expiry <duration like 90s, 30m, 4h, 2d>|off [for <tool>]",
    "cards": "cards here|dm|channel <#channel>",
    "escalate": "escalate <tool> after <duration like 30m> to <@user|@group|@role|#channel>, or escalate <tool> off",
    "read-only-hint": "read-only-hint <server> auto|review",
    "scope": "scope channel|thread [in #channel]",
    "agent": "agent react|subagents|default [in #channel]",
    "context": "context [reset]",
    "stop": "stop",
    "audit": "audit [tool] [@user] [limit n]",
    "trust": (
        "trust <tool> up-to <duration> [matching <arg>,...] [in #channel] | trust <tool> off|default "
        "[in #channel] | trust list [in #channel] | trust revoke <id>"
    ),
    "mcp": "mcp [status | accept <server>]",
}


class CommandError(CountersignError):
    """The command text cannot be understood; nothing was changed.

    Args:
        message: what is wrong.
        usage: the subcommand's usage line, when known.
    """

    def __init__(self, message: str, usage: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


@dataclass
class _Words:
    words: list[str]
    usage: str
    mentions: Mentions = CHAT_MENTIONS

    def take(self, what: str) -> str:
        if not self.words:
            raise CommandError(f"missing {what}", self.usage)
        return self.words.pop(0)

    def take_optional(self, keyword: str) -> str | None:
        """`keyword <value>` anywhere in the rest: removes both and returns the value."""
        for index, word in enumerate(self.words[:-1]):
            if word.lower() == keyword:
                value = self.words[index + 1]
                del self.words[index : index + 2]
                return value
        if self.words and self.words[-1].lower() == keyword:
            raise CommandError(f"`{keyword}` needs a value", self.usage)
        return None

    def done(self) -> None:
        if self.words:
            raise CommandError(f"unexpected `{' '.join(self.words)}`", self.usage)


_NUMBER = re.compile(r"[0-9]{1,6}")
"""A whole number in ASCII digits (`str.isdigit` also takes ², which `int` refuses)."""


def parse_command(
    text: str,
    *,
    condition_text: Callable[[str], str] | None = None,
    mentions: Mentions = CHAT_MENTIONS,
) -> Command:
    """Parse the text after `/countersign`.

    Args:
        text: the command text as the platform sent it; mention tokens (`<@U1>`, `<#C1>`, ...)
            are matched in it as they are.
        condition_text: turns the part after `when` into what the admin typed (Slack sends
            `&`, `<`, `>` escaped and URLs as `<https://...>` link tokens); the rest is never
            decoded, so a typed `<#C1>` (sent as `&lt;#C1&gt;`) is not taken for a mention.
        mentions: how people, groups, roles and channels are written (the terminal's differ
            from Slack's and Discord's); the condition is never matched against them.

    Raises:
        CommandError: naming what is wrong and showing the subcommand's usage; also for a NUL
            character anywhere (PostgreSQL text cannot hold U+0000, so it could not be stored).
    """
    if "\x00" in text:
        raise CommandError("the command contains a NUL character, which cannot be stored; in a condition write \\u0000")
    head, condition = _split_condition(text.strip())
    if condition is not None and condition_text is not None:
        condition = condition_text(condition)
    words = head.split()
    if not words:
        return Help()
    name = words.pop(0).lower()
    if name not in USAGE:
        raise CommandError(f"unknown subcommand `{name}`; try `help`")
    rest = _Words(words, USAGE[name], mentions)
    if condition is not None and name != "policy":
        raise CommandError("`when` only goes with `policy`", rest.usage)
    command = _PARSERS[name](rest, condition)
    rest.done()
    return command


def parse_duration(text: str, *, what: str = "expiry") -> int:
    """`90s`, `30m`, `4h`, `2d` (or combinations like `1h30m`) in seconds.

    Args:
        text: the duration as typed.
        what: the subcommand it is for (`expiry` or `escalate`), for its bounds (10 seconds to
            30 days for both) and its usage line.

    Raises:
        CommandError: for anything else, or outside the bounds.
    """
    usage = USAGE[what]
    seconds = _seconds(text, usage)
    if what == "escalate":
        if not MIN_ESCALATION_S <= seconds <= MAX_ESCALATION_S:
            raise CommandError("an escalation delay must be between 10s and 30d", usage)
    elif not MIN_EXPIRY_S <= seconds <= MAX_EXPIRY_S:
        raise CommandError("an expiry must be between 10s and 30d", usage)
    return seconds


def escalation(tool: str, after: str, target: EscalationTarget | None) -> SetEscalation:
    """`escalate <tool> after <duration> to <target>`, or `escalate <tool> off`, from its parts.

    Used by the text parser and by Discord's typed options alike.

    Args:
        tool: the tool name as typed (checked against the registry when executed).
        after: a duration (`parse_duration`), or `off`.
        target: where the card goes; must be given with a duration and not with `off`.

    Raises:
        CommandError: a bad duration, a duration without a target, or `off` with one.
    """
    usage = USAGE["escalate"]
    if after.strip().lower() == "off":
        if target is not None:
            raise CommandError("`escalate <tool> off` takes no target", usage)
        return SetEscalation(tool=tool, after_s=None)
    seconds = parse_duration(after, what="escalate")
    if target is None:
        raise CommandError("say where the card goes: `to` @someone, @group, @role or #channel", usage)
    return SetEscalation(tool=tool, after_s=seconds, target=target)


def escalation_target(token: str, usage: str, mentions: Mentions = CHAT_MENTIONS) -> EscalationTarget:
    """The target in a mention: a user, a Slack user group, a Discord role or a channel.

    Raises:
        CommandError: when `token` is none of these.
    """
    for kind in (TargetKind.CHANNEL, TargetKind.GROUP, TargetKind.ROLE, TargetKind.USER):
        subject = mentions.match(kind.value, token)
        if subject is not None:
            return EscalationTarget(kind=kind, subject_id=subject)
    raise CommandError(f"`{token}` is not a person, group, role or channel; name it as @someone or #channel", usage)


def parse_trust_duration(text: str) -> int:
    """A trust's `up-to`, like `30m` or `4h`, in seconds.

    Raises:
        CommandError: for anything that is not a duration, or outside one minute to one day
            (`bot.reviews.trust.grants.MIN_TRUST_S`, `MAX_TRUST_S`).
    """
    seconds = _seconds(text, USAGE["trust"])
    if not MIN_TRUST_S <= seconds <= MAX_TRUST_S:
        raise CommandError(
            "a trust lasts from 1m to 1d (for longer, change the policy: `policy <tool> auto when ...`)",
            USAGE["trust"],
        )
    return seconds


def parse_matching(text: str) -> tuple[str, ...]:
    """Argument names after `matching`: `url` or `method,url` (spaces after commas allowed).

    Raises:
        CommandError: for an empty name or one that could not be an argument name.
    """
    names = tuple(name.strip() for name in text.split(","))
    for name in names:
        if not _ARGUMENT.fullmatch(name):
            raise CommandError(f"`{name}` is not an argument name; write e.g. matching method,url", USAGE["trust"])
    return tuple(dict.fromkeys(names))


def _seconds(text: str, usage: str) -> int:
    cleaned = text.strip().lower()
    parts = _DURATION.findall(cleaned)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != cleaned.replace(" ", ""):
        raise CommandError(f"`{text}` is not a duration; use e.g. 90s, 30m, 4h or 2d", usage)
    return sum(int(number) * _UNITS[unit] for number, unit in parts)


def channel_id(token: str, usage: str, mentions: Mentions = CHAT_MENTIONS) -> str:
    """The id in a channel mention.

    Raises:
        CommandError: when `token` is not a channel mention.
    """
    found = mentions.match("channel", token)
    if found is None:
        raise CommandError(f"`{token}` is not a channel; name it as #channel", usage)
    return found


def user_id(token: str, usage: str, mentions: Mentions = CHAT_MENTIONS) -> str:
    """The id in a user mention.

    Raises:
        CommandError: when `token` is not a user mention.
    """
    found = mentions.match("user", token)
    if found is None:
        raise CommandError(f"`{token}` is not a person; name them as @someone", usage)
    return found


def _channel(token: str, words: _Words) -> str:
    return channel_id(token, words.usage, words.mentions)


def _user(token: str, words: _Words) -> str:
    return user_id(token, words.usage, words.mentions)


def _split_condition(text: str) -> tuple[str, str | None]:
    match = re.search(r"(?:^|\s)when(?:\s|$)", text, flags=re.IGNORECASE)
    if match is None:
        return text, None
    condition = text[match.end() :].strip()
    if not condition:
        raise CommandError("`when` needs a condition, e.g. when args.method != 'GET'", USAGE["policy"])
    return text[: match.start()], condition


def _subject(token: str, words: _Words) -> tuple[ApproverKind, str]:
    for kind in (ApproverKind.GROUP, ApproverKind.ROLE):
        subject = words.mentions.match(kind.value, token)
        if subject is not None:
            return kind, subject
    return ApproverKind.USER, _user(token, words)


def _add_or_remove(words: _Words) -> bool:
    action = words.take("add or remove").lower()
    if action not in {"add", "remove"}:
        raise CommandError(f"expected add or remove, got `{action}`", words.usage)
    return action == "add"


def _help(words: _Words, condition: str | None) -> Command:
    return Help()


def _show(words: _Words, condition: str | None) -> Command:
    where = words.take_optional("in")
    return Show(channel_id=_channel(where, words) if where else None)


def _policy(words: _Words, condition: str | None) -> Command:
    tool = words.take("a tool name")
    word = words.take("a mode: auto, review, deny or default").lower()
    modes = {"auto": Mode.AUTO, "review": Mode.REVIEW, "deny": Mode.DENY, "default": None}
    if word not in modes:
        raise CommandError(f"`{word}` is not a mode; use auto, review, deny or default", words.usage)
    where = words.take_optional("in")
    mode = modes[word]
    if condition is not None and mode is not Mode.REVIEW:
        raise CommandError("a `when` condition only goes with `review`", words.usage)
    return SetPolicy(tool=tool, mode=mode, channel_id=_channel(where, words) if where else None, condition=condition)


def _approvers(words: _Words, condition: str | None) -> Command:
    add = _add_or_remove(words)
    kind, subject = _subject(words.take("who (@user, @group or @role)"), words)
    return ChangeApprovers(add=add, kind=kind, subject_id=subject, tool=words.take_optional("for"))


def _admins(words: _Words, condition: str | None) -> Command:
    add = _add_or_remove(words)
    return ChangeAdmins(add=add, user_id=_user(words.take("who (@user)"), words))


def _quorum(words: _Words, condition: str | None) -> Command:
    tool = words.take("a tool name")
    raw = words.take("a number")
    if not _NUMBER.fullmatch(raw) or not 1 <= int(raw) <= MAX_QUORUM:
        raise CommandError(f"the quorum must be a whole number from 1 to {MAX_QUORUM}", words.usage)
    return SetQuorum(tool=tool, count=int(raw))


def _self_approval(words: _Words, condition: str | None) -> Command:
    state = words.take("on or off").lower()
    if state not in {"on", "off"}:
        raise CommandError(f"expected on or off, got `{state}`", words.usage)
    return SetSelfApproval(allowed=state == "on", tool=words.take_optional("for"))


def _expiry(words: _Words, condition: str | None) -> Command:
    raw = words.take("a duration or off")
    tool = words.take_optional("for")
    return SetExpiry(seconds=None if raw.lower() == "off" else parse_duration(raw), tool=tool)


def _cards(words: _Words, condition: str | None) -> Command:
    where = words.take("here, dm or channel").lower()
    if where not in {"here", "dm", "channel"}:
        raise CommandError(f"expected here, dm or channel, got `{where}`", words.usage)
    if where == "channel":
        return SetCards(routing=CardRouting.CHANNEL, channel_id=_channel(words.take("#channel"), words))
    return SetCards(routing=CardRouting(where))


def _escalate(words: _Words, condition: str | None) -> Command:
    tool = words.take("a tool name")
    word = words.take("`after <duration>` or `off`")
    if word.lower() == "off":
        return escalation(tool, "off", None)
    if word.lower() != "after":
        raise CommandError(f"expected `after <duration>` or `off`, got `{word}`", words.usage)
    duration = words.take("a duration like 30m")
    if not words.words:
        return escalation(tool, duration, None)
    to = words.take("to")
    if to.lower() != "to":
        raise CommandError(f"expected `to <@user|@group|@role|#channel>`, got `{to}`", words.usage)
    target = escalation_target(
        words.take("who or where (@user, @group, @role or #channel)"), words.usage, words.mentions
    )
    return escalation(tool, duration, target)


def _read_only_hint(words: _Words, condition: str | None) -> Command:
    server = words.take("an MCP server's name").removesuffix("__*")
    word = words.take("auto or review").lower()
    if word not in {"auto", "review"}:
        raise CommandError(f"expected auto or review, got `{word}`", words.usage)
    return SetReadOnlyHint(server=server, auto=word == "auto")


def _scope(words: _Words, condition: str | None) -> Command:
    kind = words.take("channel or thread").lower()
    if kind not in {"channel", "thread"}:
        raise CommandError(f"expected channel or thread, got `{kind}`", words.usage)
    where = words.take_optional("in")
    return SetScope(scope=ConversationScope(kind), channel_id=_channel(where, words) if where else None)


def _agent(words: _Words, condition: str | None) -> Command:
    kind = words.take("react, subagents or default").lower()
    if kind not in {agent.value for agent in AgentKind} | {"default"}:
        raise CommandError(f"expected react, subagents or default, got `{kind}`", words.usage)
    where = words.take_optional("in")
    agent = None if kind == "default" else AgentKind(kind)
    return SetAgent(agent=agent, channel_id=_channel(where, words) if where else None)


def _context(words: _Words, condition: str | None) -> Command:
    if not words.words:
        return ShowContext()
    action = words.take("reset").lower()
    if action != "reset":
        raise CommandError(f"expected reset or nothing, got `{action}`", words.usage)
    return ResetContext()


def _stop(words: _Words, condition: str | None) -> Command:
    return StopTurn()


def _audit(words: _Words, condition: str | None) -> Command:
    limit_text = words.take_optional("limit")
    limit = 20
    if limit_text is not None:
        if not _NUMBER.fullmatch(limit_text) or not 1 <= int(limit_text) <= MAX_AUDIT_LIMIT:
            raise CommandError(f"limit must be from 1 to {MAX_AUDIT_LIMIT}", words.usage)
        limit = int(limit_text)
    tool = user = None
    while words.words:
        word = words.take("")
        if words.mentions.match("user", word) is not None:
            user = _user(word, words)
        elif tool is None:
            tool = word
        else:
            raise CommandError(f"unexpected `{word}`", words.usage)
    return ShowAudit(tool=tool, user_id=user, limit=limit)


def _trust(words: _Words, condition: str | None) -> Command:
    first = words.take("a tool name, list or revoke")
    if first.lower() == "list":
        where = words.take_optional("in")
        return ListTrust(channel_id=_channel(where, words) if where else None)
    if first.lower() == "revoke":
        grant_id = words.take("the trust's id (see `trust list`)").lower()
        if not _TRUST_ID.fullmatch(grant_id):
            raise CommandError(f"`{grant_id}` is not a trust id; `trust list` shows them", words.usage)
        return RevokeTrust(grant_id=grant_id)
    where = words.take_optional("in")
    channel = _channel(where, words) if where else None
    action = words.take("up-to <duration>, off or default").lower()
    if action in {"off", "default"}:
        return SetTrust(tool=first, up_to_s=0 if action == "off" else None, channel_id=channel)
    if action != "up-to":
        raise CommandError(f"expected up-to, off or default, got `{action}`", words.usage)
    seconds = parse_trust_duration(words.take("a duration like 30m"))
    matching: tuple[str, ...] = ()
    if words.words and words.words[0].lower() == "matching":
        words.take("matching")
        names = words.take("argument names, e.g. matching method,url")
        while names.endswith(",") and words.words:  # `matching method, url`
            names += words.take("")
        matching = parse_matching(names)
    return SetTrust(tool=first, up_to_s=seconds, matching=matching, channel_id=channel)


def _mcp(words: _Words, condition: str | None) -> Command:
    if not words.words:
        return ShowMcp()
    action = words.take("accept").lower()
    if action == "status":
        return ShowMcp()  # Discord's spelling (`/countersign mcp status`), so one spelling works everywhere
    if action != "accept":
        raise CommandError(f"expected accept, status or nothing, got `{action}`", words.usage)
    return AcceptMcp(server=words.take("the server's name (`mcp` lists them)"))


_PARSERS = {
    "help": _help,
    "show": _show,
    "policy": _policy,
    "approvers": _approvers,
    "admins": _admins,
    "quorum": _quorum,
    "self-approval": _self_approval,
    "expiry": _expiry,
    "cards": _cards,
    "escalate": _escalate,
    "read-only-hint": _read_only_hint,
    "scope": _scope,
    "agent": _agent,
    "context": _context,
    "stop": _stop,
    "audit": _audit,
    "trust": _trust,
    "mcp": _mcp,
}
