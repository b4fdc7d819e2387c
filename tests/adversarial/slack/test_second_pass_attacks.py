"""Second-pass attacks: Slack command text (typed tokens, link tokens), tool-node re-check, expiry with a quorum."""

from __future__ import annotations

import pytest

from adapters.slack import blocks
from adapters.slack.text import plain_text
from bot.admin.commands import SetPolicy, Show
from bot.admin.parse import CommandError, parse_command
from bot.policy.conditions import compile_condition
from tests.adversarial.conftest import ModelRules
from tests.adversarial.slack_support import card_ready, slash_countersign
from tests.e2e.conftest import ALICE, BOB, CAROL, CHANNEL
from tests.e2e.slack.test_slack_flow import click, settle, wait_answer
from tests.standins.gemini import call, parts
from tests.standins.slack_api import SlackApiStandIn
from tests.support.barriers import slack_listeners_done, wait_until_async

pytestmark = pytest.mark.e2e


# --- Slack unescape: typed text becomes a "mention" ------------------------------------------


def test_typed_angle_brackets_are_not_slack_mentions_unit():
    """`<#CSECRET>` typed as text arrives as `&lt;#CSECRET&gt;`; it is not a channel Slack resolved."""
    with pytest.raises(CommandError, match="not a channel"):
        parse_command("show in &lt;#CSECRET&gt;", condition_text=plain_text)
    parsed = parse_command("show in <#CSECRET|secret>", condition_text=plain_text)
    assert isinstance(parsed, Show) and parsed.channel_id == "CSECRET"


async def test_a_non_admin_cannot_forge_a_channel_token_in_show(bot, events, slack: SlackApiStandIn):
    """Bob (not an admin) types a channel id he cannot mention (a private channel); Slack escapes it."""
    reply = await slash_countersign(events, slack, "show in &lt;#CSECRET&gt;", user=BOB)
    assert "Effective policy" not in reply and "not a channel" in reply, (
        f"a typed, Slack-escaped token was taken as a real channel mention: {reply!r}"
    )


async def test_an_admin_typed_user_token_is_not_a_real_mention(bot, events, slack: SlackApiStandIn):
    """`approvers add <@UNOBODY>` typed literally (not picked from Slack's autocomplete) must be refused."""
    reply = await slash_countersign(events, slack, "approvers add &lt;@UNOBODY&gt;")
    assert "Updated approvers" not in reply, reply
    reply = await slash_countersign(events, slack, "approvers add &lt;!subteam^SFAKE&gt;")
    assert "Updated approvers" not in reply, reply


# --- Slack conditions with links -------------------------------------------------------------


def test_a_url_in_a_condition_means_the_url_unit():
    """With should_escape on, Slack sends a typed URL as `<https://…>`; the condition must compare the URL."""
    sent = "policy http_request review when args.url.startsWith('<https://internal.example>')"
    parsed = parse_command(sent, condition_text=plain_text)
    assert isinstance(parsed, SetPolicy) and parsed.condition
    condition = compile_condition(parsed.condition, ["method", "url", "headers", "body"])
    assert condition.holds({"method": "POST", "url": "https://internal.example/admin"}), parsed.condition
    assert plain_text("args.to.endsWith('<mailto:a@corp.example|a@corp.example>') &amp;&amp; 1 &lt; 2") == (
        "args.to.endsWith('a@corp.example') && 1 < 2"
    )


async def test_a_slack_condition_on_a_url_is_not_silently_made_false(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    """Admin: review http_request when the URL starts with <target base>; Slack links the URL; a POST there must wait."""
    base = target.url("/").rstrip("/")
    reply = await slash_countersign(events, slack, f"policy http_request review when args.url.startsWith('<{base}>')")
    assert "Updated policy" in reply, reply
    model_rules.on("post it", call("http_request", {"method": "POST", "url": target.url("/x"), "body": {"a": 1}}))
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post it")
    await slack_listeners_done()
    await settle(bot)
    assert target.requests == [], "the URL condition the admin typed holds, yet the POST ran without review"


# --- tool node re-check: normal resumes -------------------------------------------------------


async def test_out_of_order_approvals_with_an_auto_call_between_run_everything(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    model_rules.on(
        "three",
        parts(
            [
                {
                    "functionCall": {
                        "name": "http_request",
                        "args": {"method": "POST", "url": target.url("/a"), "body": 1},
                    }
                },
                {"functionCall": {"name": "http_request", "args": {"method": "GET", "url": target.url("/b")}}},
                {
                    "functionCall": {
                        "name": "http_request",
                        "args": {"method": "POST", "url": target.url("/c"), "body": 3},
                    }
                },
            ]
        ),
    )
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> three")
    first, second = await card_ready(bot, slack, count=2)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, second)
    await slack_listeners_done()  # the second card's approval is recorded first
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, first)
    await wait_answer(slack, mention.ts, starts="")
    await slack_listeners_done()
    await settle(bot)
    assert sorted(r.path for r in target.requests) == ["/a", "/b", "/c"], [r.path for r in target.requests]


async def test_deny_plus_auto_runs_the_auto_call(bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules):
    assert "Updated policy" in await slash_countersign(events, slack, "policy calculator deny")
    model_rules.on(
        "both",
        parts(
            [
                {"functionCall": {"name": "calculator", "args": {"expression": "1+1"}}},
                {"functionCall": {"name": "http_request", "args": {"method": "GET", "url": target.url("/g")}}},
            ]
        ),
    )
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> both")
    await slack_listeners_done()
    await settle(bot)
    assert [r.path for r in target.requests] == ["/g"]


# --- expiry refusal must not strand a quorum review ----------------------------------------


async def test_a_quorum_review_past_its_time_still_resumes(bot, events, slack: SlackApiStandIn, target):
    assert "Updated quorum" in await slash_countersign(events, slack, "quorum http_request 2")
    assert "Updated expiry" in await slash_countersign(events, slack, "expiry 30m")
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    await click(events, slack, CAROL, blocks.ACTION_APPROVE, card)
    await slack_listeners_done()
    await settle(bot)
    assert bot.runtime is not None
    await bot.runtime.database.pool.execute("UPDATE approvals SET expires_at = now() - interval '1 second'")
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    pool = bot.runtime.database.pool

    async def no_review_pending() -> bool:
        # The expiry sweeper looks at least every 5 s; the review must leave `pending` by itself.
        return not await pool.fetchval("SELECT count(*) FROM reviews WHERE status = 'pending'")

    await wait_until_async(no_review_pending, "the review leaving pending")
    await slack_listeners_done()
    await settle(bot)
    status = await bot.runtime.database.pool.fetch("SELECT status FROM reviews")
    assert target.requests == []
    assert all(r["status"] != "pending" for r in status), status
