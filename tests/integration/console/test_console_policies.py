"""Trying policies in the terminal (docs/decisions/0026): `/countersign` there, pretend teammates with `/as`, the prompt.

The real core on a real PostgreSQL, the console adapter driven by a scripted reader (a list of
lines) or, where something must happen while a prompt waits, by a reader the test types into.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from langchain_core.messages import AIMessage

from adapters.console import ConsoleChat, ConsolePlatform
from adapters.words.decisions import REFUSED_ESCALATION_EDIT
from bot.audit.entries import AuditKind
from bot.base.conversation import Actor, ConversationRef
from bot.reviews.decisions import Approve
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools
from bot.tools.registry import ToolRegistry
from tests.e2e.agent_script import agent_script
from tests.standins.gemini import GeminiStandIn
from tests.support.barriers import wait_until
from tests.support.bot_process import chat_env, run_chat
from tests.support.http_target import HttpTarget
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import open_service

OPERATOR = "olga"
"""The person at the terminal in these tests (the OS user in `countersign chat`)."""
SENT = {"to": "bob", "body": "hi", "urgent": False}
TERMINAL = ConversationRef(platform="console", workspace_id="local", channel_id="terminal")


def send(to: str = "bob") -> dict:
    return tool_call("send", {"to": to, "body": "hi"})


class Terminal:
    """A scripted reader that records every prompt; lines are given up front or typed while it waits."""

    def __init__(self, *lines: str, end: bool = True) -> None:
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.prompts: list[str] = []
        self.type(*lines)
        if end:
            self.lines.put_nowait(None)

    def type(self, *lines: str) -> None:
        for line in lines:
            self.lines.put_nowait(line)

    async def read(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        return await self.lines.get()

    def questions(self) -> list[str]:
        return [p for p in self.prompts if "[a]pprove" in p]


def chat(h, terminal: Terminal) -> ConsoleChat:
    return ConsoleChat(h.service, h.platform, read=terminal.read, admin=h.admin)


def console(out: list[str]) -> ConsolePlatform:
    return ConsolePlatform(write=out.append, operator=OPERATOR)


async def run(db_url, registry, model, *lines: str) -> tuple[str, Terminal]:
    """Chat `lines` (then the end of input); return everything printed and the reader."""
    out: list[str] = []
    terminal = Terminal(*lines)
    async with open_service(db_url, model, registry, console(out)) as h:
        await asyncio.wait_for(chat(h, terminal).run(), 120)
    return "\n".join(out), terminal


async def test_every_countersign_subcommand_works_in_the_terminal(db_url, registry):
    """help, show, policy, quorum, self-approval, approvers, admins, expiry, trust, escalate, cards, scope, agent, audit."""
    text, _ = await run(
        db_url,
        registry,
        ScriptedChatModel(replies=[]),
        "/countersign help",
        "/countersign policy lookup review when args.query == 'secret'",
        "/countersign quorum send 2",
        "/countersign self-approval off for send",
        "/countersign approvers add @alice for send",
        "/countersign admins add @bob",
        "/countersign expiry 30m",
        "/countersign trust send up-to 30m matching to",
        "/countersign escalate send after 10m to @carol",
        "/countersign cards channel #approvals",
        "/countersign scope channel",
        "/countersign agent subagents in #terminal",
        "/countersign show",
        "/countersign audit limit 5",
        "/countersign audit send @olga",
    )
    assert "Countersign settings" in text and "/countersign approvers add|remove <@name> [for <tool>]" in text
    assert "In the terminal: people are @name and channels #name" in text and "/as <name>" in text
    assert "Updated policy for `lookup`: review when args.query == 'secret' (was: not set)" in text
    assert "Updated quorum for `send`: 2 (was: not set)" in text
    assert "Updated self-approval for `send`: off (was: not set)" in text
    assert "Updated approvers for `send`: @alice (was: not set)" in text
    assert "Updated admins: @bob (was: not set)" in text
    assert "Updated expiry: 30m (was: not set)" in text
    assert "Updated trust for `send`: up to 30m, matching `to` (was: not set)" in text
    assert "Updated escalation for `send`: after 10m to @carol (was: not set)" in text
    assert "Updated cards: channel #approvals (was: not set)" in text
    assert "In the terminal cards are still asked at the prompt, which says where the card went." in text
    assert "the scope changes nothing here" in text
    assert "Updated agent in #terminal: subagents (was: not set)" in text
    assert "Effective policy for #terminal" in text
    assert "• `lookup`: review when args.query == 'secret' (workspace)" in text
    assert "quorum 2 · self-approval off · approvers @alice · trust up to 30m, matching `to` · " in text
    assert "escalates after 10m to @carol" in text and "Bot admins: @bob" in text
    assert "Cards: in #approvals · Scope: channel · Agent: subagents (channel)" in text
    assert "Audit log (newest first, 5 entries)" in text and "config · cards · @olga" in text
    assert "config · quorum · @olga · `send`" in text
    assert "!  " not in text


async def test_a_pretend_teammate_is_no_admin_and_a_bad_command_changes_nothing(db_url, registry):
    """`/as bob` may read but not change; a malformed or unknown command is one `!  ` line (a malformed one with its
    usage indented below it, as docs/admin-commands.md says); nothing changed."""
    text, terminal = await run(
        db_url,
        registry,
        ScriptedChatModel(replies=[]),
        "/as bob",
        "/countersign quorum send 2",
        "/countersign audit",
        "/countersign show",
        "/as @bob smith",
        "/as",
        "/countersign quorum send lots",
        "/countersign quorum nothing 2",
        "/countersign frobnicate",
        "/countersign escalate send after 10m to <@U123>",
        "/frobnicate",
        "/countersign show",
        "/countersign audit",
    )
    lines = text.splitlines()
    refusals = [line for line in lines if line.startswith("!  ")]
    assert refusals == [
        "!  Only admins can do that: the person at the terminal, and bot admins. Nothing was changed.",
        "!  Only admins can do that: the person at the terminal, and bot admins. Nothing was changed.",
        "!  `@bob smith` is not a name: use letters, digits and . _ - (at most 64), like /as bob.",
        "!  That did not work: the quorum must be a whole number from 1 to 10. Nothing was changed.",
        "!  That did not work: unknown tool `nothing`; the tools are: lookup, send, explode, wipe. Nothing was changed.",
        "!  That did not work: unknown subcommand `frobnicate`; try `help`. Nothing was changed.",
        "!  That did not work: `<@U123>` is not a person, group, role or channel; name it as @someone or #channel. "
        "Nothing was changed.",
        "!  The terminal knows /countersign ..., /as [name], /help and /quit, not `/frobnicate`. "
        "To send a message starting with /, put a space before it.",
    ]
    bad_quorum = lines.index(refusals[3])
    assert lines[bad_quorum + 1].startswith("   Usage: `/countersign quorum ")
    assert "   You are now bob: what you type and decide is bob's." in text
    assert "   You are yourself again (olga, the admin here)." in text
    assert text.count("Quorum: 1 · Self-approval: on · Expiry: off") == 2
    assert "refused · not_an_admin · @bob · `/countersign quorum`" in text
    assert "Updated" not in text and "Traceback" not in text
    assert "bob> " in terminal.prompts and terminal.prompts[-1] == "you> "


async def test_a_policy_set_in_the_terminal_governs_the_next_calls(db_url, registry, tool_log):
    """A conditional review asks only for the matching lookup; deny here refuses send without a card; default restores it."""
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("lookup", {"query": "weather"})),
            AIMessage("weather found"),
            calls(tool_call("lookup", {"query": "secret"})),
            AIMessage("secret found"),
            calls(send()),
            AIMessage("send is off"),
            calls(send()),
            AIMessage("not sent"),
        ]
    )
    text, terminal = await run(
        db_url,
        registry,
        model,
        "/countersign policy lookup review when args.query == 'secret'",
        "look up the weather",
        "look up the secret",
        "a",
        "/countersign policy send deny in #terminal",
        "send hi to bob",
        "/countersign policy send default in #terminal",
        "send hi to bob",
        "r",
        "",
    )
    assert tool_log.calls == [("lookup", {"query": "weather"}), ("lookup", {"query": "secret"})]
    assert len(terminal.questions()) == 2
    assert text.count("?  lookup wants to run") == 1 and text.count("?  send wants to run") == 1
    assert '   args: {"query": "secret"}' in text and "   lookup: approved by @olga" in text
    assert "bot> weather found" in text and "bot> secret found" in text and "bot> send is off" in text
    assert "Updated policy for `send` in #terminal: deny (was: not set)" in text
    assert "   send: rejected by @olga" in text and "bot> not sent" in text
    assert "Rejected by policy: the tool send may not be used here." in str(model.prompts[5])
    assert "!  " not in text


async def test_the_terminal_prints_every_argument_whole_in_order(db_url, registry, tool_log):
    """A 10,000-character body is printed whole as indented JSON in the tool's order, a right-to-left override as an escape."""
    args = {"urgent": True, "body": "line " * 2_000 + "\u202e" + "evil@attacker.example", "to": "bob"}
    model = ScriptedChatModel(replies=[calls(tool_call("send", args)), AIMessage("sent")])
    text, _ = await run(db_url, registry, model, "send it", "a")
    lines = text.splitlines()
    start = lines.index("   args:")
    end = lines.index("     }", start)
    printed = "\n".join(line.removeprefix("     ") for line in lines[start + 1 : end + 1])
    assert list(json.loads(printed)) == ["to", "body", "urgent"]  # the tool's own order
    assert json.loads(printed) == args  # every character: the escape reads back as what runs
    assert "\u202e" not in text and "\\u202eevil@attacker.example" in printed
    assert tool_log.calls == [("send", args)]


