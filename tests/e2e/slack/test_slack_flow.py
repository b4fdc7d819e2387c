"""The whole Slack flow through the real Bolt app, with Slack, Gemini and HTTP stand-ins."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from adapters.slack import blocks
from bot.settings import DatabaseSettings
from countersign.server import BotServer
from tests.e2e.agent_script import LONG_ANSWER
from tests.e2e.conftest import ALICE, BOB, CAROL, CHANNEL, SIGNING_SECRET, TEAM, make_settings
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.barriers import GENEROUS_S, slack_listeners_done
from tests.support.postgres import inbox_refusing_claims, own_embedded, start_embedded_again, stop_embedded

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Card:
    channel: str
    ts: str
    thread_ts: str
    approval_id: str
    blocks: list[dict[str, Any]]


def _actions(message_blocks: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [b for b in message_blocks or [] if b.get("type") == "actions"]


async def wait_card(slack: SlackApiStandIn, *, count: int = 1) -> list[Card]:
    """Wait for `count` cards (messages with our buttons) and return them in order."""
    posts = await slack.wait_for("chat.postMessage", lambda a: bool(_actions(a.get("blocks"))), count=count)
    cards = []
    for message in slack.messages(CHANNEL):
        if _actions(message.get("blocks")):
            approve = _actions(message["blocks"])[0]["elements"][0]
            cards.append(
                Card(
                    CHANNEL,
                    message["ts"],
                    message.get("thread_ts"),
                    approve["value"],
                    message["blocks"],
                )
            )
    assert len(cards) >= count, posts
    return cards


async def wait_answer(slack: SlackApiStandIn, thread_ts: str, starts: str = "Result: ", count: int = 1) -> list[str]:
    calls = await slack.wait_for(
        "chat.postMessage",
        lambda a: a.get("thread_ts") == thread_ts and str(a.get("text", "")).startswith(starts),
        count=count,
    )
    return [c.args["text"] for c in calls]


def card_state(slack: SlackApiStandIn, card: Card) -> dict[str, Any]:
    return slack.message(card.channel, card.ts)


async def click(events: SlackEventSender, slack: SlackApiStandIn, user: str, action_id: str, card: Card):
    return await events.block_actions(
        user,
        card.channel,
        card.ts,
        action_id,
        card.approval_id,
        slack.new_trigger_id(),
        thread_ts=card.thread_ts,
    )


async def settle(bot: BotServer) -> None:
    assert bot.runtime is not None
    await bot.runtime.service.tasks.join()


async def test_approve_runs_the_request_once_and_posts_the_answer(bot, events, slack, target, gemini):
    """Mention -> card in the thread -> requester approves -> one request with the proposed args -> answer."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    assert mention.status == 200
    [card] = await wait_card(slack)
    assert card.thread_ts == mention.ts  # the bot answers in a thread under the mention
    text = json.dumps(card.blocks)
    assert "http_request" in text and "widget" in text and f"<@{ALICE}>" in text
    assert target.requests == []

    delivery = await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    assert delivery.status == 200
    [answer] = await wait_answer(slack, mention.ts)
    assert '"ok": true' in answer or "&quot;ok&quot;" in answer or "ok" in answer
    await settle(bot)
    assert [(r.method, r.json) for r in target.requests] == [("POST", {"name": "widget"})]
    updated = card_state(slack, card)
    assert _actions(updated["blocks"]) == []
    assert "Approved" in json.dumps(updated["blocks"]) and f"<@{ALICE}>" in json.dumps(updated["blocks"][-1])
    # progress: an hourglass on the mention while the agent worked, removed afterwards
    assert slack.calls_to("reactions.add")
    await slack.wait_for("reactions.remove", timeout=GENEROUS_S)


