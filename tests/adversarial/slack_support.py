"""Small helpers shared by the Slack attack tests (on top of the end-to-end ones)."""

from __future__ import annotations

import json
from typing import Any

from countersign.server import BotServer
from tests.e2e.conftest import CAROL, CHANNEL, SIGNING_SECRET
from tests.e2e.slack.test_slack_flow import Card, card_state, wait_card
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender

BROADCASTS = ("<!channel>", "<!here>", "<!everyone>", "<@U999>", "<https://evil.example|")
"""Control sequences that would ping or disguise a link if they reached Slack unescaped."""


def runtime_of(bot: BotServer) -> Any:
    """The started bot's runtime (its service, database and sweepers)."""
    assert bot.runtime is not None
    return bot.runtime


async def db_rows(bot: BotServer, sql: str, *args: object) -> list[dict[str, Any]]:
    """Rows of a query on the bot's own pool, as dicts."""
    return [dict(row) for row in await runtime_of(bot).database.pool.fetch(sql, *args)]


def has_buttons(slack: SlackApiStandIn, card: Card) -> bool:
    """Whether the card message still has its Approve / Edit / Reject buttons."""
    blocks = card_state(slack, card).get("blocks") or []
    return any(block.get("type") == "actions" for block in blocks)


def card_json(slack: SlackApiStandIn, card: Card) -> str:
    """The card's blocks as JSON text (for substring checks)."""
    return json.dumps(card_state(slack, card).get("blocks") or [], ensure_ascii=False)


def ephemerals_to(slack: SlackApiStandIn, user: str) -> list[str]:
    """Texts of every ephemeral message sent to `user`."""
    return [str(c.args.get("text", "")) for c in slack.calls_to("chat.postEphemeral") if c.args.get("user") == user]


def posted_texts(slack: SlackApiStandIn, thread_ts: str) -> list[str]:
    """Texts the bot posted in a thread (answers, cards' fallback texts and notices)."""
    return [
        str(c.args.get("text", "")) for c in slack.calls_to("chat.postMessage") if c.args.get("thread_ts") == thread_ts
    ]


def everything_sent(slack: SlackApiStandIn) -> str:
    """Every text and block the bot sent to Slack's chat and views methods, as one string."""
    methods = ("chat.postMessage", "chat.update", "chat.postEphemeral", "views.open")
    return "\n".join(json.dumps(call.args, ensure_ascii=False) for call in slack.calls if call.method in methods)


def sender(port: int, team_id: str = "T1") -> SlackEventSender:
    """Signed Slack requests into a bot listening on `port`."""
    return SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=team_id)


async def card_ready(bot: BotServer, slack: SlackApiStandIn, *, count: int = 1) -> list[Card]:
    """Wait for `count` cards, then for the turn that posted them to end (card references stored).

    A click in the moment between a card's appearance and the bot storing where it is leaves
    the card un-updated (see `test_a_click_before_the_card_reference_is_stored_...`); tests that
    are not about that race wait for the turn to finish first.
    """
    cards = await wait_card(slack, count=count)
    assert bot.runtime is not None
    await bot.runtime.service.tasks.join()
    return cards


async def slash_countersign(events: SlackEventSender, slack: SlackApiStandIn, words: str, user: str = CAROL) -> str:
    """Run `/countersign <words>` as `user` (carol, an admin, by default); return the private reply."""
    url = slack.new_response_url(CHANNEL, user=user)
    before = len(slack.calls_to("response_url"))
    delivery = await events.slash_command("/countersign", words, user, CHANNEL, url)
    assert delivery.status == 200
    calls = await slack.wait_for("response_url", count=before + 1)
    return str(calls[-1].args.get("text", ""))