async def test_the_terminal_shows_control_and_line_breaking_characters_as_escapes(db_url, registry, tool_log):
    """A terminal escape and line separators in the model's why, the arguments, a reason and the audit print as escapes."""
    args = {"to": "bob", "body": 'hi\u2028"urgent": true'}
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", args), text="\x1b[2Jsending\u2028now"), AIMessage("not sent")]
    )
    text, _ = await run(db_url, registry, model, "send it", "r", "no\u2029way", "/countersign audit limit 3")
    assert "\x1b" not in text and "\u2028" not in text and "\u2029" not in text
    assert "   why: \\u001b[2Jsending\\u2028now" in text
    assert '   args: {"to": "bob", "body": "hi\\u2028\\"urgent\\": true"}' in text
    assert "   send: rejected by @olga (no\\u2029way)" in text
    assert '`{"to":"bob","body":"hi\\u2028\\"urgent\\": true"}` · no\\u2029way' in text
    assert tool_log.calls == []


async def test_an_edit_the_audit_and_trust_list_print_arguments_in_the_tools_order(db_url):
    """The edit's confirmation, `audit` and `trust list` print `method`, `url`, `body` as the card does, not as stored."""
    async with HttpTarget() as target:
        url = target.url("/things")
        registry = ToolRegistry(builtin_tools(ToolSettings(http_allowed_hosts=(target.host,))))
        post = {"body": {"name": "widget"}, "url": url, "method": "POST"}
        model = ScriptedChatModel(
            replies=[
                calls(tool_call("http_request", post)),
                AIMessage("posted"),
                calls(tool_call("http_request", {**post, "body": {"name": "gadget"}})),
                AIMessage("posted again"),
            ]
        )
        edited = json.dumps({"body": {"name": "gizmo"}, "url": url, "method": "POST"})
        text, _ = await run(
            db_url,
            registry,
            model,
            "post a widget",
            "e",
            edited,
            "/countersign trust http_request up-to 30m",
            "post a gadget",
            "t",
            "/countersign audit http_request limit 1",
            "/countersign trust list",
        )
    in_order = f'"method": "POST", "url": "{url}", "body": {{"name": "gizmo"}}'
    assert f"   http_request: edited by @olga with {{{in_order}}}" in text, text
    compact = f'{{"method":"POST","url":"{url}","body":{{"name":"gadget"}}}}'
    assert text.count(compact) == 2  # the audit's approval and the trust it granted
    assert [r.json for r in target.requests] == [{"name": "gizmo"}, {"name": "gadget"}]


