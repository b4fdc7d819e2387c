"""Properties on Discord: hostile messages, forged clicks and forms, odd command options.

Discord sends valid UTF-8 only, so no text here holds a lone surrogate (discord.py parses the
gateway with orjson, which refuses one). Messages go through the gateway as Discord shapes them; clicks and modal submissions are sent
with `DiscordStandIn.forge_interaction`, which, unlike Discord, sends any `custom_id` on any
message as any member, with any component shapes: the card buttons (`cs:approve|trust|edit|
reject:`), the batch buttons (`cs:all-approve|all-reject:<pause>`), Stop (`cs:stop:<turn>`) and
the Edit, Reject and Reject all forms. Every interaction must be answered (an
unanswered one shows "This interaction failed"), privately, in words, with nothing decided
that should not be, every refusal that names an approval audited, and the card still usable.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.discord import messages as msg
from adapters.words.conversation import EMPTY_MENTION
from adapters.words.decisions import DECISION_FAILED
from adapters.words.display import is_blank
from tests.adversarial.discord_hostile import (
    D_GUILD2,
    EPHEMERAL,
    NAMED,
    UNKNOWN_ID,
    Cards,
    answer_of,
    approval_statuses,
    audit_rows,
    cards_fixture,  # noqa: F401 - the `cards` fixture, found by pytest by name
    discord_api_with_a_second_guild,  # noqa: F401 - the `discord_api` fixture with guild 2
)
from tests.adversarial.hostile import (
    E2E_SETTINGS,
    check_command_reply,
    command_text,
    config_snapshot,
    edit_form_text,
    hostile_text,
    looks_like_a_trace,
    message_text,
    world,
)
from tests.e2e.conftest import D_ALICE, D_BOB, D_BOT, D_CAROL, D_CHANNEL, D_ERIN, D_GUILD
from tests.e2e.discord.test_discord_flow import _buttons, click, settle, wait_answer
from tests.support.barriers import wait_until_async

pytestmark = pytest.mark.e2e

_SCRIPTED = ("post", "get", "long", "shout")
_BOT_MENTION = re.compile(rf"<@!?{D_BOT}>")
BUTTON, SELECT = 2, 3
BUTTON_ID = re.compile(r"cs:(approve|trust|edit|reject):[0-9a-f]{32}(:[0-9a-f]{8})?")
"""A card button's custom_id: a click on one is refused and audited (the approval it names, or an unknown one)."""
OTHER_BUTTON_ID = re.compile(r"cs:(all-approve|all-reject):[0-9a-f]{32}(:[0-9a-f]{8})?|cs:stop:[0-9a-f]{32}")
"""A batch or Stop button's custom_id (docs/decisions/0023): refused, audited at most once (a live pause or turn)."""


def _not_scripted(text: str) -> str:
    words = _BOT_MENTION.sub("", text).split()
    return f"say {text}" if words and words[0] in _SCRIPTED else text