async def test_edit_uses_the_edited_args(bot, events, slack, target):
    """Edit opens a modal prefilled with the JSON; the submitted args are what runs."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_EDIT, card)
    [opened] = await slack.wait_for("views.open")
    view = opened.args["view"]
    prefill = view["blocks"][1]["element"]["initial_value"]
    assert json.loads(prefill)["body"] == {"name": "widget"}
    edited = json.loads(prefill) | {"body": {"name": "gadget"}}
    reply = await events.view_submission(
        ALICE,
        blocks.VIEW_EDIT,
        view["private_metadata"],
        {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: json.dumps(edited)}},
    )
    assert reply.status == 200 and not reply.body  # an empty ack closes the modal
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert [r.json for r in target.requests] == [{"name": "gadget"}]
    shown = json.dumps(card_state(slack, card)["blocks"])
    assert "Approved with edits" in shown and "gadget" in shown


async def test_reject_with_reason_sends_nothing_and_the_model_sees_the_reason(bot, events, slack, target, gemini):
    """Reject with a reason: no request; the model's next call carries the reason."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_REJECT, card)
    [opened] = await slack.wait_for("views.open")
    reply = await events.view_submission(
        ALICE,
        blocks.VIEW_REJECT,
        opened.args["view"]["private_metadata"],
        {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "we are in a change freeze"}},
    )
    assert reply.status == 200
    [answer] = await wait_answer(slack, mention.ts)
    assert "change freeze" in answer
    await settle(bot)
    assert target.requests == []
    assert any("change freeze" in json.dumps(r.function_responses) for r in gemini.requests)
    shown = json.dumps(card_state(slack, card)["blocks"])
    assert "Rejected" in shown and "change freeze" in shown


async def test_a_clicker_who_is_not_permitted_is_refused_and_nothing_changes(bot, events, slack, target):
    """Bob (not the requester, not an admin) gets an ephemeral refusal; the card still works for Alice."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, BOB, blocks.ACTION_APPROVE, card)
    [refusal] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == BOB)
    assert "can't decide" in refusal.args["text"]
    await settle(bot)
    assert target.requests == []
    assert _actions(card_state(slack, card)["blocks"])  # buttons still there
    await click(events, slack, BOB, blocks.ACTION_EDIT, card)
    await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == BOB, count=2)
    assert slack.calls_to("views.open") == []
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert len(target.requests) == 1


async def test_an_admin_may_decide_someone_elses_call(bot, events, slack, target):
    """Carol, a workspace admin (users.info), may approve Alice's call."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, CAROL, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert f"<@{CAROL}>" in json.dumps(card_state(slack, card)["blocks"][-1])


EXTERNAL = "UEXT"
"""A Slack Connect user from another organisation (home workspace T9), an admin there."""


def _slack_connect_admin(events: SlackEventSender, slack: SlackApiStandIn) -> None:
    slack.add_user(EXTERNAL, "ext", is_admin=True, is_owner=True, team_id="T9")
    events.home_teams[EXTERNAL] = "T9"


async def _command(events: SlackEventSender, slack: SlackApiStandIn, user: str, text: str) -> str:
    url = slack.new_response_url(CHANNEL, user=user)
    before = len(slack.calls_to("response_url"))
    assert (await events.slash_command("/countersign", text, user, CHANNEL, url)).status == 200
    calls = await slack.wait_for("response_url", count=before + 1)
    return str(calls[-1].args.get("text", ""))


async def test_a_slack_connect_admin_of_another_organisation_may_not_decide_a_card(bot, events, slack, target):
    """An admin and owner of their own organisation clicks Approve in a shared channel: refused privately, nothing runs."""
    _slack_connect_admin(events, slack)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, EXTERNAL, blocks.ACTION_APPROVE, card)
    [refusal] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == EXTERNAL)
    assert "can't decide" in refusal.args["text"]
    await settle(bot)
    assert target.requests == [] and _actions(card_state(slack, card)["blocks"])
    await click(events, slack, CAROL, blocks.ACTION_APPROVE, card)  # this workspace's admin still may
    await wait_answer(slack, mention.ts)
    assert len(target.requests) == 1


async def test_a_slack_connect_admin_of_another_organisation_may_not_run_admin_commands(bot, events, slack):
    """`/countersign policy` from an admin of another organisation is refused, and the policy stays as it was."""
    _slack_connect_admin(events, slack)
    refused = await _command(events, slack, EXTERNAL, "policy http_request auto")
    assert "admin" in refused and "Updated" not in refused, refused
    assert bot.runtime is not None
    rules = await bot.runtime.database.pool.fetchval("SELECT count(*) FROM tool_policies")
    assert rules == 0


async def test_a_slack_connect_user_listed_by_id_may_still_approve(bot, events, slack, target):
    """An admin of this workspace lists the outside user as an approver by id: their click then counts."""
    _slack_connect_admin(events, slack)
    assert "Updated" in await _command(events, slack, CAROL, f"approvers add <@{EXTERNAL}> for http_request")
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, EXTERNAL, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert f"<@{EXTERNAL}>" in json.dumps(card_state(slack, card)["blocks"][-1])