async def test_quorum_of_two_with_two_pretend_approvers(db_url, registry, tool_log):
    """alice approves (1 of 2, asked again, her second vote refused), dave is refused, bob's approval runs the call."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("sent")])
    text, terminal = await run(
        db_url,
        registry,
        model,
        "/countersign quorum send 2",
        "/countersign approvers add @alice for send",
        "/countersign approvers add @bob for send",
        "/countersign self-approval off for send",
        "send hi to bob",
        "a",
        "/as alice",
        "a",
        "a",
        "/as dave",
        "a",
        "/as bob",
        "a",
    )
    refusals = [line for line in text.splitlines() if line.startswith("!  ")]
    assert refusals == [
        "!  You asked for this call, and self-approval is off for this tool, so someone else must approve it.",
        "!  You already approved this; each person counts once, so it now needs someone else (/as ...).",
        "!  You can't decide this: you are not on the approvers list for this tool.",
    ]
    assert tool_log.calls == [("send", SENT)]
    assert "   Your approval is recorded (1 of 2); the call runs once 2 people approved it." in text
    assert "   approvals: 0 of 2" in text and "   approvals: 1 of 2 (@alice)" in text
    assert "   send: approved by @bob" in text and "bot> sent" in text
    question = "[a]pprove / [e]dit / [r]eject? "
    assert terminal.questions() == [
        *[f"   {question}"] * 2,
        *[f"   as alice: {question}"] * 3,
        *[f"   as dave: {question}"] * 2,
        f"   as bob: {question}",
    ]
    assert terminal.prompts[-1] == "bob> "


async def test_self_approval_off_refuses_the_requester_until_someone_else_approves(db_url, registry, tool_log):
    """The operator's own call is refused with self-approval off; bob is refused until made a bot admin at the prompt."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("sent")])
    text, _ = await run(
        db_url,
        registry,
        model,
        "/countersign self-approval off",
        "send hi to bob",
        "a",
        "/as bob",
        "a",
        "/as",
        "/countersign admins add @bob",
        "/as bob",
        "a",
    )
    refusals = [line for line in text.splitlines() if line.startswith("!  ")]
    assert refusals == [
        "!  You asked for this call, and self-approval is off for this tool, so someone else must approve it.",
        "!  You can't decide this: only the person who asked, the person at the terminal and bot admins can "
        "(/as someone who may).",
    ]
    assert "?  send wants to run (1 of 1), asked by @olga" in text
    assert "Updated admins: @bob (was: not set)" in text
    assert "   send: approved by @bob" in text and tool_log.calls == [("send", SENT)]


