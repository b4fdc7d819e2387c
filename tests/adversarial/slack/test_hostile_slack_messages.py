"""Property: any text in a Slack mention is answered or refused in words, and the thread goes on."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.words.conversation import EMPTY_MENTION
from adapters.words.display import is_blank
from tests.adversarial.hostile import E2E_SETTINGS, looks_like_a_trace, message_text
from tests.adversarial.slack_support import BROADCASTS, ephemerals_to, everything_sent
from tests.e2e.conftest import ALICE, CHANNEL
from tests.e2e.slack.test_slack_flow import settle, wait_answer
from tests.support.barriers import slack_listeners_done

pytestmark = pytest.mark.e2e

_SCRIPTED = ("post", "get", "long", "shout")
"""First words the end-to-end model script answers with a tool call or a canned text."""


def _not_scripted(text: str) -> str:
    words = text.split()
    return f"say {text}" if words and words[0] in _SCRIPTED else text


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(said=message_text(limit=40_000), in_dm=st.booleans())
@example(said="\x00", in_dm=False)
@example(said="\ud800 hi", in_dm=False)
@example(said="\u200b\u200e\u2060", in_dm=False)
@example(said=" \t\u3000 ", in_dm=True)
async def test_property_a_hostile_message_is_answered_or_refused_and_the_thread_goes_on(
    bot, events, slack, gemini, said, in_dm
):
    """Any text (control characters, NUL, marks, scripts, mentions, 40k characters) gets an answer or a clear note; the next message is answered."""
    said = _not_scripted(said)
    before = len(slack.calls)
    notes_before = len(ephemerals_to(slack, ALICE))
    if in_dm:
        sent = await events.message("DALICE", ALICE, said, channel_type="im")
    else:
        sent = await events.app_mention(CHANNEL, ALICE, f"<@UBOT> {said}")
    assert sent.status == 200
    await slack_listeners_done()
    await settle(bot)
    thread = None if in_dm else sent.ts
    answers = _answers(slack, "DALICE" if in_dm else CHANNEL, thread, after=before)
    notes = ephemerals_to(slack, ALICE)[notes_before:]
    assert (bool(answers), notes) in ((True, []), (False, [EMPTY_MENTION])), (answers, notes)
    if is_blank(re.sub(r"<@UBOT(\|[^>]*)?>", "", said)):
        assert notes == [EMPTY_MENTION]
    sent_now = "\n".join(str(call.args) for call in slack.calls[before:])
    assert not looks_like_a_trace(sent_now)
    assert [token for token in BROADCASTS if token in everything_sent(slack)] == []
    assert not any("went wrong" in text or "could not" in text for text in answers)
    if in_dm:
        again = len(_answers(slack, "DALICE", None, after=0)) + 1
        await events.message("DALICE", ALICE, "still there?", channel_type="im")
        await slack.wait_for("chat.postMessage", lambda a: a.get("channel") == "DALICE", count=again)
    else:
        await events.app_mention(CHANNEL, ALICE, "<@UBOT> still there?", thread_ts=sent.ts)
        await wait_answer(slack, sent.ts, starts="You said: still there?")
    await settle(bot)


def _answers(slack, channel: str, thread: str | None, *, after: int) -> list[str]:
    return [
        str(call.args.get("text", ""))
        for call in slack.calls[after:]
        if call.method == "chat.postMessage"
        and call.args.get("channel") == channel
        and call.args.get("thread_ts") == thread
    ]