async def test_double_click_and_two_approvers_decide_once(bot, events, slack, target):
    """Three concurrent approvals (a double click and a second approver): one decision, the others told who decided."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    deliveries = await asyncio.gather(
        click(events, slack, ALICE, blocks.ACTION_APPROVE, card),
        click(events, slack, ALICE, blocks.ACTION_APPROVE, card),
        click(events, slack, CAROL, blocks.ACTION_APPROVE, card),
    )
    assert all(d.status == 200 for d in deliveries)
    await wait_answer(slack, mention.ts)
    told = await slack.wait_for("chat.postEphemeral", lambda a: "already approved" in a.get("text", ""), count=2)
    await settle(bot)
    assert len(target.requests) == 1
    assert len(told) == 2
    decider = card_state(slack, card)["blocks"][-1]["elements"][0]["text"]
    assert all(f"by <@{decider.split('<@')[1].split('>')[0]}>" in t.args["text"] for t in told)
    assert len(await wait_answer(slack, mention.ts)) == 1


async def test_a_new_message_while_pending_is_refused_with_a_link(bot, events, slack, gemini):
    """A reply in the thread while the card waits is not given to the agent; the sender gets the card's link."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    before = len(gemini.requests)
    await events.message(CHANNEL, BOB, "hello? any news", thread_ts=mention.ts)
    [notice] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == BOB)
    permalink = f"https://standin.slack.com/archives/{CHANNEL}/p{card.ts.replace('.', '')}"
    assert "waiting for approval" in notice.args["text"] and permalink in notice.args["text"]
    await settle(bot)
    assert len(gemini.requests) == before


