"""Property: any `/countersign` text gets a private answer in words; a refused one changes nothing."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.adversarial.hostile import (
    E2E_SETTINGS,
    check_command_reply,
    command_text,
    config_snapshot,
)
from tests.e2e.conftest import BOB, CAROL, CHANNEL
from tests.support.barriers import slack_listeners_done

pytestmark = pytest.mark.e2e

SLACK_MENTIONS = ["<@UBOB|bob>", "<@UCAROL>", "<#C1|general>", "<#C9>", "<!subteam^S1|@ops>", "<@&1>", "<!channel>"]


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(text=command_text(SLACK_MENTIONS), who=st.sampled_from([CAROL, CAROL, BOB]))
@example(text="policy http_request review when " + "(" * 2000 + "true" + ")" * 2000, who=CAROL)
@example(text="policy http_request review when " + "!" * 3000 + "true", who=CAROL)
@example(text="expiry 99999999999999999999999999d", who=CAROL)
@example(text="quorum http_request ٣", who=CAROL)
@example(text="audit limit 99999999999999999999", who=CAROL)
@example(text="policy \x00 review", who=CAROL)
@example(text="policy http_request review when args.url == '\x00'", who=CAROL)
async def test_property_any_command_text_is_answered_privately_and_a_refusal_changes_nothing(
    bot, events, slack, text, who
):
    """Hostile, near-valid and deeply nested `/countersign` text: a private reply in words, never a failure; refused means unchanged."""
    pool = bot.runtime.database.pool
    before, replies = await config_snapshot(pool), len(slack.calls_to("response_url"))
    url = slack.new_response_url(CHANNEL, user=who)
    delivery = await events.slash_command("/countersign", text, who, CHANNEL, url)
    assert delivery.status == 200
    await slack.wait_for("response_url", count=replies + 1)
    await slack_listeners_done()
    posts = slack.calls_to("response_url")[replies:]
    assert 1 <= len(posts) <= 5
    assert all(p.args.get("response_type") == "ephemeral" for p in posts)
    check_command_reply("\n".join(str(p.args.get("text", "")) for p in posts), before, await config_snapshot(pool))