async def test_trust_is_offered_where_it_applies_and_reused_by_the_same_requester(db_url, registry, tool_log):
    """[t]rust shows with a trust setting at quorum 1; bob's trusted call runs again without a card, carol's does not."""
    model = ScriptedChatModel(
        replies=[
            calls(send()),
            AIMessage("sent"),
            calls(send()),
            AIMessage("sent again"),
            calls(send()),
            AIMessage("carol's"),
            calls(send()),
            AIMessage("twice"),
        ]
    )
    text, terminal = await run(
        db_url,
        registry,
        model,
        "/countersign trust send up-to 30m",
        "/as bob",
        "send hi to bob",
        "/as",
        "t",
        "/as bob",
        "send hi to bob again",
        "/as carol",
        "send hi to bob",
        "/as",
        "a",
        "/countersign quorum send 2",
        "/as bob",
        "send hi to bob once more",
        "/as",
        "t",
        "a",
        "/countersign admins add @carol",
        "/as carol",
        "a",
        "/as",
        "/countersign trust list",
    )
    assert tool_log.calls == [("send", SENT)] * 4
    trust = "[a]pprove / [t]rust for 30 minutes / [e]dit / [r]eject? "
    plain = "[a]pprove / [e]dit / [r]eject? "
    assert terminal.questions() == [
        f"   as bob: {trust}",
        f"   {trust}",
        f"   as carol: {trust}",
        f"   {trust}",
        f"   as bob: {plain}",
        *[f"   {plain}"] * 4,
        f"   as carol: {plain}",
    ]
    assert "   send: approved and trusted for 30 minutes by @olga" in text
    assert "bot> sent again" in text and text.count("asked by @bob") == 3 and text.count("asked by @carol") == 1
    assert "!  Answer a, e or r (or /quit to leave; the call waits until next time)." in text
    assert "Live trusts" in text and "`send` for @bob in #terminal" in text and "by @olga" in text