async def test_the_click_still_works_after_a_restart(settings, db_url, gemini, slack, target):
    """The bot stops between the card and the click; a new bot process state serves the click."""
    async with (
        BotServer(settings) as first,
        SlackEventSender(f"http://127.0.0.1:{first.port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events,
    ):
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        [card] = await wait_card(slack)
    async with (
        BotServer(settings) as second,
        SlackEventSender(f"http://127.0.0.1:{second.port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events,
    ):
        await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
        await wait_answer(slack, mention.ts)
        await settle(second)
    assert len(target.requests) == 1


async def test_invalid_json_in_the_edit_modal_is_shown_and_the_card_stays_usable(bot, events, slack, target):
    """Broken JSON, a non-object and a schema error are shown in the modal; approving afterwards still works."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    await click(events, slack, ALICE, blocks.ACTION_EDIT, card)
    [opened] = await slack.wait_for("views.open")
    approval_id = opened.args["view"]["private_metadata"]

    async def submit(raw: str):
        return await events.view_submission(
            ALICE, blocks.VIEW_EDIT, approval_id, {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: raw}}
        )

    for raw, expected in [
        ('{"method": "POST", ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"method": "POST"}', "url"),
        ('{"method": "POST", "url": "x", "colour": "red"}', "no argument 'colour'"),
    ]:
        reply = await submit(raw)
        assert reply.status == 200
        assert reply.json["response_action"] == "errors", raw
        assert expected in reply.json["errors"][blocks.EDIT_BLOCK], (raw, reply.json)
    await settle(bot)
    assert target.requests == []
    assert _actions(card_state(slack, card)["blocks"])
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert len(target.requests) == 1


async def test_unsigned_and_stale_requests_are_rejected(bot, events, slack, gemini):
    """A wrong signature or an old timestamp gets 401 and the agent never runs."""
    bad = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget", bad_signature=True)
    stale = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget", stale=True)
    assert (bad.status, stale.status) == (401, 401)
    await slack_listeners_done()
    await settle(bot)
    assert gemini.requests == []
    assert slack.calls_to("chat.postMessage") == []


async def test_ungated_calls_run_without_a_card(bot, events, slack, target):
    """A GET needs no review by default: it runs and the answer is posted, no card."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> get")
    await wait_answer(slack, mention.ts)
    assert [r.method for r in target.requests] == ["GET"]
    assert not any(_actions(m.get("blocks")) for m in slack.messages(CHANNEL))


async def test_replies_in_a_known_thread_continue_the_conversation(bot, events, slack, gemini):
    """A plain reply in the bot's thread reaches the agent with the history; channel chatter does not."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello there")
    await wait_answer(slack, mention.ts, starts="You said: hello there")
    await events.message(CHANNEL, ALICE, "second message", thread_ts=mention.ts)
    await wait_answer(slack, mention.ts, starts="You said: second message")
    await events.message(CHANNEL, ALICE, "unrelated chatter")
    await events.message(CHANNEL, ALICE, "other thread", thread_ts="1700000000.000001")
    await settle(bot)
    last = gemini.requests[-1]
    assert "hello there" in json.dumps(last.contents)  # the thread's history came along
    assert all("chatter" not in json.dumps(r.contents) for r in gemini.requests)
    assert all("other thread" not in json.dumps(r.contents) for r in gemini.requests)


async def test_own_messages_bots_and_edits_are_ignored(bot, events, slack, gemini):
    """The bot ignores itself, other bots, edits and deletions, even in its own thread."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
    await wait_answer(slack, mention.ts, starts="You said: hello")
    count = len(gemini.requests)
    await events.message(CHANNEL, "UBOT", "my own words", thread_ts=mention.ts)
    await events.message(CHANNEL, "UOTHER", "beep", thread_ts=mention.ts, bot_id="B123")
    await events.message(CHANNEL, ALICE, "edited", ts=mention.ts, thread_ts=mention.ts, subtype="message_changed")
    await events.message(CHANNEL, ALICE, "", ts=mention.ts, thread_ts=mention.ts, subtype="message_deleted")
    await slack_listeners_done()
    await settle(bot)
    assert len(gemini.requests) == count


async def test_retried_event_is_handled_once(bot, events, slack, gemini):
    """Slack's retry of the same event (same event_id and ts) does not run the agent twice."""
    first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello once")
    again = await events.retry(first)
    assert again.status == 200
    await wait_answer(slack, first.ts, starts="You said: hello once")
    await settle(bot)
    assert len(gemini.requests) == 1


async def test_dm_conversation(bot, events, slack):
    """A DM is its own conversation; the bot answers in the DM without a thread."""
    await events.message("D1", ALICE, "hi in private", channel_type="im")
    [post] = await slack.wait_for("chat.postMessage", lambda a: a.get("channel") == "D1")
    assert post.args["text"] == "You said: hi in private"
    assert post.args.get("thread_ts") is None


async def test_a_slack_dm_follows_its_workspaces_rules(bot, events, slack, target):
    """A Slack DM belongs to its workspace: with quorum 2 and self-approval off there, alice cannot approve her DM card alone."""
    for text in ("quorum http_request 2", "self-approval off"):
        assert "Updated" in await _command(events, slack, CAROL, text)
    await events.message("D1", ALICE, "post widget", channel_type="im")
    [post] = await slack.wait_for("chat.postMessage", lambda a: a.get("channel") == "D1" and _actions(a.get("blocks")))
    approve = _actions(post.args["blocks"])[0]["elements"][0]
    [message] = [m for m in slack.messages("D1") if _actions(m.get("blocks"))]
    card = Card("D1", message["ts"], message.get("thread_ts"), approve["value"], message["blocks"])
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    [refusal] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == ALICE)
    assert "self-approval is off" in refusal.args["text"]
    await settle(bot)
    assert target.requests == []


async def test_a_tally_of_names_that_escaping_grows_still_redraws_the_card(bot, events, slack, target):
    """Nine admins named with 80 `&` each approve a quorum-10 card: Slack accepts every redraw, the last says 9 of 10."""
    voters = [f"UAMP{i}" for i in range(9)]
    for i, user in enumerate(voters):
        slack.add_user(user, f"{i}" + "&" * 79, is_admin=True)
    assert "Updated" in await _command(events, slack, CAROL, "quorum http_request 10")
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await wait_card(slack)
    for count, user in enumerate(voters, start=1):
        await click(events, slack, user, blocks.ACTION_APPROVE, card)
        await slack.wait_for("chat.postEphemeral", lambda a, user=user: a.get("user") == user)
        await slack.wait_for("chat.update", lambda a, n=count: a.get("ts") == card.ts and f"{n} of 10" in json.dumps(a))
    await settle(bot)
    updates = [call for call in slack.calls_to("chat.update") if call.args.get("ts") == card.ts]
    assert [call.error for call in updates if call.error] == []
    assert "*Approvals:* 9 of 10 (0&amp;&amp;" in json.dumps(card_state(slack, card)["blocks"])
    assert target.requests == []


