"""How Discord writes the shared sentences (`adapters.words`): markdown bold, `<@…>` mentions, `<t:…>` dates.

The one `Markup` of the Discord adapter, with the message limit and the mentions policy every
message of the bot uses (docs/decisions/0060-words-in-one-place.md).
"""

from __future__ import annotations

from datetime import datetime

import discord

from adapters.words.markup import Markup

MESSAGE_CHARS = 2000
"""Discord's limit for a message's content."""

NO_PINGS = discord.AllowedMentions.none()
"""The mentions a bot message may ping unless it says otherwise: none."""

DISCORD_MARKUP = Markup(
    bold=lambda text: f"**{text}**",
    user=lambda user_id: f"<@{user_id}>",
    channel=lambda channel_id: f"<#{channel_id}>",
    role=lambda role_id: f"<@&{role_id}>",
    group=lambda group_id: f"group {group_id}",
    when=lambda moment: f"<t:{int(moment.timestamp())}:f>" if isinstance(moment, datetime) else "",
    escape=lambda text: text,
    admins_are="members with the Manage Server permission",
    usage={
        "help": "help",
        "show": "show [channel]",
        "policy": "policy tool:<tool> mode:auto|review|deny|default [channel] [when:<condition>]",
        "approvers": "approvers action:add|remove user:<@user> or role:<@role> [tool]",
        "admins": "admins action:add|remove user:<@user>",
        "quorum": "quorum tool:<tool> count:<1-10>",
        "self-approval": "self-approval state:on|off [tool]",
        "expiry": "expiry duration:<90s, 30m, 4h, 2d or off> [tool]",
        "cards": "cards where:here|dm|channel [channel]",
        "escalate": "escalate tool:<tool> after:<duration like 30m, or off> [user] [role] [channel]",
        "read-only-hint": "read-only-hint server:<server> mode:auto|review",
        "scope": "scope kind:channel|thread [channel]",
        "agent": "agent kind:react|subagents|default [channel]",
        "context": "context [reset:True]",
        "stop": "stop",
        "audit": "audit [tool] [user] [limit]",
        "trust": (
            "trust set tool:<tool> up-to:<30m, 4h, off or default> [matching:<arg,...>] [channel] | "
            "trust list [channel] | trust revoke id:<id>"
        ),
        "mcp": "mcp status | mcp accept server:<server>",
    },
    examples=(
        ("show", "the effective policy here"),
        ("policy tool:http_request mode:review when:args.method != 'GET'", "review only non-GET requests"),
        ("policy tool:calculator mode:deny channel:#general", "switch a tool off in one channel"),
        ("policy tool:http_request mode:default", "back to the built-in default"),
        ("approvers action:add role:@Ops tool:http_request", "who may approve (users or roles)"),
        ("admins action:add user:@bob", "add a bot admin"),
        ("quorum tool:http_request count:2", "two different approvers needed"),
        ("self-approval state:off", "requesters may not approve their own calls"),
        ("expiry duration:30m", "cards expire after 30 minutes"),
        ("cards where:channel channel:#approvals", "post cards in one channel (or: here, dm)"),
        (
            "escalate tool:send_email after:30m role:@Ops",
            "a card still undecided after 30 minutes is posted again, mentioning @Ops, who may then decide it",
        ),
        (
            "policy tool:github__* mode:review when:args.repo != 'sandbox'",
            "one rule for every tool of the MCP server github (a tool's own rule beats it)",
        ),
        ("read-only-hint server:github mode:auto", "calls of the tools github says are read-only run without a card"),
        ("scope kind:channel channel:#support", "one conversation per channel (or: thread)"),
        ("agent kind:subagents channel:#ops", "the supervisor with subagents answers in #ops"),
        ("context", "this conversation's summary and window size (typed in a thread: the thread's)"),
        ("context reset:True", "the model starts afresh in this conversation"),
        (
            "stop",
            "stop the bot's running turn here (typed in a thread: the thread's); or press Stop on its status line",
        ),
        ("audit tool:http_request limit:10", "recent decisions and changes"),
        (
            "trust set tool:http_request up-to:30m matching:method,url",
            "cards offer “Approve and trust for 30 minutes”: the same request by the same person runs without a card",
        ),
        ("trust list", "live trusts (`trust revoke` ends one)"),
    ),
)
"""`/countersign` replies in Discord (markdown, typed options), also used for refusals of Stop."""