# --- messages ------------------------------------------------------------------------------


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(said=message_text(limit=4000, surrogates=False), in_dm=st.booleans())
@example(said="\x00", in_dm=False)
@example(said="\x00 \x7f hi", in_dm=True)
@example(said=f"<@!{D_BOT}> \u200b\u2067", in_dm=False)
@example(said="@everyone <@&1600000000000000020> " * 50, in_dm=False)
async def test_property_a_hostile_discord_message_is_answered_or_refused_and_the_next_is_answered(
    discord_bot, discord_api, said, in_dm
):
    """Any text (control characters, NUL, marks, scripts, mentions, 4,000 characters): an answer or a clear note, no pings; the next message is answered."""
    said = _not_scripted(said)
    before = len(_bot_posts(discord_api))
    if in_dm:
        channel = int((await discord_api.send_dm(D_ALICE, said))["channel_id"])
    else:
        channel = D_CHANNEL
        await discord_api.send_message(channel, D_ALICE, f"<@{D_BOT}> {said}", mentions=[D_BOT], guild_id=D_GUILD)
    await discord_api.wait_for_request("POST", _MESSAGES, count=before + 1)
    await settle(discord_bot)
    posts = _bot_posts(discord_api)[before:]
    texts = [str((p.json or {}).get("content", "")) for p in posts]
    assert all(p.path == f"/channels/{channel}/messages" and p.status < 300 for p in posts), posts
    assert texts == [EMPTY_MENTION] or EMPTY_MENTION not in texts, texts
    if is_blank(_BOT_MENTION.sub("", said)):
        assert texts == [EMPTY_MENTION]
    assert not any(looks_like_a_trace(t) or "went wrong" in t or "could not" in t for t in texts), texts
    assert all(_pings_nobody((p.json or {}).get("allowed_mentions")) for p in posts), posts
    here = f"/channels/{channel}/messages"
    still = sum(1 for p in _bot_posts(discord_api) if p.path == here and _content(p).startswith(_STILL))
    if in_dm:
        await discord_api.send_dm(D_ALICE, "still there?")
    else:
        await discord_api.send_message(channel, D_ALICE, f"<@{D_BOT}> still there?", mentions=[D_BOT], guild_id=D_GUILD)
    await wait_answer(discord_api, channel=channel, starts=_STILL, count=still + 1)
    await settle(discord_bot)


_MESSAGES = r"/channels/\d+/messages"
_STILL = "You said: still there?"


def _pings_nobody(allowed: Any) -> bool:
    return (
        isinstance(allowed, dict)
        and allowed.get("parse") == []
        and not any(allowed.get(key) for key in ("users", "roles", "replied_user"))
    )


def _content(request: Any) -> str:
    return str((request.json or {}).get("content", ""))


def _bot_posts(api) -> list[Any]:
    return api.requests_to("POST", _MESSAGES)


# --- clicks --------------------------------------------------------------------------------

PEOPLE = {
    "bob": (D_BOB, None),
    "erin": (D_ERIN, None),
    "carol-without-rights": (D_CAROL, "0"),
}
"""Members of guild 1 who may not decide alice's card (carol's payload says: no Manage Server)."""


def _on_card(cards: Cards, name: str):
    return getattr(cards, name)


@st.composite
def forged_clicks(draw: st.DrawFn) -> dict[str, Any]:
    """A click: on which card message, with which custom_id and component type, by whom."""
    id_kind = draw(st.sampled_from(["shown", "named", "named", "malformed"]))
    return {
        "message": draw(st.sampled_from(["pending", "decided"])),
        "id_kind": id_kind,
        "action": draw(st.sampled_from(["approve", "trust", "edit", "reject", "all-approve", "all-reject", "stop"])),
        "named": draw(st.sampled_from([*NAMED, "unknown"])),
        "version": draw(st.one_of(st.none(), st.just("deadbeef"))),
        "malformed": draw(
            st.one_of(
                hostile_text(max_atoms=3, surrogates=False),
                st.sampled_from(
                    [
                        "cs:approve:",
                        "cs:approve:" + "g" * 32,
                        "cs:approve:" + UNKNOWN_ID + "x",
                        "cs:" * 40,
                        "cs:trust:" + UNKNOWN_ID.upper(),
                        "cs:stop:",
                        "cs:stop:" + UNKNOWN_ID + ":00000000",
                        "cs:all-approve:" + "z" * 32,
                        "cs:all-stop:" + UNKNOWN_ID,
                    ]
                ),
            )
        ),
        "component_type": draw(st.sampled_from([BUTTON, BUTTON, BUTTON, SELECT])),
        "who": draw(st.sampled_from(sorted(PEOPLE))),
    }


async def _audited(bot, rows: int) -> None:
    """Wait until the audit log has `rows` rows."""

    async def there() -> bool:
        return len(await audit_rows(bot)) >= rows

    await wait_until_async(there, f"{rows} audit rows")


