"""Attacks on policy and routing: duplicate call ids, policy by thread, DM cards on Discord,
Slack-escaped CEL, unreachable routing targets, expiry races, unstorable edits, long replies.

Each test states the guarantee it checks.
"""

from __future__ import annotations

import json

import pytest

from adapters.slack import blocks
from tests.adversarial.conftest import ModelRules
from tests.adversarial.slack_support import card_ready, ephemerals_to, has_buttons, posted_texts, slash_countersign
from tests.e2e import conftest as c
from tests.e2e.conftest import ALICE, CAROL, CHANNEL
from tests.e2e.discord.test_discord_flow import _buttons
from tests.e2e.drivers import DiscordDriver, SlackDriver, is_discord_card
from tests.e2e.slack.test_slack_flow import click, settle, wait_answer
from tests.standins.gemini import call, parts
from tests.standins.slack_api import SlackApiStandIn
from tests.support.barriers import slack_listeners_done, wait_until

pytestmark = pytest.mark.e2e


def _post(url: str, body: object) -> dict[str, object]:
    return {"method": "POST", "url": url, "body": body}


# --- a gated call running without approval -----------------------------------------------


async def test_a_post_sharing_its_call_id_with_a_get_does_not_skip_review(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    """Gemini may send `functionCall.id`; a POST and a GET with the same id: the POST must still wait for a card."""
    model_rules.on(
        "dup ids",
        parts(
            [
                {"functionCall": {"name": "http_request", "args": _post(target.url("/evil"), {"x": 1}), "id": "c1"}},
                {"functionCall": {"name": "http_request", "args": {"method": "GET", "url": target.url()}, "id": "c1"}},
            ]
        ),
    )
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> dup ids")
    await slack_listeners_done()
    await settle(bot)
    posts = [r for r in target.requests if r.method == "POST"]
    assert posts == [], "the POST ran without any approval"
    assert mention.ts


async def test_a_lowercase_method_does_not_slip_past_an_admin_condition(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    """`review when args.method == 'POST'`: the model sends method "post"; the tool sends a POST, so it must be reviewed."""
    reply = await slash_countersign(events, slack, "policy http_request review when args.method == 'POST'")
    assert "Updated policy" in reply, reply
    model_rules.on("sneak", call("http_request", {"method": "post", "url": target.url("/evil"), "body": {"x": 1}}))
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> sneak")
    await slack_listeners_done()
    await settle(bot)
    assert [r.method for r in target.requests] == [], "a POST ran without review"


# --- policy by thread (Discord) ------------------------------------------------------------


async def test_a_discord_policy_set_on_a_thread_applies_in_that_thread(discord_bot, discord_api, target):
    """`policy http_request deny channel:<thread>`: `show` says deny there, so a call in the thread must be denied."""
    driver = DiscordDriver(discord_bot, discord_api)
    reply = await driver.command("carol", "policy", tool="http_request", mode="deny", channel=str(c.D_THREAD))
    assert "Updated policy" in reply, reply
    shown = await driver.command("carol", "show", channel=str(c.D_THREAD))
    assert "`http_request`: deny" in shown, shown
    await discord_api.send_message(
        c.D_THREAD, c.D_ALICE, f"<@{c.D_BOT}> post widget", mentions=[c.D_BOT], guild_id=c.D_GUILD
    )
    await discord_api.wait_for_request("POST", rf"/channels/{c.D_THREAD}/messages$")  # a card or the answer
    await driver.settle()
    cards = discord_api.requests_to("POST", r"/channels/\d+/messages$")
    with_buttons = [r for r in cards if is_discord_card(r)]
    assert with_buttons == [], "a tool denied in this thread got an approval card instead"


# --- card routing --------------------------------------------------------------------------


async def test_discord_cards_sent_to_an_approvers_dms_can_be_decided_there(discord_bot, discord_api, target):
    """`approvers add carol` + `cards dm`: the card goes to Carol's DMs and her Approve there must work."""
    driver = DiscordDriver(discord_bot, discord_api)
    assert "Updated approvers" in await driver.command("carol", "approvers", action="add", user="carol")
    assert "Updated cards" in await driver.command("carol", "cards", where="dm")
    await driver.ask("alice", "post widget")
    [card] = await driver.cards()
    assert card.channel != str(c.D_CHANNEL)  # a DM channel
    custom_id = next(i for i in _buttons(discord_api.message(card.message)) if i.startswith("cs:approve:"))
    interaction = await discord_api.click_button(card.message, custom_id, c.D_CAROL, channel_id=int(card.channel))
    await discord_api.wait_for_request("POST", rf"/interactions/{interaction.id}/[^/]+/callback")
    await wait_until(lambda: bool(target.requests or discord_api.followups(interaction.id)), "the approval's outcome")
    await driver.settle()
    followups = [f["content"] for f in discord_api.followups(interaction.id)]
    assert len(target.requests) == 1, f"Carol's approval in her DMs was refused: {followups}"


async def test_slack_cards_routed_to_a_channel_the_bot_cannot_post_in_leave_a_way_out(
    bot, events, slack: SlackApiStandIn, target
):
    """`cards channel #nowhere` is accepted; then a gated call must not leave the thread stuck with no card anywhere."""
    slack.forbid_channel("CNOWHERE")  # the bot is not in it (Slack answers channel_not_found)
    reply = await slash_countersign(events, slack, "cards channel <#CNOWHERE|nowhere>")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    await slack_listeners_done()
    await settle(bot)
    await events.message(CHANNEL, ALICE, "where is my card?", thread_ts=mention.ts)
    await slack_listeners_done()
    await settle(bot)
    cards = [
        call
        for call in slack.calls_to("chat.postMessage")
        if any(b.get("type") == "actions" for b in call.args.get("blocks") or [])
    ]
    posted = [call for call in cards if call.error is None]
    told = posted_texts(slack, mention.ts) + ephemerals_to(slack, ALICE)
    assert posted or "Updated cards" not in reply, (
        f"the command was accepted ({reply!r}), yet no card was posted anywhere; the thread heard: {told}"
    )


# --- admin command input -------------------------------------------------------------------


async def test_a_slack_condition_with_and_and_comparison_operators_is_accepted(bot, events, slack: SlackApiStandIn):
    """Slack escapes &, < and > in slash-command text; `&&` and `>` in a condition must still work."""
    escaped = "policy http_request review when args.method != 'GET' &amp;&amp; size(args.url) &gt; 0"
    reply = await slash_countersign(events, slack, escaped)
    assert "Updated policy" in reply, reply


@pytest.mark.parametrize("number", ["²", "①", "⁵"])
async def test_unicode_digit_look_alikes_get_a_clear_refusal(bot, events, slack: SlackApiStandIn, number):
    """`quorum http_request ²` is bad input: the admin must read why, not 'something went wrong'."""
    reply = await slash_countersign(events, slack, f"quorum http_request {number}")
    assert "Something went wrong" not in reply, reply
    assert "quorum" in reply.lower(), reply
    audit = await slash_countersign(events, slack, f"audit limit {number}")
    assert "Something went wrong" not in audit, audit


# --- stuck threads -------------------------------------------------------------------------


async def test_two_calls_sharing_an_id_do_not_jam_the_conversation(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    """Two ungated GETs with the same `functionCall.id`; afterwards the thread must still answer."""
    get = {"method": "GET", "url": target.url()}
    model_rules.on(
        "two gets",
        parts(
            [
                {"functionCall": {"name": "http_request", "args": get, "id": "same"}},
                {"functionCall": {"name": "http_request", "args": {**get, "url": target.url("/b")}, "id": "same"}},
            ]
        ),
    )
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> two gets")
    await slack_listeners_done()
    await settle(bot)
    await events.message(CHANNEL, ALICE, "still there?", thread_ts=mention.ts)
    await slack_listeners_done()
    await settle(bot)
    texts = posted_texts(slack, mention.ts)
    assert any(t.startswith("You said: still there?") for t in texts), texts


@pytest.mark.parametrize("where", ["arguments", "description"])
async def test_a_lone_surrogate_from_the_model_does_not_jam_the_thread(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules, where
):
    """A gated call whose arguments (or reasoning) hold an unpaired surrogate (JSON "\\ud800"): later messages are answered."""
    args = _post(target.url(), {"note": "a\ud800b" if where == "arguments" else "fine"})
    reasoning = "Posting \ud800 now." if where == "description" else "Posting now."
    model_rules.on("post lone", parts([{"text": reasoning}, {"functionCall": {"name": "http_request", "args": args}}]))
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post lone")
    await slack_listeners_done()
    await settle(bot)
    await events.message(CHANNEL, ALICE, "hello?", thread_ts=mention.ts)
    await slack_listeners_done()
    await settle(bot)
    heard = posted_texts(slack, mention.ts) + ephemerals_to(slack, ALICE)
    assert target.requests == []
    assert any("You said: hello?" in t or "waiting for approval" in t for t in heard), heard


@pytest.mark.parametrize(
    "raw",
    [
        '{"method": "POST", "url": "URL", "body": {"x": NaN}}',
        '{"method": "POST", "url": "URL", "body": {"x": Infinity}}',
        '{"method": "POST", "url": "URL", "body": {"x": "\\ud800"}}',
    ],
    ids=["nan", "infinity", "lone-surrogate"],
)
async def test_an_edit_the_database_cannot_store_is_refused_clearly_in_the_form(
    bot, events, slack: SlackApiStandIn, target, raw
):
    """NaN, Infinity or a lone surrogate in an edit: a clear error in the form (not 'went wrong'), card still usable."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    reply = await events.view_submission(
        ALICE,
        blocks.VIEW_EDIT,
        card.approval_id,
        {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: raw.replace("URL", target.url())}},
    )
    await slack_listeners_done()
    await settle(bot)
    assert target.requests == [] and has_buttons(slack, card)
    assert reply.json and reply.json["response_action"] == "errors", reply.json
    problem = reply.json["errors"][blocks.EDIT_BLOCK]
    assert "went wrong" not in problem.lower() and "could not" not in problem.lower(), problem
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert len(target.requests) == 1


# --- policy bypass through Discord DMs -----------------------------------------------------


async def test_a_long_audit_log_still_answers_the_admin(bot, events, slack: SlackApiStandIn, target, model_rules):
    """`audit limit 100` with many refused clicks on a card full of `&`: the admin still gets an answer."""
    model_rules.on("post amps", call("http_request", _post(target.url(), {"q": "&" * 400})))
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post amps")
    [card] = await card_ready(bot, slack)
    for _ in range(60):
        await click(events, slack, c.BOB, blocks.ACTION_APPROVE, card)
    await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == c.BOB, count=60)
    await settle(bot)
    url = slack.new_response_url(CHANNEL, user=CAROL)
    await events.slash_command("/countersign", "audit limit 100", CAROL, CHANNEL, url)
    answers = await slack.wait_for("response_url")
    assert answers[-1].error is None, f"the audit reply was refused by Slack: {answers[-1].error}"


# --- policy changes while a card waits -----------------------------------------------------


async def test_a_deny_set_while_a_card_waits_also_stops_the_ungated_call_beside_it(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    """GET + POST in one turn; the admin then denies http_request; the POST is approved: nothing may be sent."""
    model_rules.on(
        "get and post",
        parts(
            [
                {"functionCall": {"name": "http_request", "args": {"method": "GET", "url": target.url("/first")}}},
                {"functionCall": {"name": "http_request", "args": _post(target.url("/second"), {"n": 2})}},
            ]
        ),
    )
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> get and post")
    [card] = await card_ready(bot, slack)
    assert "Updated policy" in await slash_countersign(events, slack, "policy http_request deny")
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert [(r.method, r.path) for r in target.requests] == [], "a tool denied by policy was still called"


async def test_a_condition_that_is_not_a_boolean_is_refused_at_save(bot, events, slack: SlackApiStandIn):
    """`when args.url` or `when 1 + 1` can never decide anything; it must be refused when saved, like a syntax error."""
    for condition in ("args.url", "1 + 1", "'yes'"):
        reply = await slash_countersign(events, slack, f"policy http_request review when {condition}")
        assert "Updated policy" not in reply, (condition, reply)


# --- lost messages -------------------------------------------------------------------------


@pytest.mark.parametrize("subtype", ["thread_broadcast", "file_share"])
async def test_a_thread_reply_sent_to_the_channel_too_or_with_a_file_is_not_dropped(
    bot, events, slack: SlackApiStandIn, subtype
):
    """A person's reply in the bot's thread with "Also send to channel" (or a file attached) is still a message to answer."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
    await wait_answer(slack, mention.ts, starts="You said: hello")
    await settle(bot)
    await events.message(CHANNEL, ALICE, "and one more thing", thread_ts=mention.ts, subtype=subtype)
    await slack_listeners_done()
    await settle(bot)
    heard = posted_texts(slack, mention.ts) + ephemerals_to(slack, ALICE)
    assert any("one more thing" in t for t in heard), f"Alice's reply was silently dropped: {heard}"


# --- expiry --------------------------------------------------------------------------------


async def test_an_approval_after_the_expiry_time_is_refused_even_before_the_sweeper_runs(
    bot, events, slack: SlackApiStandIn, target
):
    """The card's time is up (expires_at in the past); a click landing before the sweeper's next pass must not approve it."""
    assert "Updated expiry" in await slash_countersign(events, slack, "expiry 30m")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    assert bot.runtime is not None
    await bot.runtime.database.pool.execute("UPDATE approvals SET expires_at = now() - interval '1 second'")
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert target.requests == [], "an expired card was approved and the request sent"


async def test_a_slack_condition_with_an_ampersand_means_what_the_admin_typed(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    """The admin types `when args.url.contains('&')` (Slack delivers `&amp;`); a POST with a query string must be reviewed."""
    reply = await slash_countersign(events, slack, "policy http_request review when args.url.contains('&amp;')")
    assert "Updated policy" in reply, reply
    model_rules.on("post query", call("http_request", _post(target.url("/things?a=1&b=2"), {"x": 1})))
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post query")
    await slack_listeners_done()
    await settle(bot)
    assert target.requests == [], "the condition the admin typed held, yet the call ran without review"


async def test_slack_cards_sent_to_an_approvers_dms_can_be_decided_there(bot, events, slack: SlackApiStandIn, target):
    """The Slack counterpart of the Discord DM test (holds): Carol approves in her DM with the app."""
    driver = SlackDriver(bot, events, slack)
    assert "Updated approvers" in await driver.command("carol", "approvers", action="add", user="carol")
    assert "Updated cards" in await driver.command("carol", "cards", where="dm")
    await driver.ask("alice", "post widget")
    [post] = await slack.wait_for(
        "chat.postMessage", lambda a: any(b.get("type") == "actions" for b in a.get("blocks") or [])
    )
    await settle(bot)
    dm = f"D{CAROL}"
    [message] = [m for m in slack.messages(dm) if m.get("blocks")]
    approval_id = next(b for b in message["blocks"] if b["type"] == "actions")["elements"][0]["value"]
    await events.block_actions(CAROL, dm, message["ts"], blocks.ACTION_APPROVE, approval_id, slack.new_trigger_id())
    await wait_answer(slack, driver._thread)
    await settle(bot)
    assert len(target.requests) == 1 and post.args["channel"] == CAROL


async def test_a_discord_edit_refused_with_a_long_reason_still_tells_the_editor(discord_bot, discord_api, target):
    """An edit whose schema error quotes a 1,900-character value: the editor must still get the refusal and Edit again."""
    from tests.e2e.discord.test_discord_flow import click as d_click
    from tests.e2e.discord.test_discord_flow import mention, wait_callback
    from tests.e2e.discord.test_discord_flow import settle as d_settle
    from tests.e2e.discord.test_discord_flow import wait_card as d_wait_card

    await mention(discord_api, c.D_ALICE, "post widget")
    [card] = await d_wait_card(discord_api)
    await d_settle(discord_bot)
    await d_click(discord_api, card, c.D_ALICE, "edit")
    raw = json.dumps({"method": "POST", "url": target.url(), "body": [["x" * 1900]]})
    submitted = await discord_api.submit_modal(f"cs:edit-modal:{card.approval_id}", c.D_ALICE, {"args": raw})
    await wait_callback(discord_api, submitted)

    def told() -> list[dict[str, object]]:
        answered = [c.json for c in discord_api.callbacks(submitted.id) if c.status < 300 and c.json["type"] == 4]
        return answered + discord_api.followups(submitted.id)

    await wait_until(lambda: bool(told()), "the editor being told")
    await d_settle(discord_bot)
    assert target.requests == [] and _buttons(discord_api.message(card.message_id))
    assert told(), "the editor was told nothing: the refusal was too long for Discord and was dropped"


async def test_a_condition_that_fails_at_run_time_requires_review(bot, events, slack: SlackApiStandIn, target):
    """Holds: `args.headers['x-env'] == 'prod'` on a call without headers errors at run time, so the POST gets a card."""
    reply = await slash_countersign(events, slack, "policy http_request review when args.headers['x-env'] == 'prod'")
    assert "Updated policy" in reply, reply
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    assert card.approval_id and target.requests == []


async def test_a_deny_set_while_a_dm_card_waits_wins_over_the_approval(discord_bot, discord_api, target):
    """Bob's DM card waits; the server's admin denies http_request; Bob approves: nothing is sent, the card says denied."""
    driver = DiscordDriver(discord_bot, discord_api)
    dm = await discord_api.send_dm(c.D_BOB, "post widget")
    channel = int(dm["channel_id"])
    [card] = await driver.cards()
    assert card.channel == str(channel)
    assert "Updated policy" in await driver.command("carol", "policy", tool="http_request", mode="deny")
    await driver.approve(card, "bob")
    answer = await discord_api.wait_for_request(
        "POST", rf"/channels/{channel}/messages$", lambda r: str((r.json or {}).get("content", "")).startswith("Result")
    )
    await driver.settle()
    assert target.requests == []
    assert "denied by policy" in answer[-1].json["content"]
    assert "Rejected" in driver.card_text(card) and "denied by policy" in driver.card_text(card)


async def test_a_server_wide_deny_is_not_bypassed_by_dming_the_bot(discord_bot, discord_api, target):
    """The server's admin denies http_request; Bob DMs the bot: no card, nothing sent, the model hears it is denied."""
    driver = DiscordDriver(discord_bot, discord_api)
    assert "Updated policy" in await driver.command("carol", "policy", tool="http_request", mode="deny")
    dm = await discord_api.send_dm(c.D_BOB, "post widget")
    channel = int(dm["channel_id"])
    answer = await discord_api.wait_for_request(
        "POST", rf"/channels/{channel}/messages$", lambda r: str((r.json or {}).get("content", "")).startswith("Result")
    )
    await driver.settle()
    cards = [r for r in discord_api.requests_to("POST", rf"/channels/{channel}/messages$") if is_discord_card(r)]
    assert cards == [] and target.requests == []
    assert "Rejected by policy" in answer[-1].json["content"]
