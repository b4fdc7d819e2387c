"""Hostile input on Slack: huge, nested, invisible and broadcasting arguments, forms and names."""

from __future__ import annotations

import json

import pytest

from adapters.slack import blocks
from tests.adversarial.conftest import ModelRules
from tests.adversarial.slack_support import (
    BROADCASTS,
    card_json,
    card_ready,
    ephemerals_to,
    everything_sent,
    has_buttons,
    posted_texts,
)
from tests.e2e.agent_script import SHOUT
from tests.e2e.conftest import ALICE, CHANNEL
from tests.e2e.slack.test_slack_flow import card_state, click, settle, wait_answer
from tests.standins.gemini import call, parts
from tests.standins.slack_api import SlackApiStandIn
from tests.support.barriers import slack_listeners_done

pytestmark = pytest.mark.e2e

EVE = "UEVE"


def _post(url: str, body: object) -> dict[str, object]:
    return {"method": "POST", "url": url, "body": body}


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


async def _edit(events, approval_id: str, raw: str):
    return await events.view_submission(
        ALICE, blocks.VIEW_EDIT, approval_id, {blocks.EDIT_BLOCK: {blocks.EDIT_INPUT: raw}}
    )


async def test_100kb_of_arguments_fit_the_card_and_run_unchanged(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    """A 100 KB body: the card shortens it within Slack's limits, Edit says it is too long, Approve sends it all."""
    body = {"blob": "<&>" * 34_000}
    model_rules.on("post blob", call("http_request", _post(target.url(), body)))
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post blob")
    [card] = await card_ready(bot, slack)
    assert "characters)" in card_json(slack, card) and "All arguments" in card_json(slack, card)
    await click(events, slack, ALICE, blocks.ACTION_EDIT, card)
    [too_long] = await slack.wait_for("chat.postEphemeral", lambda a: a.get("user") == ALICE)
    assert "too long to edit" in too_long.args["text"] and slack.calls_to("views.open") == []
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert [r.json for r in target.requests] == [body]
    assert "Approved" in card_json(slack, card)


async def test_broadcasts_in_arguments_reasons_descriptions_and_names_are_escaped(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules
):
    """`<!channel>` & co. from the model, a reject reason and a display name reach Slack escaped everywhere."""
    slack.add_user(EVE, f"{SHOUT} eve")
    model_rules.on(
        "post shout",
        parts(
            [
                {"text": f"Because {SHOUT} said so. ``` *Tool:* `calculator` ```"},
                {"functionCall": {"name": "http_request", "args": _post(target.url(), {"msg": SHOUT})}},
            ]
        ),
    )
    mention = await events.app_mention(CHANNEL, EVE, "<@UBOT> post shout")
    [card] = await card_ready(bot, slack)
    await click(events, slack, EVE, blocks.ACTION_REJECT, card)
    await slack.wait_for("views.open")
    await events.view_submission(
        EVE, blocks.VIEW_REJECT, card.approval_id, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: SHOUT}}
    )
    [answer] = await wait_answer(slack, mention.ts)
    await settle(bot)
    assert "evil.example" in answer and "Rejected" in card_json(slack, card)
    sent = everything_sent(slack)
    assert "&lt;!channel&gt;" in sent
    assert [token for token in BROADCASTS if token in sent] == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", "not valid JSON"), ("   \n ", "not valid JSON"), ("null", "JSON object"), ("{}", "Field required")],
    ids=["empty", "blank", "null", "empty-object"],
)
async def test_empty_edits_are_refused_in_the_form(bot, events, slack, target, raw, expected):
    """An empty, blank, null or {} edit is refused inside the modal and the card stays usable."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    reply = await _edit(events, card.approval_id, raw)
    assert reply.json["response_action"] == "errors"
    assert expected in reply.json["errors"][blocks.EDIT_BLOCK]
    await settle(bot)
    assert target.requests == [] and has_buttons(slack, card)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert len(target.requests) == 1


async def test_a_reject_reason_over_2000_characters_is_refused_and_2000_are_kept(bot, events, slack, target, gemini):
    """2,001 characters are refused in the form; 2,000 are accepted, shown clipped and read by the model."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    too_long = await events.view_submission(
        ALICE, blocks.VIEW_REJECT, card.approval_id, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "<" * 2001}}
    )
    assert too_long.json["response_action"] == "errors"
    assert "2000" in too_long.json["errors"][blocks.REASON_BLOCK]
    assert has_buttons(slack, card)
    ok = await events.view_submission(
        ALICE, blocks.VIEW_REJECT, card.approval_id, {blocks.REASON_BLOCK: {blocks.REASON_INPUT: "<" * 2000}}
    )
    assert ok.status == 200 and not ok.body
    await wait_answer(slack, mention.ts)
    await settle(bot)
    assert target.requests == []
    assert "&lt;" * 100 in card_json(slack, card)
    assert "<" * 2000 in json.dumps(gemini.requests[-1].function_responses)