def _forged(
    action: str,
    id_kind: str,
    *,
    named: str,
    who: str,
    message: str = "pending",
    version: str | None = None,
    malformed: str = "",
    component_type: int = BUTTON,
) -> dict[str, Any]:
    """An explicit example of `forged_clicks()` (same keys), with its usual values as defaults."""
    return {
        "message": message,
        "id_kind": id_kind,
        "action": action,
        "named": named,
        "version": version,
        "malformed": malformed,
        "component_type": component_type,
        "who": who,
    }


def _custom_id(click: dict[str, Any], cards: Cards) -> str:
    if click["id_kind"] == "shown":
        shown = _buttons_of(cards, click["message"])
        return next((c for c in shown if c.startswith(f"cs:{click['action']}:")), shown[0] if shown else "cs:none")
    if click["id_kind"] == "named":
        action = click["action"]
        if click["named"] == "unknown":
            named = UNKNOWN_ID
        elif action == "stop":
            named = cards.turns[click["named"]]
        elif action.startswith("all-"):
            named = cards.pauses[click["named"]]
        else:
            named = _on_card(cards, click["named"]).approval_id
        version = f":{click['version']}" if click["version"] and action != "stop" else ""
        return f"cs:{action}:{named}{version}"
    return click["malformed"]


def _buttons_of(cards: Cards, name: str) -> list[str]:
    return _on_card(cards, name).custom_ids


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(click=forged_clicks())
@example(click=_forged("approve", "named", named="foreign", who="bob"))
@example(click=_forged("approve", "shown", named="pending", who="carol-without-rights"))
@example(click=_forged("approve", "malformed", named="pending", who="erin", malformed="cs:approve:" + "g" * 32))
@example(click=_forged("trust", "named", named="foreign", who="bob"))
@example(click=_forged("all-approve", "named", named="foreign", who="bob", version="deadbeef"))
@example(click=_forged("all-reject", "named", named="pending", who="erin"))
@example(click=_forged("stop", "named", named="pending", who="carol-without-rights"))
@example(click=_forged("stop", "named", named="decided", who="bob"))
async def test_property_a_forged_or_unpermitted_click_is_answered_audited_and_changes_nothing(
    discord_bot, discord_api, target, cards, click
):
    """Any click (ids of other approvals or servers, malformed ids, other component types, no rights): a private answer, audited, nothing decided."""
    user, permissions = PEOPLE[click["who"]]
    custom_id = _custom_id(click, cards)
    card = _on_card(cards, click["message"])
    before, audit, runs = await world(discord_bot), await audit_rows(discord_bot), len(target.requests)
    interaction = await discord_api.forge_interaction(
        "component",
        {"custom_id": custom_id, "component_type": click["component_type"]},
        user,
        channel_id=card.channel,
        message_id=card.message_id,
        permissions=permissions,
    )
    kind, shown = await answer_of(discord_api, interaction)
    await settle(discord_bot)
    assert kind in (4, 6), kind  # never a form: nobody here may decide
    assert shown and all(m["flags"] & EPHEMERAL for m in shown), shown
    assert not any(looks_like_a_trace(str(m.get("content"))) for m in shown), shown
    assert (await world(discord_bot), len(target.requests)) == (before, runs)
    if BUTTON_ID.fullmatch(custom_id):  # the clicker is answered first, the refusal audited next
        await _audited(discord_bot, len(audit) + 1)
    new_rows = (await audit_rows(discord_bot))[len(audit) :]
    assert all(row["kind"] == "refused" for row in new_rows), new_rows
    if BUTTON_ID.fullmatch(custom_id):
        [row] = new_rows
        assert row["actor_id"] == str(user)
        named = custom_id.split(":")[2]
        assert row["approval_id"] == named or (row["outcome"] == "unknown_approval" and named == UNKNOWN_ID), row
    elif OTHER_BUTTON_ID.fullmatch(custom_id):
        assert len(new_rows) <= 1 and all(row["actor_id"] == str(user) for row in new_rows), new_rows
    else:
        assert new_rows == []
    assert _buttons(discord_api.message(cards.pending.message_id))


