"""Attacks on Slack OAuth distribution (docs/decisions/0019), against the real bot in OAuth mode."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import SIGNING_SECRET
from tests.e2e.test_slack_flow import settle
from tests.e2e.test_slack_oauth_flow import (  # noqa: F401 - fixtures, found by pytest by name
    Workspace,
    bot,
    browser,
    install,
    installations,
    settings,
    slack,
    wait_reply,
)
from tests.standins.slack_events import SlackEventSender
from tests.support.barriers import bolt_listeners_done

pytestmark = pytest.mark.e2e

GRID = Workspace(team="TGRID", bot_user="UBOTG", channel="CGRID", person="UGWEN")
ORG = "EORG1"


async def test_a_workspace_of_an_enterprise_grid_org_is_answered_with_its_token(bot, slack, browser, db_url):  # noqa: F811
    """A workspace inside an Enterprise Grid org installs (not org-wide): its mention is answered with its token.

    Its installation is stored under its enterprise id; the adapter's own calls (the answer) look
    the token up by team id only, so they must still find it, not go out with no token.
    """
    slack.add_workspace(GRID.team, bot_user_id=GRID.bot_user, installer=GRID.person, enterprise_id=ORG)
    slack.add_user(GRID.person, "gwen")
    slack.add_channel(GRID.channel, name="general-grid")
    await install(browser, bot, slack, GRID)
    [token] = slack.tokens_of(GRID.team)
    assert await installations(db_url) == {GRID.team: token}

    async with SlackEventSender(
        f"http://127.0.0.1:{bot.port}/slack/events",
        SIGNING_SECRET,
        team_id=GRID.team,
        bot_user_id=GRID.bot_user,
        enterprise_id=ORG,
    ) as events:
        mention = await events.app_mention(GRID.channel, GRID.person, f"<@{GRID.bot_user}> hello from the org")
        assert mention.status == 200
        answer = await wait_reply(slack, mention.ts, "You said: hello from the org")
        await settle(bot)
        await bolt_listeners_done()
    assert (answer.token, answer.team_id) == (token, GRID.team)
    assert not [c for c in slack.calls if c.error in ("not_authed", "invalid_auth")]