async def test_escalation_to_a_pretend_person_who_then_decides(db_url, registry, tool_log):
    """carol may not decide bob's card until it escalates to her while the prompt waits; then she approves it."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("sent")])
    out: list[str] = []
    terminal = Terminal(
        "/countersign self-approval off",
        "/countersign escalate send after 10m to @carol",
        "/as bob",
        "send hi to bob",
        "a",
        "/as carol",
        "a",
        end=False,
    )
    async with open_service(db_url, model, registry, console(out)) as h:
        running = asyncio.create_task(chat(h, terminal).run())
        # bob is refused (asked again), types /as carol (asked again), carol is refused: the fourth question waits.
        await wait_until(lambda: len(terminal.questions()) == 4 and terminal.lines.empty(), "carol's prompt")
        await _due_now(db_url, "escalate_at")
        h.service.escalation.wake()
        await wait_until(lambda: any("escalated" in line for line in out), "the escalation")
        terminal.type("t", "a")
        await wait_until(lambda: "bot> sent" in out, "the answer")
        terminal.type("/as", "/countersign audit send", "/quit")
        await asyncio.wait_for(running, 60)
        audit = await h.audit.recent("local", limit=20)
    text = "\n".join(out)
    refusals = [line for line in text.splitlines() if line.startswith("!  ")]
    assert refusals == [
        "!  You asked for this call, and self-approval is off for this tool, so someone else must approve it.",
        "!  You can't decide this: only the person who asked, the person at the terminal and bot admins can "
        "(/as someone who may).",
        "!  Answer a, e or r (or /quit to leave; the call waits until next time).",
    ]
    assert "↑  send (1 of 1) was escalated to @carol, who may decide it now (/as carol)." in text
    assert "   send: approved by @carol" in text and tool_log.calls == [("send", SENT)]
    assert "escalation · escalated · system · `send` · to @carol" in text
    [approved] = [e for e in audit if e.kind is AuditKind.DECISION]
    assert approved.actor_id == "carol" and approved.detail["via"] == "escalation"


async def test_the_escalation_audience_at_the_prompt_may_approve_but_not_edit(db_url, registry, tool_log):
    """Escalated to carol: her edit is refused and changes nothing; her approval runs bob's call as he asked for it."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("sent")])
    out: list[str] = []
    terminal = Terminal(
        "/countersign self-approval off",
        "/countersign escalate send after 10m to @carol",
        "/as bob",
        "send hi to bob",
        "/as carol",
        end=False,
    )
    async with open_service(db_url, model, registry, console(out)) as h:
        running = asyncio.create_task(chat(h, terminal).run())
        await wait_until(lambda: len(terminal.questions()) == 2 and terminal.lines.empty(), "carol's prompt")
        await _due_now(db_url, "escalate_at")
        h.service.escalation.wake()
        await wait_until(lambda: any("escalated" in line for line in out), "the escalation")
        terminal.type("e", '{"to": "carol", "body": "mine now"}', "a")
        await wait_until(lambda: "bot> sent" in out, "the answer")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
    refusals = [line for line in "\n".join(out).splitlines() if line.startswith("!  ")]
    assert refusals == ["!  " + REFUSED_ESCALATION_EDIT], refusals
    assert tool_log.calls == [("send", SENT)]