async def test_after_forged_clicks_the_requester_still_decides(discord_bot, discord_api, target, cards):
    """A burst of forged clicks by others; then alice approves her card and it runs once."""
    for action in ("approve", "trust", "edit", "reject", "all-approve", "all-reject", "stop"):
        for approval in (
            cards.foreign.approval_id,
            cards.decided.approval_id,
            UNKNOWN_ID,
            cards.pending.approval_id,
            cards.pauses["pending"],
            cards.turns["pending"],
        ):
            interaction = await discord_api.forge_interaction(
                "component",
                {"custom_id": f"cs:{action}:{approval}:00000000", "component_type": BUTTON},
                D_BOB,
                channel_id=D_CHANNEL,
                message_id=cards.pending.message_id,
            )
            await answer_of(discord_api, interaction)
    await settle(discord_bot)
    before = len(target.requests)
    await click(discord_api, cards.pending, D_ALICE, "approve")
    await wait_answer(discord_api)
    await settle(discord_bot)
    assert len(target.requests) == before + 1


async def test_the_requesters_own_clicks_that_cannot_apply_change_nothing(discord_bot, discord_api, target, cards):
    """The trust, Stop and batch buttons (docs/decisions/0021 to 0023), forged by alice (who may decide her card) where they cannot apply: Approve and trust on her
    card, which offers no trust, Stop naming an ended or unknown turn, Approve all and Reject all on a decided pause.
    Her card shows none of these buttons, so each is refused as a button the message does not show (before any
    decision is tried), privately; nothing is decided, trusted, stopped or run, and she still approves her card."""
    clicks = [
        f"cs:trust:{cards.pending.approval_id}",
        f"cs:stop:{cards.turns['decided']}",
        f"cs:stop:{UNKNOWN_ID}",
        f"cs:all-approve:{cards.pauses['decided']}",
        f"cs:all-reject:{cards.pauses['decided']}",
    ]
    for custom_id in clicks:
        answer = msg.UNKNOWN_BUTTON
        before, audit, runs = await world(discord_bot), await audit_rows(discord_bot), len(target.requests)
        interaction = await discord_api.forge_interaction(
            "component",
            {"custom_id": custom_id, "component_type": BUTTON},
            D_ALICE,
            channel_id=D_CHANNEL,
            message_id=cards.pending.message_id,
        )
        kind, shown = await answer_of(discord_api, interaction)
        await settle(discord_bot)
        assert kind in (4, 6), (custom_id, kind)
        assert [m["flags"] & EPHEMERAL for m in shown] == [EPHEMERAL], shown
        assert str(shown[0].get("content")).startswith(answer), (custom_id, shown)
        assert (await world(discord_bot), len(target.requests)) == (before, runs), custom_id
        assert all(row["kind"] == "refused" for row in (await audit_rows(discord_bot))[len(audit) :]), custom_id
    await click(discord_api, cards.pending, D_ALICE, "approve")
    await wait_answer(discord_api)
    await settle(discord_bot)
    assert len(target.requests) == runs + 1


# --- modal submissions ---------------------------------------------------------------------


def _form_components(input_id: str, value: Any, shape: str) -> Any:
    text_input = {"type": 4, "id": 2, "custom_id": input_id, "value": value}
    if shape == "label":
        return [{"type": 18, "id": 1, "component": text_input}]
    if shape == "row":
        return [{"type": 1, "id": 1, "components": [text_input]}]
    if shape == "flat":
        return [text_input]
    if shape == "not-a-list":
        return {"0": text_input}
    return [None, 7, "x", {"type": 18}]