async def test_agent_text_cannot_broadcast_and_long_answers_are_split(bot, events, slack):
    """Mentions and links in agent text are escaped; a 5,000-character answer arrives in pieces."""
    shout = await events.app_mention(CHANNEL, ALICE, "<@UBOT> shout")
    [text] = await wait_answer(slack, shout.ts, starts="")
    assert "<!channel>" not in text and "<!here>" not in text and "<@U999>" not in text
    assert "&lt;!channel&gt;" in text and "&amp;" in text
    long = await events.app_mention(CHANNEL, ALICE, "<@UBOT> long")
    await slack_listeners_done()
    await settle(bot)
    pieces = [c.args["text"] for c in slack.calls_to("chat.postMessage") if c.args.get("thread_ts") == long.ts]
    assert len(pieces) >= 2
    assert all(len(p) <= 4000 for p in pieces)
    assert " ".join(pieces).split() == LONG_ANSWER.split()


async def test_model_failure_is_reported_and_the_thread_stays_usable(bot, events, slack, gemini):
    """When Gemini keeps failing, the user reads a clear message; the next message works."""
    gemini.fail_next(3, status=503)
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
    [notice] = await wait_answer(slack, mention.ts, starts="The model is not answering")
    assert "Traceback" not in notice
    await events.message(CHANNEL, ALICE, "again please", thread_ts=mention.ts)
    await wait_answer(slack, mention.ts, starts="You said: again please")


async def test_healthz(bot):
    """GET /healthz answers 200 while the database is reachable."""
    import httpx

    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{bot.port}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_gemini_receives_full_json_schemas_and_the_system_prompt(bot, events, slack, gemini):
    """Tools are declared with parametersJsonSchema: headers an object of strings, body any JSON value."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
    await wait_answer(slack, mention.ts, starts="You said: hello")
    request = gemini.requests[0]
    declaration = request.function_declaration("http_request")
    # proto3 JSON takes either spelling; the SDK sends the proto field name for this one.
    schema = declaration.get("parametersJsonSchema") or declaration["parameters_json_schema"]
    assert "parameters" not in declaration
    assert schema["required"] == ["method", "url"]
    headers = schema["properties"]["headers"]["anyOf"]
    assert {"type": "object", "additionalProperties": {"type": "string"}} in headers
    assert schema["properties"]["body"].get("type") != "string"
    assert "Countersign" in (request.system_instruction or "")
    assert {"calculator", "current_time", "http_request"} <= set(request.declared_function_names)


async def test_a_rate_limit_is_retried_within_bounds(bot, events, slack, gemini):
    """One 429 from Gemini is retried and the user gets the answer; endless 429s give a clear notice."""
    gemini.fail_next(1, status=429)
    first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
    await wait_answer(slack, first.ts, starts="You said: hello")
    gemini.fail_next(10, status=429)
    second = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello again")
    [notice] = await wait_answer(slack, second.ts, starts="The model is busy")
    await settle(bot)
    assert len([r for r in gemini.requests if r.status_code == 429]) == 1 + 3  # bounded: 3 attempts
    assert "rate limited" in notice


async def test_a_message_the_database_cannot_take_is_not_acknowledged_and_its_retry_is_answered(
    bot, events, slack, db_url
):
    """The inbox claim fails before the acknowledgement: Slack gets a 500 and delivers again; the retry is answered once."""
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute("ALTER TABLE inbox RENAME TO inbox_away")
        first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
        await connection.execute("ALTER TABLE inbox_away RENAME TO inbox")
    finally:
        await connection.close()
    assert first.status == 500
    retried = await events.retry(first)
    assert retried.status == 200
    [answer] = await wait_answer(slack, first.ts, starts="You said")
    await settle(bot)
    assert answer == "You said: hello"
    assert [c.args["text"] for c in slack.calls_to("chat.postMessage")] == ["You said: hello"]


def _ephemerals(slack: SlackApiStandIn) -> list[dict[str, Any]]:
    return [c.args for c in slack.calls_to("chat.postEphemeral")]


def _not_taken(slack: SlackApiStandIn) -> list[dict[str, Any]]:
    """The ephemeral notices saying a message could not be taken (`MESSAGE_FAILED`)."""
    return [a for a in _ephemerals(slack) if "could not answer your message" in a["text"]]


async def test_slack_s_last_retry_of_a_message_the_database_cannot_take_tells_its_sender_once(
    tmp_path, gemini, slack, target
):
    """The database is down: the first delivery and retries 1 and 2 get a 500 and nobody is told; the last
    retry (3) gets a 500 too, and its sender one ephemeral notice, where they wrote, quoting the message."""
    async with own_embedded(tmp_path / "own") as (embedded, url):
        settings = make_settings(url, gemini, slack, target).model_copy(
            update={"database": DatabaseSettings(url=url, pool_max_size=4, connect_timeout_s=2)}
        )
        async with (
            BotServer(settings) as bot,
            SlackEventSender(f"http://127.0.0.1:{bot.port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events,
        ):
            await stop_embedded(embedded)
            first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> deploy the release")
            assert first.status == 500
            for retry_num in (1, 2):
                assert (await events.retry(first, retry_num=retry_num)).status == 500
            await slack_listeners_done()
            assert _ephemerals(slack) == []
            last = await events.retry(first, retry_num=3)
            assert last.status == 500
            [notice] = await slack.wait_for("chat.postEphemeral", timeout=GENEROUS_S)
            await slack_listeners_done()
            await start_embedded_again(embedded)
    assert _ephemerals(slack) == [notice.args]
    assert (notice.args["channel"], notice.args["user"], notice.args.get("thread_ts")) == (CHANNEL, ALICE, None)
    assert notice.args["text"] == (
        "Something went wrong on my side and I could not answer your message “deploy the release”. Please send "
        f"it again; the details are in the bot's log (conversation `slack:{TEAM}:{CHANNEL}:{first.ts}`)."
    )
    assert slack.calls_to("chat.postMessage") == []


async def test_a_message_stored_on_slack_s_second_retry_is_answered_and_nobody_is_told(bot, events, slack, db_url):
    """The inbox refuses the first delivery and retry 1, takes retry 2: one answer, no notice."""
    async with inbox_refusing_claims(db_url, claims=2):
        first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
        assert first.status == 500
        assert (await events.retry(first, retry_num=1)).status == 500
        assert (await events.retry(first, retry_num=2)).status == 200
        [answer] = await wait_answer(slack, first.ts, starts="You said")
    await settle(bot)
    await slack_listeners_done()
    assert answer == "You said: hello"
    assert _ephemerals(slack) == []


async def test_a_message_stored_just_after_slack_s_last_retry_is_answered_and_nobody_is_told(
    bot, events, slack, db_url
):
    """Retry 3's claim fails, the last try after its 500 is stored: the message is answered, never also given up."""
    async with inbox_refusing_claims(db_url, claims=4):
        first = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
        for retry_num in (1, 2, 3):
            assert (await events.retry(first, retry_num=retry_num)).status == 500
        [answer] = await wait_answer(slack, first.ts, starts="You said")
    await settle(bot)
    await slack_listeners_done()
    assert answer == "You said: hello"
    assert _ephemerals(slack) == []