async def test_a_card_that_expires_while_the_prompt_waits_is_reported_and_left(db_url, registry, tool_log):
    """The prompt gives up on an expired card (nothing runs), the model hears it, and the next prompt is for a message."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("it expired")])
    out: list[str] = []
    terminal = Terminal("/countersign expiry 10m", "send hi to bob", end=False)
    async with open_service(db_url, model, registry, console(out)) as h:
        running = asyncio.create_task(chat(h, terminal).run())
        await wait_until(lambda: len(terminal.questions()) == 1, "the prompt")
        await _due_now(db_url, "expires_at")
        h.service.expiry.wake()
        await wait_until(lambda: "bot> it expired" in out and terminal.prompts[-1] == "you> ", "the next prompt")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
    text = "\n".join(out)
    assert "   expires in 10 minutes without a decision" in text
    assert "!  The request to run send expired without a decision." in text and "   send: expired" in text
    assert tool_log.calls == [] and "expired without a decision" in str(model.prompts[-1])
    assert len(terminal.questions()) == 1


async def test_approve_all_decides_every_waiting_call_of_a_pause(db_url, registry, tool_log):
    """Two calls in one pause: the prompt offers [A]pprove all 2; dave's batch is left pending, the operator's runs both."""
    model = ScriptedChatModel(replies=[calls(send("ann"), send("ben")), AIMessage("both sent")])
    text, terminal = await run(db_url, registry, model, "send two", "/as dave", "A", "/as", "A")
    question = "[a]pprove / [e]dit / [r]eject / [A]pprove all 2 / [R]eject all 2? "
    assert terminal.questions() == [f"   {question}", *[f"   as dave: {question}"] * 2, f"   {question}"]
    assert "!  Left pending: send (1). You can't decide this: only the person who asked" in text
    assert "!  Left pending: send (2). You can't decide this: only the person who asked" in text
    assert "   Approved: send (1), send (2)." in text and "bot> both sent" in text
    assert [args["to"] for _, args in tool_log.calls] == ["ann", "ben"]


async def test_approve_all_is_offered_only_once_every_waiting_call_was_printed(db_url, registry, tool_log):
    """Two calls in one pause: before [A]pprove all is offered, the second call's arguments are printed too."""
    model = ScriptedChatModel(replies=[calls(send("ann"), send("ben@example.com")), AIMessage("both sent")])
    text, terminal = await run(db_url, registry, model, "send two", "A")
    assert terminal.questions() == ["   [a]pprove / [e]dit / [r]eject / [A]pprove all 2 / [R]eject all 2? "]
    before_answer = text[: text.index("   Approved: send (1), send (2).")]
    assert "   (2 of 2) send" in before_answer
    assert '"to": "ben@example.com"' in before_answer  # what Approve all also decides, shown before it
    assert [args["to"] for _, args in tool_log.calls] == ["ann", "ben@example.com"]


async def test_reject_all_asks_for_one_reason(db_url, registry, tool_log):
    """[R]eject all with a reason rejects every waiting call; the model reads the reason for each."""
    model = ScriptedChatModel(replies=[calls(send("ann"), send("ben")), AIMessage("none sent")])
    text, terminal = await run(db_url, registry, model, "send two", "R", "not today")
    assert "   Rejected: send (1), send (2)." in text and tool_log.calls == []
    assert str(model.prompts[-1]).count("not today") == 2
    assert len(terminal.questions()) == 1