@st.composite
def forged_forms(draw: st.DrawFn) -> dict[str, Any]:
    """A modal submission: which modal id, typed what, in what shape, by whom."""
    kind = draw(st.sampled_from(["edit", "edit", "reject", "reject-all", "malformed"]))
    who = draw(st.sampled_from(["alice", "bob", "carol-without-rights"] if kind == "edit" else sorted(PEOPLE)))
    return {
        "kind": kind,
        "named": draw(st.sampled_from([*NAMED, "unknown"])) if who != "alice" else "pending",
        "malformed": draw(st.one_of(hostile_text(max_atoms=3, surrogates=False), st.just("cs:edit-modal:" + "z" * 32))),
        "value": draw(st.one_of(edit_form_text(surrogates=False), st.integers(), st.none()))
        if kind not in ("reject", "reject-all")
        else draw(hostile_text(surrogates=False)),
        "shape": draw(st.sampled_from(["label", "label", "row", "flat", "not-a-list", "junk"])),
        "who": who,
    }


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(form=forged_forms())
@example(
    form={
        "kind": "edit",
        "named": "pending",
        "malformed": "",
        "value": '{"url": NaN}',
        "shape": "label",
        "who": "alice",
    }
)
@example(
    form={
        "kind": "edit",
        "named": "pending",
        "malformed": "",
        "value": "[" * 1500 + "]" * 1500,
        "shape": "label",
        "who": "alice",
    }
)
@example(form={"kind": "reject", "named": "foreign", "malformed": "", "value": "mine", "shape": "label", "who": "bob"})
@example(  # docs/decisions/0023: Reject all of another server's pause
    form={"kind": "reject-all", "named": "foreign", "malformed": "", "value": "no", "shape": "label", "who": "bob"}
)
@example(
    form={
        "kind": "malformed",
        "named": "pending",
        "malformed": "cs:edit-modal:zz",
        "value": "{}",
        "shape": "label",
        "who": "bob",
    }
)
async def test_property_a_forged_or_broken_form_is_answered_and_changes_nothing(
    discord_bot, discord_api, target, cards, form
):
    """Any modal submission (odd ids, broken JSON, odd component shapes, no rights): a private answer, nothing decided."""
    if form["who"] == "alice":
        user, permissions = D_ALICE, None
    else:
        user, permissions = PEOPLE[form["who"]]
    if form["named"] == "unknown":
        subject = UNKNOWN_ID
    elif form["kind"] == "reject-all":  # names a pause
        subject = cards.pauses[form["named"]]
    else:
        subject = _on_card(cards, form["named"]).approval_id
    custom_id = form["malformed"] if form["kind"] == "malformed" else f"cs:{form['kind']}-modal:{subject}"
    input_id = "reason" if form["kind"] in ("reject", "reject-all") else "args"
    before, audit, runs = await world(discord_bot), await audit_rows(discord_bot), len(target.requests)
    interaction = await discord_api.forge_interaction(
        "modal_submit",
        {"custom_id": custom_id, "components": _form_components(input_id, form["value"], form["shape"])},
        user,
        channel_id=D_CHANNEL,
        message_id=cards.pending.message_id,  # a card's form is opened from its message
        permissions=permissions,
    )
    kind, shown = await answer_of(discord_api, interaction)
    await settle(discord_bot)
    assert kind in (4, 5, 6), kind
    assert shown and all(m["flags"] & EPHEMERAL for m in shown), shown
    assert not any(looks_like_a_trace(str(m.get("content"))) or m.get("content") == DECISION_FAILED for m in shown)
    assert (await world(discord_bot), len(target.requests)) == (before, runs)
    assert all(row["kind"] == "refused" for row in (await audit_rows(discord_bot))[len(audit) :])


# --- /countersign options --------------------------------------------------------------------

SUBCOMMANDS = ["help", "show", "policy", "approvers", "admins", "quorum", "self-approval", "expiry"]
SUBCOMMANDS += ["cards", "scope", "agent", "audit", "nope", ""]
OPTION_NAMES = ["tool", "mode", "channel", "when", "action", "user", "role", "count", "state", "duration"]
OPTION_NAMES += ["where", "kind", "limit", "bogus"]


