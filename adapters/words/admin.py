"""Words for `/countersign` replies, shared by the Slack and Discord adapters.

Both platforms show the same sentences; only the markup differs (bold, mentions, dates), so
each adapter passes its `Markup`. Replies are private (ephemeral) on both platforms.
"""

from __future__ import annotations

import json
from typing import Any

from adapters.words.display import reveal_invisible
from adapters.words.markup import Markup
from adapters.words.mcp import accept_refused_text, accepted_text, overview_text
from adapters.words.stop import STOP_HELP, stop_error_text, stopped_text
from bot.admin.parse import USAGE, CommandError
from bot.admin.views import (
    AuditPage,
    Changed,
    ContextReset,
    ContextView,
    HelpPage,
    McpAccepted,
    McpAcceptRefused,
    McpOverview,
    PolicyView,
    Reply,
    ServerLine,
    StopRequested,
    ToolLine,
    TrustList,
    TrustRevoked,
)
from bot.base.agent_kind import AgentKind
from bot.base.conversation import ConversationRef
from bot.base.errors import BusyReason, ConversationBusyError, NotPermittedError
from bot.policy.conditions import InvalidConditionError
from bot.policy.config import ApproverKind, ApproverRule, CardRouting, TrustSetting
from bot.reviews.escalation.rules import EscalationRule, EscalationTarget, TargetKind
from bot.reviews.trust.grants import TrustGrant

_ARGS_CHARS = 160
SUMMARY_CHARS = 1500
"""Characters of a running summary shown by `context`: with the lines around it, the reply fits
one message on either platform (Discord: 2,000 characters; summaries run to many thousands)."""


HELP_EXAMPLES = (
    ("show", "the effective policy here"),
    ("policy http_request review when args.method != 'GET'", "review only non-GET requests"),
    ("policy calculator deny in #general", "switch a tool off in one channel"),
    ("approvers add @alice for http_request", "who may approve (users, roles, groups)"),
    ("quorum http_request 2", "two different approvers needed"),
    ("expiry 30m", "cards expire after 30 minutes"),
    ("cards channel #approvals", "post cards in one channel (or: here, dm)"),
    ("escalate send_email after 30m to #oncall", "a card still undecided after 30 minutes is also posted there"),
    (
        "policy github__* review when args.repo != 'sandbox'",
        "one rule for every tool of the MCP server github (a tool's own rule wins)",
    ),
    ("read-only-hint github auto", "the tools github calls read-only run without a card"),
    ("scope channel in #support", "one conversation per channel (or: thread)"),
    ("agent subagents in #ops", "the supervisor with subagents answers in #ops"),
    ("context reset", "the model starts afresh in this conversation"),
    ("stop", STOP_HELP),
    ("audit http_request limit 10", "recent decisions and changes"),
    (
        "trust http_request up-to 30m matching method,url",
        "cards offer “Approve and trust for 30 minutes”: the same request by the same person runs without a card",
    ),
)


def render(reply: Reply, markup: Markup) -> str:
    """The text of a successful command's reply."""
    if isinstance(reply, HelpPage):
        return _help(reply, markup)
    if isinstance(reply, PolicyView):
        return _show(reply, markup)
    if isinstance(reply, AuditPage):
        return _audit(reply, markup)
    if isinstance(reply, ContextView):
        return _context(reply, markup)
    if isinstance(reply, ContextReset):
        return _context_reset(reply)
    if isinstance(reply, StopRequested):
        return stopped_text(reply)
    if isinstance(reply, TrustList):
        return _trust_list(reply, markup)
    if isinstance(reply, TrustRevoked):
        return _trust_revoked(reply.grant, markup)
    if isinstance(reply, McpOverview):
        return overview_text(reply, markup.bold, markup.when, markup.escape)
    if isinstance(reply, McpAccepted):
        return accepted_text(reply, markup.escape)
    if isinstance(reply, McpAcceptRefused):
        return accept_refused_text(reply, markup.escape)
    return _changed(reply, markup)