async def test_countersign_stop_at_a_prompt_for_the_requester_not_for_another_teammate(db_url, registry, tool_log):
    """carol may not stop bob's waiting turn (refused, the card still asked); bob may: the card closes, nothing runs."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("never said")])
    out: list[str] = []
    terminal = Terminal("/as bob", "send hi to bob", "/as carol", "/countersign stop", end=False)
    async with open_service(db_url, model, registry, console(out)) as h:
        running = asyncio.create_task(chat(h, terminal).run())
        await wait_until(lambda: len(terminal.questions()) == 3 and terminal.lines.empty(), "carol's prompt")
        assert len(await h.service.pending_approvals(TERMINAL)) == 1
        terminal.type("/as bob", "/countersign stop")
        await wait_until(lambda: any(line.startswith("■  Stopped by") for line in out), "the stop")
        await wait_until(lambda: terminal.prompts[-1] == "bob> ", "the message prompt")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
        pending = await h.service.pending_approvals(TERMINAL)
    text = "\n".join(out)
    refusals = [line for line in text.splitlines() if line.startswith("!  ")]
    assert refusals == [
        "!  You can't stop this turn: only the person who asked (@bob) and the person at the terminal, "
        "and bot admins, can."
    ]
    assert "Stopped. 1 card waiting for a decision was closed as stopped" in text
    assert "   send: stopped by @bob" in text and "■  Stopped by @bob." in text
    assert tool_log.calls == [] and pending == [] and "bot> never said" not in text
    assert terminal.questions() == [
        "   as bob: [a]pprove / [e]dit / [r]eject? ",
        "   as carol: [a]pprove / [e]dit / [r]eject? ",
        "   as carol: [a]pprove / [e]dit / [r]eject? ",
        "   as bob: [a]pprove / [e]dit / [r]eject? ",
    ]


async def test_a_card_decided_elsewhere_is_not_asked_again(db_url, registry, tool_log):
    """A card decided while its prompt waits ends that prompt; the next card of the pause is asked."""
    model = ScriptedChatModel(replies=[calls(send("ann"), send("ben")), AIMessage("done")])
    out: list[str] = []
    terminal = Terminal("send two", end=False)
    async with open_service(db_url, model, registry, console(out)) as h:
        running = asyncio.create_task(chat(h, terminal).run())
        await wait_until(lambda: len(terminal.questions()) == 1, "the first prompt")
        first, _ = await h.service.pending_approvals(TERMINAL)
        somewhere_else = Actor(platform="console", workspace_id="local", user_id=OPERATOR, display_name=OPERATOR)
        await h.service.decide(first.id, somewhere_else, Approve())
        await wait_until(lambda: len(terminal.questions()) == 2, "the second prompt")
        terminal.type("a", "/quit")
        await asyncio.wait_for(running, 60)
    text = "\n".join(out)
    assert text.count("?  send wants to run") == 2 and "(2 of 2)" in text
    assert terminal.questions()[1] == "   [a]pprove / [e]dit / [r]eject? "
    assert [args["to"] for _, args in tool_log.calls] == ["ann", "ben"] and "bot> done" in text


_DUE_NOW = {
    "expires_at": "UPDATE approvals SET expires_at = $1 WHERE expires_at IS NOT NULL AND status = 'pending'",
    "escalate_at": "UPDATE approvals SET escalate_at = $1 WHERE escalate_at IS NOT NULL AND status = 'pending'",
}


async def _due_now(db_url: str, column: str) -> None:
    """Bring every waiting card's `column` (`expires_at`, `escalate_at`) to a moment ago."""
    connection = await asyncpg.connect(db_url)
    try:
        await connection.execute(_DUE_NOW[column], datetime.now(UTC) - timedelta(seconds=1))
    finally:
        await connection.close()