@st.composite
def command_options(draw: st.DrawFn) -> dict[str, Any]:
    """A `/countersign` invocation as a (forged) client could send it: any subcommand, options of any type."""
    options = []
    for name in draw(st.lists(st.sampled_from(OPTION_NAMES), max_size=4, unique=True)):
        kind = draw(st.sampled_from(["string", "string", "integer", "snowflake", "boolean"]))
        if kind == "string":
            value: Any = draw(command_text(["<#1600000000000000010>", f"<@{D_BOB}>"]))
            options.append({"name": name, "type": 3, "value": value})
        elif kind == "integer":
            options.append({"name": name, "type": 4, "value": draw(st.integers(-(2**70), 2**70))})
        elif kind == "snowflake":
            options.append(
                {"name": name, "type": draw(st.sampled_from([6, 7, 8])), "value": str(draw(st.integers(0, 2**64)))}
            )
        else:
            options.append({"name": name, "type": 5, "value": draw(st.booleans())})
    return {
        "sub": draw(st.sampled_from(SUBCOMMANDS)),
        "options": options,
        "who": draw(st.sampled_from([D_CAROL, D_CAROL, D_BOB])),
    }


@pytest.mark.timeout(300)
@E2E_SETTINGS
@given(call=command_options())
@example(
    call={
        "sub": "quorum",
        "options": [{"name": "tool", "type": 3, "value": "http_request"}, {"name": "count", "type": 4, "value": 99}],
        "who": D_CAROL,
    }
)
@example(
    call={
        "sub": "policy",
        "options": [
            {"name": "tool", "type": 3, "value": "http_request"},
            {"name": "mode", "type": 3, "value": "bogus"},
        ],
        "who": D_CAROL,
    }
)
@example(call={"sub": "nope", "options": [], "who": D_CAROL})
@example(call={"sub": "audit", "options": [{"name": "tool", "type": 4, "value": 0}], "who": D_CAROL})
@example(call={"sub": "approvers", "options": [{"name": "action", "type": 3, "value": "bogus"}], "who": D_CAROL})
@example(call={"sub": "show", "options": [{"name": "channel", "type": 7, "value": "123"}], "who": D_BOB})
@example(
    call={
        "sub": "policy",
        "options": [
            {"name": "tool", "type": 3, "value": "http_request"},
            {"name": "mode", "type": 3, "value": "review"},
            {"name": "when", "type": 3, "value": "(" * 480 + "true" + ")" * 480},
        ],
        "who": D_CAROL,
    }
)
async def test_property_any_command_options_are_answered_privately_and_a_refusal_changes_nothing(
    discord_bot, discord_api, call
):
    """Any subcommand and options (unknown names, wrong types, out of range, hostile text): a private answer in words; refused means unchanged."""
    pool = discord_bot.runtime.database.pool
    before = await config_snapshot(pool)
    interaction = await discord_api.invoke_command(
        "countersign",
        call["who"],
        channel_id=D_CHANNEL,
        options=[{"type": 1, "name": call["sub"], "options": call["options"]}],
    )
    kind, shown = await answer_of(discord_api, interaction)
    await settle(discord_bot)
    assert kind in (4, 5), kind
    assert shown and all(m["flags"] & EPHEMERAL for m in shown), shown
    check_command_reply("\n".join(str(m.get("content", "")) for m in shown), before, await config_snapshot(pool))


# --- forged interactions are refused and audited --------------------------------------------