def error_text(error: Exception, markup: Markup) -> str:
    """The text of a refused command; nothing was changed."""
    stop = stop_error_text(error, markup)
    if stop is not None:
        return stop
    if isinstance(error, NotPermittedError):
        if error.reason == "no_workspace":
            return "Settings belong to a workspace; run this command in a channel, not in a DM."
        if error.reason == "dm_reset":
            return "Only admins can reset a conversation, and a DM belongs to no server, so none can here."
        if error.reason == "not_governing":
            return (
                "Only the admins of the workspaces where the bot posts its admins' messages "
                "(COUNTERSIGN_ADMIN_CHANNELS) can accept MCP tools. Nothing was changed."
            )
        if error.reason == "not_a_party":
            return (
                "Only admins, the approver who granted a trust and the person it trusts can end it. "
                "Nothing was changed."
            )
        return f"Only admins can do that: {markup.admins_are}, and bot admins. Nothing was changed."
    if isinstance(error, ConversationBusyError):
        if error.reason is BusyReason.REVIEW_PENDING:
            return (
                "A card is waiting for a decision in this conversation, and its calls must stay in the "
                "history: decide it first, then reset. Nothing was changed."
            )
        return (
            "The bot is at work in this conversation (a turn is running, or a message waits for its "
            "answer); try again once it has answered. Nothing was changed."
        )
    if isinstance(error, CommandError):
        # The platform's own spelling of the usage line, when it has one (Slack's `context` takes a link).
        typed = next((markup.usage.get(name, line) for name, line in USAGE.items() if line == error.usage), error.usage)
        usage = f"\nUsage: `/countersign {typed}`" if typed else ""
        return f"That did not work: {error.message}. Nothing was changed.{usage}"
    if isinstance(error, InvalidConditionError):
        return f"That condition was refused: {error.message}. Nothing was changed."
    return "Something went wrong; nothing was changed. The details are in the bot's log."


def _help(page: HelpPage, markup: Markup) -> str:
    lines = [
        markup.bold("Countersign settings")
        + " (help, show and context for everyone; stop for who asked and admins; trust list and revoke for "
        "the trusts you granted or that cover you; the rest for admins):"
    ]
    lines += [f"• `/countersign {usage}`" for usage in markup.usage.values()]
    lines.append(markup.bold("Examples:"))
    lines += [f"• `/countersign {example}`: {meaning}" for example, meaning in markup.examples or HELP_EXAMPLES]
    lines.append(
        "Conditions are CEL over the call's arguments, e.g. `args.method != 'GET'`; durations are like "
        "`90s`, `30m`, `4h`, `2d`. Without `in #channel` a setting applies to the whole workspace."
    )
    lines.append("Tools: " + ", ".join(f"`{tool}`" for tool in page.tools))
    if page.servers:
        servers = ", ".join(f"`{server}__*`" for server in page.servers)
        lines.append(f"MCP servers' tools (`show` and `mcp` list them): {servers}")
    return "\n".join(lines)


def _show(view: PolicyView, markup: Markup) -> str:
    where = markup.channel(view.channel_id) if view.channel_id else "this workspace"
    lines = [markup.bold(f"Effective policy for {where}")]
    lines += [_tool_line(tool, view, markup) for tool in view.tools]
    if view.servers:
        lines.append("MCP servers (a `<server>__*` setting applies to each of its tools that has none of its own):")
        lines += [_server_line(server, markup) for server in view.servers]
    approvers = _approvers(view.workspace_approvers, markup) or "workspace admins and bot admins (default)"
    requester = "the requester too (self-approval is on)" if view.self_approval else "not the requester"
    lines.append(f"Approvers: {approvers}; {requester}")
    if view.admins:
        lines.append("Bot admins: " + ", ".join(markup.user(user) for user in view.admins))
    lines.append(
        f"Quorum: {view.quorum} · Self-approval: {_on_off(view.self_approval)} · Expiry: {_duration(view.expiry_s)}"
    )
    cards = view.cards
    routing = {
        CardRouting.HERE: "in the conversation",
        CardRouting.DM: "in approvers' DMs",
        CardRouting.CHANNEL: f"in {markup.channel(cards.channel_id or '')}",
    }[cards.routing]
    scope = view.scope.value if view.scope else "platform default"
    agent = f"{view.agent.value} ({view.agent_source})"
    if view.agent is AgentKind.SUBAGENTS and view.subagents:
        agent += ": " + ", ".join(f"`{name}`" for name in view.subagents)
    lines.append(f"Cards: {routing} · Scope: {scope} · Agent: {agent}")
    return "\n".join(lines)