async def test_a_thread_reply_slack_gives_up_on_is_answered_in_its_thread(bot, events, slack, db_url):
    """A reply in the bot's thread that the inbox never takes: after Slack's last retry, the notice is in that thread."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> hello")
    await wait_answer(slack, mention.ts, starts="You said")
    await settle(bot)
    async with inbox_refusing_claims(db_url):
        reply = await events.message(CHANNEL, ALICE, "and the staging one", thread_ts=mention.ts)
        for retry_num in (1, 2, 3):
            assert (await events.retry(reply, retry_num=retry_num)).status == 500
        await slack.wait_for("chat.postEphemeral", timeout=GENEROUS_S)
        await slack_listeners_done()
    [notice] = _not_taken(slack)
    assert (notice["channel"], notice["user"], notice["thread_ts"]) == (CHANNEL, ALICE, mention.ts)
    assert "“and the staging one”" in notice["text"] and f"slack:{TEAM}:{CHANNEL}:{mention.ts}" in notice["text"]


async def test_app_uninstalled_with_one_token_is_acknowledged_and_logged(bot, events, slack, caplog):
    """With SLACK_BOT_TOKEN, app_uninstalled / tokens_revoked get a 200 (no Slack retries) and a warning."""
    for event in ({"type": "app_uninstalled"}, {"type": "tokens_revoked", "tokens": {"bot": ["UBOT"]}}):
        delivery = await events.event(event)
        assert delivery.status == 200
    await slack_listeners_done()
    warnings = [r.getMessage() for r in caplog.records if "SLACK_BOT_TOKEN no longer works" in r.getMessage()]
    assert warnings == [
        f"Slack sent app_uninstalled for team {TEAM}: SLACK_BOT_TOKEN no longer works",
        f"Slack sent tokens_revoked for team {TEAM}: SLACK_BOT_TOKEN no longer works",
    ]