async def test_forged_and_unpermitted_discord_interactions_are_refused_and_audited(
    discord_bot, discord_api, target, cards
):
    """Another server's approval, an unknown id, members without rights: refused privately, one `refused` row each."""
    pending = cards.pending
    statuses, audit, runs = (
        await approval_statuses(discord_bot, cards),
        await audit_rows(discord_bot),
        len(target.requests),
    )
    attempts = [
        # Bob in guild 1 submits a Reject form naming guild 2's approval.
        lambda: discord_api.forge_interaction(
            "modal_submit",
            {
                "custom_id": f"cs:reject-modal:{cards.foreign.approval_id}",
                "components": _form_components("reason", "x", "label"),
            },
            D_BOB,
            channel_id=D_CHANNEL,
            message_id=pending.message_id,
        ),
        # Bob clicks a button naming an approval that does not exist.
        lambda: discord_api.forge_interaction(
            "component",
            {"custom_id": f"cs:approve:{UNKNOWN_ID}", "component_type": BUTTON},
            D_BOB,
            channel_id=D_CHANNEL,
            message_id=pending.message_id,
        ),
        # Carol (a moderator) clicks the real button, but Discord says she lacks Manage Server here.
        lambda: click(discord_api, pending, D_CAROL, "approve", answered=False, permissions="0"),
        # Erin (Ops role, no rights) clicks the real Edit button.
        lambda: click(discord_api, pending, D_ERIN, "edit", answered=False),
    ]
    answers = []
    for done, attempt in enumerate(attempts, start=1):
        answers.append(await answer_of(discord_api, await attempt()))
        await _audited(discord_bot, len(audit) + done)
    await settle(discord_bot)
    texts = [shown[0]["content"] for _, shown in answers]
    assert texts == [
        msg.REFUSED_OTHER_WORKSPACE,
        msg.UNKNOWN_BUTTON,
        msg.REFUSED_NOT_PERMITTED,
        msg.REFUSED_NOT_PERMITTED,
    ]
    rows = (await audit_rows(discord_bot))[len(audit) :]
    assert [
        (r["kind"], r["actor_id"], r["workspace_id"], r["approval_id"], r["outcome"], r["reason"]) for r in rows
    ] == [
        ("refused", str(D_BOB), str(D_GUILD2), cards.foreign.approval_id, "not_permitted", "other_workspace"),
        ("refused", str(D_BOB), str(D_GUILD), UNKNOWN_ID, "unknown_approval", "no such approval"),
        ("refused", str(D_CAROL), str(D_GUILD), pending.approval_id, "not_permitted", "not_requester_or_admin"),
        ("refused", str(D_ERIN), str(D_GUILD), pending.approval_id, "not_permitted", "not_requester_or_admin"),
    ]
    assert (await approval_statuses(discord_bot, cards), len(target.requests)) == (statuses, runs)
    assert _buttons(discord_api.message(pending.message_id))


async def test_a_message_that_cannot_be_handled_is_named_without_pings_or_markdown(discord_bot, discord_api):
    """The database refuses to store the conversation of a message: the channel is told which
    message to send again, quoted on one line with its markdown escaped and its spoilers masked
    (the notice is public), and nobody is pinged."""
    assert discord_bot.runtime is not None
    pool = discord_bot.runtime.database.pool
    await pool.execute(
        """CREATE FUNCTION refuse_conversation() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN RAISE EXCEPTION 'disk full'; END; $$"""
    )
    await pool.execute(
        "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON conversations FOR EACH ROW EXECUTE FUNCTION refuse_conversation()"
    )
    said = "@everyone **deploy**\nnow ||sk-live-51Habc||"
    await discord_api.send_message(D_CHANNEL, D_ALICE, f"<@{D_BOT}> {said}", mentions=[D_BOT], guild_id=D_GUILD)
    [told] = await discord_api.wait_for_request("POST", _MESSAGES)
    content = told.json["content"]
    assert content.startswith("Something went wrong on my side and I could not answer your message “"), content
    assert r"@everyone \*\*deploy\*\* now ▒▒▒”. Please send it again" in content  # the spoiler stays hidden
    assert "sk-live" not in content
    assert _pings_nobody(told.json.get("allowed_mentions"))