async def test_an_edit_cannot_add_arguments_the_tool_does_not_have(bot, events, slack, target):
    """Extra top-level keys, a renamed tool smuggled in the JSON, and wrong types are refused in the form."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    attempts = [
        {**_post(target.url(), {"n": 1}), "name": "calculator"},
        {**_post(target.url(), {"n": 1}), "headers": {"X-HTTP-Method-Override": "DELETE"}, "tool": "x"},
        {"method": ["POST"], "url": target.url()},
        {"method": "POST", "url": {"href": target.url()}},
    ]
    for args in attempts:
        reply = await _edit(events, card.approval_id, json.dumps(args))
        assert reply.json["response_action"] == "errors", args
        [said] = reply.json["errors"].values()
        assert said.startswith("Your edit was not applied: "), said  # about the edit, not "that decision"
    await settle(bot)
    assert target.requests == [] and has_buttons(slack, card)
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)
    assert [r.json for r in target.requests] == [{"name": "widget"}]


async def test_deeply_nested_json_in_an_edit_is_refused_in_the_form(bot, events, slack, target):
    """2,400 characters of nested brackets (under the form's 3,000) get a readable error in the form."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    reply = await _edit(events, card.approval_id, "[" * 1200 + "]" * 1200)
    await settle(bot)
    assert target.requests == [] and has_buttons(slack, card)
    assert reply.status == 200, reply.status
    assert reply.json["response_action"] == "errors"
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await wait_answer(slack, mention.ts)


@pytest.mark.parametrize(
    "body",
    [_nested(300), {"account": 10**30}],
    ids=["300-levels", "100-bit-integer"],
)
async def test_an_edit_the_checkpoint_cannot_store_is_refused_before_anything_runs(bot, events, slack, target, body):
    """An edit that cannot be stored as the resume value is refused in the form; nothing runs."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    reply = await _edit(events, card.approval_id, json.dumps(_post(target.url(), body)))
    await slack_listeners_done()
    await settle(bot)
    failures = [t for t in posted_texts(slack, mention.ts) if "went wrong" in t]
    assert (target.requests, failures) == ([], [])
    assert reply.json and reply.json["response_action"] == "errors"
    assert has_buttons(slack, card)


async def test_a_failed_resume_is_tried_again_once_by_the_next_message(bot, events, slack, target):
    """The database refuses the resume's checkpoint once: nobody is told (it is tried again); the next message resumes it, then is answered."""
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
    [card] = await card_ready(bot, slack)
    pool = bot.runtime.database.pool
    thread_id = f"slack:T1:{CHANNEL}:{mention.ts}"
    await pool.execute(
        """CREATE FUNCTION refuse_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN RAISE EXCEPTION 'disk full'; END; $$"""
    )
    await pool.execute(
        f"CREATE TRIGGER refuse BEFORE INSERT ON checkpoints FOR EACH ROW "
        f"WHEN (NEW.thread_id = '{thread_id}') EXECUTE FUNCTION refuse_checkpoint()"
    )
    await click(events, slack, ALICE, blocks.ACTION_APPROVE, card)
    await slack_listeners_done()
    await settle(bot)
    assert len(target.requests) <= 1  # checkpoints are written behind the run; the tool may have run
    await pool.execute("DROP TRIGGER refuse ON checkpoints")
    await events.message(CHANNEL, ALICE, "and now?", thread_ts=mention.ts)
    await wait_answer(slack, mention.ts, starts="Result: ")  # the resume, finished first
    await wait_answer(slack, mention.ts, starts="You said: and now?")
    await settle(bot)
    assert len(target.requests) == 1  # the ledger keeps the retried resume from sending it again
    assert not [t for t in posted_texts(slack, mention.ts) if "went wrong" in t]  # one outcome: the answer


@pytest.mark.parametrize("where", ["arguments", "description"])
async def test_a_nul_character_from_the_model_does_not_jam_the_thread(
    bot, events, slack: SlackApiStandIn, target, model_rules: ModelRules, where
):
    """A gated call whose arguments or reasoning contain U+0000 still gives a card or a notice, and later messages are answered."""
    args = _post(target.url(), {"note": "a\u0000b" if where == "arguments" else "fine"})
    reasoning = "Posting the note\u0000 now." if where == "description" else "Posting the note now."
    model_rules.on("post nul", parts([{"text": reasoning}, {"functionCall": {"name": "http_request", "args": args}}]))
    mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post nul")
    await slack_listeners_done()
    await settle(bot)
    await events.message(CHANNEL, ALICE, "hello?", thread_ts=mention.ts)
    await slack_listeners_done()
    await settle(bot)
    assert target.requests == []
    heard = posted_texts(slack, mention.ts) + ephemerals_to(slack, ALICE)
    assert heard, "the thread went silent: no card, no notice, no answer"


async def test_invisible_and_bidi_characters_in_arguments_are_visible_on_the_card(
    bot, events, slack, target, model_rules: ModelRules
):
    """A right-to-left override or a zero-width space in the arguments is shown as an escape, not rendered."""
    body = {"pay_to": "ACME-\u202e9876-5432", "memo\u200b": "ok"}
    model_rules.on("post spoof", call("http_request", _post(target.url(), body)))
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> post spoof")
    [card] = await card_ready(bot, slack)
    shown = "".join(b["text"]["text"] for b in card_state(slack, card)["blocks"] if b["type"] == "section")
    assert "ACME-" in shown
    assert "\u202e" not in shown and "\u200b" not in shown


async def test_a_message_that_cannot_be_handled_is_named_to_its_sender(bot, events, slack):
    """The database refuses to store the conversation of a message: its sender is told, privately,
    which message to send again, quoted on one line and escaped (no ping, no link)."""
    pool = bot.runtime.database.pool
    await pool.execute(
        """CREATE FUNCTION refuse_conversation() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN RAISE EXCEPTION 'disk full'; END; $$"""
    )
    await pool.execute(
        "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON conversations FOR EACH ROW EXECUTE FUNCTION refuse_conversation()"
    )
    await events.app_mention(CHANNEL, ALICE, "<@UBOT> ping <!channel>\n\nabout the   deploy " + "x" * 100)
    [told] = await slack.wait_for("chat.postEphemeral", lambda args: args.get("user") == ALICE)
    text = str(told.args["text"])
    assert text.startswith("Something went wrong on my side and I could not answer your message “ping "), text
    assert "&lt;!channel&gt; about the deploy xxx" in text and "<!channel>" not in text and "\n" not in text
    assert "xxx…”. Please send it again" in text