@pytest.mark.e2e
async def test_trying_a_policy_in_a_real_countersign_chat(db_url, tmp_path):
    """`countersign chat`, the example session of docs/admin-commands.md: quorum 2 decided by the operator and a pretend bob (an
    approver of the tool, not an admin: his settings change is refused), then trust at the prompt, reused."""
    async with (
        HttpTarget() as target,
        GeminiStandIn(agent_script(target.url()), api_key="k") as gemini,
    ):
        env = chat_env(gemini_url=gemini.base_url, allowed_host=target.host, db_url=db_url)
        lines = [
            "/countersign quorum http_request 2",
            "/countersign approvers add @bob for http_request",
            "post widget",
            "a",
            "/as bob",
            "a",
            "/countersign quorum http_request 1",
            "/as",
            "/countersign quorum http_request 1",
            "/countersign trust http_request up-to 30m matching method,url",
            "post gadget",
            "t",
            "post gizmo",
            "/countersign frobnicate",
            "/countersign show",
            "/quit",
        ]
        code, text, err = await run_chat(env, tmp_path, "\n".join(lines).encode() + b"\n")
    assert code == 0, err
    assert [r.json for r in target.requests] == [{"name": "widget"}, {"name": "gadget"}, {"name": "gizmo"}]
    assert "/as <name> acts as a pretend teammate" in text
    assert "Your approval is recorded (1 of 2)" in text and "approvals: 1 of 2 (@" in text
    assert "as bob: [a]pprove / [e]dit / [r]eject? " in text and "http_request: approved by @bob" in text
    assert "[a]pprove / [t]rust for 30 minutes / [e]dit / [r]eject? " in text
    assert re.search(r"http_request: approved and trusted for 30 minutes by @\S+", text)
    assert text.count("http_request wants to run") == 3  # widget before and after the first vote, gadget
    assert "!  That did not work: unknown subcommand `frobnicate`" in text
    assert "http_request`: review when" in text and "trust up to 30m, matching `method`,`url`" in text
    assert "Updated approvers for `http_request`: @bob (was: not set)" in text
    assert "!  Only admins can do that: the person at the terminal, and bot admins. Nothing was changed." in text
    assert "Traceback" not in text + err


class _LooksHeld:
    """The real service, with its next look at one approval (`approval`) held until the test lets it go."""

    def __init__(self, service) -> None:
        self._service = service
        self.held = asyncio.Event()
        self.arrived = asyncio.Event()
        self.armed = False

    def __getattr__(self, name: str):
        return getattr(self._service, name)

    async def approval(self, approval_id: str, **kwargs):
        if self.armed:
            self.armed = False
            self.arrived.set()
            await self.held.wait()
        return await self._service.approval(approval_id, **kwargs)


async def test_a_line_typed_as_the_card_is_decided_elsewhere_is_answered_not_dropped(db_url, registry, tool_log):
    """`a` typed while the prompt looks at a change to its card (decided elsewhere): the line is
    still taken, and the person is told the card is already decided (it was dropped silently)."""
    model = ScriptedChatModel(replies=[calls(send()), AIMessage("done")])
    out: list[str] = []
    terminal = Terminal("send one", end=False)
    async with open_service(db_url, model, registry, console(out)) as h:
        service = _LooksHeld(h.service)
        running = asyncio.create_task(ConsoleChat(service, h.platform, read=terminal.read, admin=h.admin).run())
        await wait_until(lambda: len(terminal.questions()) == 1, "the prompt")
        [card] = await h.service.pending_approvals(TERMINAL)
        service.armed = True
        somewhere_else = Actor(platform="console", workspace_id="local", user_id=OPERATOR, display_name=OPERATOR)
        await h.service.decide(card.id, somewhere_else, Approve())
        await asyncio.wait_for(service.arrived.wait(), 60)  # the prompt looks at the change
        terminal.type("a")
        await wait_until(terminal.lines.empty, "the line read")  # read while the look is held
        service.held.set()
        await wait_until(lambda: any("already approved" in line for line in out), "the late answer's refusal")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
    text = "\n".join(out)
    assert [args["to"] for _, args in tool_log.calls] == ["bob"] and "bot> done" in text
    assert re.search(r"^!  This was already approved by @olga at \d\d:\d\d\. Nothing was changed\.$", text, re.M)