_SOURCES = {
    "server": "server-wide",
    "server-channel": "server-wide, channel",
    "hint": "the server's read-only hint, trusted by an admin",
}


def _tool_line(tool: ToolLine, view: PolicyView, markup: Markup) -> str:
    text = f"• `{tool.tool}`: {tool.mode.value}"
    if tool.condition:
        text += f" when {markup.escape(tool.condition)}"
    text += f" ({_SOURCES.get(tool.source, tool.source)})"
    extras = []
    if tool.quorum != view.quorum:
        extras.append(f"quorum {tool.quorum}")
    if tool.self_approval != view.self_approval:
        extras.append(f"self-approval {_on_off(tool.self_approval)}")
    if tool.expiry_s != view.expiry_s:
        extras.append(f"expiry {_duration(tool.expiry_s)}")
    own = tuple(a for a in tool.approvers if a.tool_name)
    if own:
        extras.append(f"approvers {_approvers(own, markup)}")
    if tool.trust is not None:
        extras.append(f"trust {_trust_words(tool.trust)}")
    if tool.escalation is not None:
        extras.append(f"escalates {_escalation_words(tool.escalation, markup)}")
    return text + ("".join(f" · {e}" for e in extras))


def _server_line(server: ServerLine, markup: Markup) -> str:
    text = f"• `{server.pattern}` ({'connected' if server.connected else 'not connected'})"
    if not server.configured:
        return text + ": no server-wide settings"
    extras = []
    if server.rule is not None:
        rule = server.rule.mode.value
        if server.rule.condition:
            rule += f" when {markup.escape(server.rule.condition)}"
        extras.append(rule + (" (channel)" if server.rule.channel_id else ""))
    if server.quorum is not None:
        extras.append(f"quorum {server.quorum}")
    if server.self_approval is not None:
        extras.append(f"self-approval {_on_off(server.self_approval)}")
    if server.expiry_s is not None:
        extras.append(f"expiry {_duration(server.expiry_s)}")
    if server.approvers:
        extras.append(f"approvers {_approvers(server.approvers, markup)}")
    if server.trust is not None:
        extras.append(f"trust {_trust_words(server.trust)}")
    if server.escalation is not None:
        extras.append(f"escalates {_escalation_words(server.escalation, markup)}")
    if server.read_only_auto:
        extras.append("read-only hint: auto")
    return text + ": " + " · ".join(extras)


def _context(view: ContextView, markup: Markup) -> str:
    title = markup.bold("Context of this conversation")
    if not view.exists:
        return f"{title}\nNo state yet: the bot has not answered in this conversation, so its model has seen nothing."
    agent = view.agent.value if view.agent else "unknown"
    share = f" ({view.tokens * 100 // view.budget_tokens} %)" if view.budget_tokens else ""
    lines = [
        f"{title} (`{view.thread_id}`)",
        f"Agent: `{agent}` · {_count(view.messages, 'message')} kept verbatim · about {view.tokens:,} of "
        f"{view.budget_tokens:,} tokens per model call{share}",
    ]
    if view.is_empty:
        lines.append("The model's view is empty (new, or reset): the next message starts afresh.")
    elif view.tokens > view.budget_tokens:
        lines.append("Over the window: the next message folds the oldest turns into the summary.")
    if not view.summary:
        lines.append("No summary: no turn has been folded out of the history.")
        return "\n".join(lines)
    shown = view.summary
    if len(shown) > SUMMARY_CHARS:
        shown = shown[: SUMMARY_CHARS - 1] + "…"
        lines.append(f"Summary of earlier turns ({len(view.summary):,} characters, the first {SUMMARY_CHARS:,} shown):")
    else:
        lines.append(f"Summary of earlier turns ({len(view.summary):,} characters):")
    lines += [f"> {markup.escape(line)}" for line in shown.splitlines() or [""]]
    return "\n".join(lines)


def _context_reset(reset: ContextReset) -> str:
    before = reset.before
    if not before.exists:
        return "Nothing to reset: this conversation has no state yet."
    if not reset.changed:
        return "Nothing to reset: the model's view of this conversation is already empty."
    removed = _count(before.messages, "message")
    if before.summary:
        removed += f" and the summary ({len(before.summary):,} characters)"
    return (
        f"Context reset: the model starts afresh in this conversation ({removed} removed from its view). "
        "The audit log, approvals and tool runs are kept. Recorded in the audit log."
    )


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


_SETTING_NAMES = {"expiry_s": "expiry", "self_approval": "self-approval", "read_only_auto": "read-only hint"}


def _changed(change: Changed, markup: Markup) -> str:
    subject = _SETTING_NAMES.get(change.setting, change.setting)
    if change.tool:
        subject += f" for `{change.tool}`"
    if change.channel_id:
        subject += f" in {markup.channel(change.channel_id)}"
    offline = (
        f" Its MCP server `{change.offline}` is not offering it now; the setting applies to its calls once it is back."
        if change.offline
        else ""
    )
    if not change.changed:
        return f"Nothing to change: {subject} is already like that.{offline}"
    if change.setting == "read_only_auto":
        before, after = (
            "auto (a call the server says is read-only runs without a card)" if value else "review (the default)"
            for value in (change.before, change.after)
        )
    elif change.setting == "expiry_s":
        before, after = _expiry_value(change.before), _expiry_value(change.after)
    elif change.setting == "trust":
        before, after = _trust_value(change.before), _trust_value(change.after)
    elif change.setting == "admins":
        before, after = (markup.user(v) if v else "not set" for v in (change.before, change.after))
    else:
        before, after = _value(change.before, markup), _value(change.after, markup)
    return f"Updated {subject}: {after} (was: {before}). Recorded in the audit log.{offline}"


def _audit(page: AuditPage, markup: Markup) -> str:
    if not page.entries:
        return "No audit entries match."
    lines = [markup.bold(f"Audit log (newest first, {len(page.entries)} entries)")]
    for entry in page.entries:
        when = markup.when(entry.at) if entry.at else ""
        who = markup.user(entry.actor_id) if entry.actor_id else "system"
        parts = [when, entry.kind.value, entry.outcome, who]
        source = entry.detail.get("source") if entry.detail else None
        if entry.tool_name:
            parts.append(f"`{source}` → `{entry.tool_name}`" if source else f"`{entry.tool_name}`")
        if entry.kind.value == "config" and entry.detail.get("channel_id"):
            parts.append("in " + markup.channel(str(entry.detail["channel_id"])))
        if entry.kind.value == "escalation":
            parts.append(_escalated_to(entry.detail.get("to"), markup))
        if entry.kind.value == "refused" and entry.detail.get("command"):
            parts.append(f"`/countersign {markup.escape(str(entry.detail['command']))}`")
        if entry.detail and entry.detail.get("trust_id"):
            parts.append(f"trust `{markup.escape(str(entry.detail['trust_id']))}`")
        args = entry.final_args if entry.final_args is not None else entry.proposed_args
        if args is not None:
            parts.append(f"`{markup.escape(_short(args))}`")
        if entry.reason:
            parts.append(markup.escape(reveal_invisible(entry.reason[:120])))
        if entry.kind.value == "config" and entry.detail:
            parts.append(
                markup.escape(_short({"before": entry.detail.get("before"), "after": entry.detail.get("after")}))
            )
        lines.append("• " + " · ".join(p for p in parts if p))
    return "\n".join(lines)


def _trust_value(value: Any) -> str:
    return _trust_words(value) if isinstance(value, TrustSetting) else "not set"


def _trust_words(setting: TrustSetting) -> str:
    """`up to 30m, matching `url``, `up to 30m, the same arguments`, or `off`."""
    if not setting.enabled:
        return "off"
    bound = "matching " + ",".join(f"`{n}`" for n in setting.matching) if setting.matching else "the same arguments"
    return f"up to {_duration(setting.max_s)}, {bound}"


def _trust_list(page: TrustList, markup: Markup) -> str:
    where = f" in {markup.channel(page.channel_id)}" if page.channel_id else ""
    if not page.grants:
        whose = "" if page.everyone else " that you granted or that cover your calls"
        return f"No live trusts{whose}{where}."
    whose = "" if page.everyone else " (those you granted or that cover your calls)"
    lines = [markup.bold(f"Live trusts{where}{whose}, soonest to end first:")]
    for line in page.grants:
        text = "• " + _trust_line(line.grant, markup, free=line.free)
        if not line.applies:
            text += " · not applied now: the trust setting changed"
        lines.append(text)
    lines.append("`/countersign trust revoke <id>` ends one at once.")
    return "\n".join(lines)


def _trust_line(grant: TrustGrant, markup: Markup, *, free: tuple[str, ...] = ()) -> str:
    """One grant: id, tool, requester, place, the values it binds, the arguments it leaves free, by whom, until."""
    thread = ConversationRef.from_thread_id(grant.thread_id).thread
    place = ("a thread in " if thread else "") + markup.channel(grant.channel_id)
    bound = "matching" if grant.matching else "the same arguments"
    left = f" · any {_names(free, markup)} (free)" if free else ""
    return (
        f"`{grant.id}` · `{grant.tool_name}` for {markup.user(grant.requester_id)} in {place} · {bound} "
        f"`{markup.escape(_short(grant.matched))}`{left} · by {markup.user(grant.granted_by_id)} "
        f"until {markup.when(grant.expires_at)}"
    )


def _names(names: tuple[str, ...], markup: Markup) -> str:
    return ", ".join(f"`{markup.escape(name)}`" for name in names)


def _trust_revoked(grant: TrustGrant, markup: Markup) -> str:
    return f"Revoked trust {_trust_line(grant, markup)}. Later calls get a card again. Recorded in the audit log."


def _approvers(rules: tuple[ApproverRule, ...], markup: Markup) -> str:
    names = {ApproverKind.USER: markup.user, ApproverKind.ROLE: markup.role, ApproverKind.GROUP: markup.group}
    return ", ".join(names[rule.kind](rule.subject_id) for rule in rules)


def _value(value: Any, markup: Markup) -> str:
    if value is None:
        return "not set"
    if isinstance(value, ApproverRule):
        return _approvers((value,), markup)
    if isinstance(value, EscalationRule):
        return _escalation_words(value, markup)
    if isinstance(value, bool):
        return _on_off(value)
    if isinstance(value, dict) and "routing" in value:
        channel = value.get("channel_id")
        return str(value["routing"]) + (f" {markup.channel(channel)}" if channel else "")
    return markup.escape(str(value))


def target_words(target: EscalationTarget, markup: Markup) -> str:
    """An escalation target as the platform writes it (a mention of the user, group, role or channel)."""
    names = {
        TargetKind.USER: markup.user,
        TargetKind.ROLE: markup.role,
        TargetKind.GROUP: markup.group,
        TargetKind.CHANNEL: markup.channel,
    }
    return names[target.kind](target.subject_id)


def _escalated_to(target: Any, markup: Markup) -> str:
    """The target of an escalation audit row (its `detail["to"]`) as "to <mention>", or "" without one."""
    if not isinstance(target, dict) or target.get("kind") not in {kind.value for kind in TargetKind}:
        return ""
    return "to " + target_words(
        EscalationTarget(kind=TargetKind(target["kind"]), subject_id=str(target.get("id"))), markup
    )


def _escalation_words(rule: EscalationRule, markup: Markup) -> str:
    return f"after {_duration(rule.after_s)} to {target_words(rule.target, markup)}"


def _expiry_value(value: Any) -> str:
    return "not set" if value is None else _duration(int(value))


def _on_off(value: bool) -> str:
    return "on" if value else "off"


def _duration(seconds: int | None) -> str:
    if not seconds:
        return "off"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _short(value: Any) -> str:
    """`value` as compact JSON on one line, cut to `_ARGS_CHARS` with "…", invisible characters shown.

    Revealed after the cut (`reveal_invisible`), so that no escape is cut in half.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return reveal_invisible(text if len(text) <= _ARGS_CHARS else text[: _ARGS_CHARS - 1] + "…")
