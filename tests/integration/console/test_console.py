"""The terminal adapter: the same core, approvals as prompts."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from langchain_core.messages import AIMessage

from adapters.console import ConsoleChat, ConsolePlatform
from bot.base.agent_kind import AgentKind
from tests.e2e.agent_script import agent_script
from tests.integration.agents.test_subagents_service import SPECS, team, to_alpha
from tests.standins.gemini import GeminiStandIn
from tests.support.bot_process import chat_env, run_chat, start_chat
from tests.support.gate import Gate
from tests.support.http_target import HttpTarget
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import open_service
from tests.support.tools import ToolLog, make_test_registry


def reader(lines: list[str]):
    queue = list(lines)

    async def read(prompt: str) -> str | None:
        return queue.pop(0) if queue else None

    return read


async def test_edit_after_a_bad_json_attempt_then_answer(db_url):
    """Invalid JSON re-prompts; the edited arguments run; the answer is printed."""
    log = ToolLog()
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("sent to eve")])
    out: list[str] = []
    platform = ConsolePlatform(write=out.append)
    async with open_service(db_url, model, make_test_registry(log), platform) as h:
        chat = ConsoleChat(
            h.service,
            platform,
            read=reader(["send hi to bob", "e", "{not json", "e", "[]", "e", '{"to": "eve", "body": "hi"}', "/quit"]),
        )
        await chat.run()
    assert log.calls == [("send", {"to": "eve", "body": "hi", "urgent": False})]
    text = "\n".join(out)
    assert "send wants to run" in text and "Not valid JSON" in text and "must be a JSON object" in text
    assert "edited by" in text and "bot> sent to eve" in text


async def test_reject_with_reason(db_url):
    """Rejecting at the prompt runs nothing and the model hears the reason."""
    log = ToolLog()
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("ok, not sent")]
    )
    out: list[str] = []
    platform = ConsolePlatform(write=out.append)
    async with open_service(db_url, model, make_test_registry(log), platform) as h:
        await ConsoleChat(h.service, platform, read=reader(["send", "r", "not today", "/quit"])).run()
    assert log.calls == []
    assert "not today" in str(model.prompts[-1])
    assert "bot> ok, not sent" in out


async def test_quit_at_the_approval_prompt_leaves_and_the_call_waits(db_url):
    """Other text at the prompt is answered, /quit there leaves at once; nothing ran, the card still waits."""
    log = ToolLog()
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}))])
    out: list[str] = []
    platform = ConsolePlatform(write=out.append)
    async with open_service(db_url, model, make_test_registry(log), platform) as h:
        lines = ["send", "maybe later", "/quit", "this line is never read"]
        read = reader(lines)
        await ConsoleChat(h.service, platform, read=read).run()
        pending = await h.database.pool.fetchval("SELECT count(*) FROM approvals WHERE status = 'pending'")
    assert log.calls == [] and pending == 1
    assert "Answer a, e or r" in "\n".join(out) and "you are asked again next time" in "\n".join(out)
    assert await read("next") == "this line is never read"


async def test_ctrl_c_at_the_approval_prompt_says_the_call_waits(db_url):
    """Ctrl-C (or SIGTERM) at the prompt stops the bot: the prompt says the call waits, as Ctrl-D does; nothing ran."""
    log = ToolLog()
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}))])
    out: list[str] = []
    platform = ConsolePlatform(write=out.append)
    asked = asyncio.Event()

    async def read(prompt: str) -> str | None:
        if prompt.startswith("you>") and not asked.is_set():
            return "send"
        asked.set()
        await asyncio.Event().wait()  # the person at the prompt types nothing
        return None

    async with open_service(db_url, model, make_test_registry(log), platform) as h:
        chat = asyncio.ensure_future(ConsoleChat(h.service, platform, read=read).run())
        await asyncio.wait_for(asked.wait(), 30)
        chat.cancel()  # what Ctrl-C at a prompt does: the bot stops
        with pytest.raises(asyncio.CancelledError):
            await chat
        pending = await h.database.pool.fetchval("SELECT count(*) FROM approvals WHERE status = 'pending'")
    assert log.calls == [] and pending == 1
    assert "The call waits; you are asked again next time." in "\n".join(out)


async def test_trust_at_the_prompt_lets_the_same_call_run_without_asking(db_url):
    """`/countersign trust` typed here; the prompt offers [t]rust; the same call then runs without a prompt."""
    log = ToolLog()
    send = {"to": "bob", "body": "hi"}
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", send)), AIMessage("sent"), calls(tool_call("send", send)), AIMessage("again")]
    )
    out: list[str] = []
    prompts: list[str] = []
    lines = ["/countersign trust send up-to 30m", "send", "x", "t", "send again", "/countersign trust list", "/quit"]
    read = reader(lines)

    async def asked(prompt: str) -> str | None:
        prompts.append(prompt)
        return await read(prompt)

    platform = ConsolePlatform(write=out.append)
    async with open_service(db_url, model, make_test_registry(log), platform) as h:
        await ConsoleChat(h.service, platform, read=asked, admin=h.admin).run()
    text = "\n".join(out)
    assert log.calls == [("send", {**send, "urgent": False})] * 2
    assert "Updated trust for `send`: up to 30m, the same arguments" in text
    assert [p for p in prompts if "rust" in p] == ["   [a]pprove / [t]rust for 30 minutes / [e]dit / [r]eject? "] * 2
    assert "Answer a, t, e or r" in text
    assert "approved and trusted for 30 minutes by" in text and "bot> again" in text
    assert "Live trusts" in text and "`send` for" in text


@pytest.mark.e2e
async def test_countersign_chat_in_a_real_terminal_session(db_url, tmp_path):
    """`countersign chat` with the Gemini stand-in: a gated POST is approved at the prompt and runs once; text the
    model sends back with control characters (a terminal title sequence, a bell) is printed escaped, and `/quit` typed
    as a rejection's reason rejects nothing."""
    async with (
        HttpTarget() as target,
        GeminiStandIn(agent_script(target.url()), api_key="k") as gemini,
    ):
        env = chat_env(gemini_url=gemini.base_url, allowed_host=target.host, db_url=db_url)
        typed = b"post widget\na\nhi \x1b]0;pwned\x07 there\npost gadget\nr\n/quit\n/quit\n"
        code, text, err = await run_chat(env, tmp_path, typed, timeout=60)
    assert code == 0, err
    assert "\x1b" not in text and "\x07" not in text
    assert "bot> You said: hi \\x1b]0;pwned\\x07 there" in text
    assert "!  Not rejected: `/quit` is a command, not a reason. The call still waits." in text
    assert "rejected by" not in text and "The call waits; you are asked again next time." in text
    assert "http_request wants to run" in text
    assert "approved by" in text
    assert "bot> Result:" in text and "widget" in text
    assert [r.json for r in target.requests] == [{"name": "widget"}]


async def test_the_subagents_agent_in_the_terminal(db_url):
    """Subagents in the terminal: one line per delegation, the prompt names the subagent, the approved call runs once."""
    log = ToolLog()
    out: list[str] = []
    platform = ConsolePlatform(write=out.append)
    model = team(to_alpha)
    async with open_service(
        db_url, model, make_test_registry(log), platform, subagents=SPECS, default_agent=AgentKind.SUBAGENTS
    ) as h:
        await ConsoleChat(
            h.service, platform, read=reader(["/countersign show", "bob", "a", "/quit"]), admin=h.admin
        ).run()
    text = "\n".join(out)
    assert log.calls == [("send", {"to": "bob", "body": "alpha", "urgent": False})]
    assert text.count("… alpha is working: bob") == 1 and text.count("… alpha continues after the decision") == 1
    assert "alpha wants to call send (1 of 1), asked by" in text
    assert "bot> answer: alpha reports: sent to bob" in text
    assert "alpha's send: approved by" in text
    assert "Effective policy for #terminal" in text and "countersign show" not in str(model.prompts)


async def test_context_and_its_reset_in_the_terminal(db_url):
    """`/countersign context` shows the terminal's conversation; `reset` clears it and the next message starts afresh."""
    from tests.integration.turns.context.test_long_conversations import Script

    model = ScriptedChatModel(script=Script())
    out: list[str] = []
    platform = ConsolePlatform(write=out.append)
    lines = ["hello", "/countersign context", "/countersign context reset", "/countersign context", "again"]
    async with open_service(db_url, model, make_test_registry(ToolLog()), platform) as h:
        await ConsoleChat(
            h.service, platform, read=reader([*lines, "/countersign context clear", "/quit"]), admin=h.admin
        ).run()
    text = "\n".join(out)
    assert "Context of this conversation (`console:local:terminal`)" in text
    assert "2 messages kept verbatim" in text
    assert "Context reset: the model starts afresh in this conversation (2 messages removed" in text
    assert "The model's view is empty (new, or reset)" in text
    assert "expected reset or nothing, got `clear`" in text
    assert [m.text for m in model.prompts[-1][1:]] == ["again"]


class _StopTools:
    """`fetch` (auto, cancellable, runs until released) and `send` (review), recording what happens."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.running = asyncio.Event()

    def registry(self):
        from langchain_core.tools import tool

        from bot.base.mode import Mode
        from bot.tools.registry import ToolRegistry, ToolSpec

        @tool
        async def fetch(url: str) -> str:
            """Fetch a page (slow; a stop may cancel it)."""
            self.running.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.events.append("fetch cancelled")
                raise
            return "never"

        @tool
        async def send(to: str, body: str) -> str:
            """Send a message to someone."""
            self.events.append(f"send {to}")
            return f"sent to {to}"

        return ToolRegistry(
            [
                ToolSpec(tool=fetch, default_mode=Mode.AUTO, cancellable=True),
                ToolSpec(tool=send, default_mode=Mode.REVIEW),
            ]
        )


async def test_ctrl_c_while_the_bot_works_stops_its_turn_and_the_chat_goes_on(db_url):
    """The first Ctrl-C during a turn stops it (the running fetch is cancelled); the chat answers the next line."""
    tools = _StopTools()
    model = ScriptedChatModel(
        replies=[calls(tool_call("fetch", {"url": "https://example.test"})), AIMessage("you said: hello")]
    )
    out: list[str] = []
    platform = ConsolePlatform(write=out.append)
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    for line in ("fetch it", "hello", "/quit"):
        lines.put_nowait(line)

    async def read(prompt: str) -> str | None:
        return await lines.get()

    async with open_service(db_url, model, tools.registry(), platform) as h:
        chat = ConsoleChat(h.service, platform, read=read, admin=h.admin)
        assert chat.interrupt() is False  # nothing runs yet: Ctrl-C leaves, as before
        running = asyncio.create_task(chat.run())
        await asyncio.wait_for(tools.running.wait(), 60)
        assert chat.interrupt() is True  # the turn's first Ctrl-C stops it
        assert chat.interrupt() is False  # a second one leaves
        await asyncio.wait_for(running, 60)
    text = "\n".join(out)
    assert tools.events == ["fetch cancelled"]
    assert "■  Stopped by" in text and "bot> you said: hello" in text
    assert text.index("■  Stopped by") < text.index("bot> you said: hello")
    assert "Cancelled:" in str(model.prompts[-1]) and "Stopped by" in str(model.prompts[-1])


async def test_countersign_stop_at_an_approval_prompt_closes_the_card(db_url):
    """`/countersign stop` instead of a/e/r: the card closes as stopped, nothing runs, the next message is answered."""
    tools = _StopTools()
    model = ScriptedChatModel(
        replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("you said: next")]
    )
    out: list[str] = []
    platform = ConsolePlatform(write=out.append)
    lines = ["/countersign stop", "send hi to bob", "/countersign stop", "next", "/quit"]
    async with open_service(db_url, model, tools.registry(), platform) as h:
        await ConsoleChat(h.service, platform, read=reader(lines), admin=h.admin).run()
        pending = await h.service.pending_approvals(conversation_of_the_terminal())
    text = "\n".join(out)
    assert tools.events == [] and pending == []
    assert "Nothing to stop: the bot is not working on anything in this conversation." in text
    assert "Stopped. 1 card waiting for a decision was closed as stopped" in text
    assert "send: stopped by" in text and "■  Stopped by" in text and "bot> you said: next" in text


def conversation_of_the_terminal():
    from bot.base.conversation import ConversationRef

    return ConversationRef(platform="console", workspace_id="local", channel_id="terminal")


@dataclass
class _MidTurn:
    """A real `countersign chat` signalled while its turn's GET is held at the target."""

    proc: asyncio.subprocess.Process
    target: HttpTarget
    gemini: GeminiStandIn
    seen: bytes
    """What it printed up to the line the test waited for."""


@contextlib.asynccontextmanager
async def _real_chat_signalled_mid_turn(
    db_url: str, tmp_path, sig: signal.Signals, says: bytes, **env: str
) -> AsyncIterator[_MidTurn]:
    """`countersign chat` with `get` typed, `sig` sent while the GET is held; entered once it printed `says`.

    The process is killed on the way out if it still runs; the GET is let go by then.
    """
    async with (
        HttpTarget() as target,
        GeminiStandIn(agent_script(target.url()), api_key="k") as gemini,
    ):
        proc = await start_chat(
            {**chat_env(gemini_url=gemini.base_url, allowed_host=target.host, db_url=db_url), **env}, tmp_path
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            target.gate.arm()
            proc.stdin.write(b"get\n")
            await proc.stdin.drain()
            await target.gate.wait_arrived()
            proc.send_signal(sig)
            seen = b""
            while says not in seen:
                line = await asyncio.wait_for(proc.stdout.readline(), 60)
                assert line, f"the chat ended before printing {says!r}: {seen.decode()}"
                seen += line
            yield _MidTurn(proc, target, gemini, seen)
        finally:
            target.gate.release()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


@pytest.mark.e2e
async def test_ctrl_c_in_a_real_terminal_session_stops_the_turn(db_url, tmp_path):
    """`countersign chat`: SIGINT while an ungated GET runs stops the turn; the chat goes on, /quit leaves."""
    async with _real_chat_signalled_mid_turn(db_url, tmp_path, signal.SIGINT, b"Stopped by") as chat:
        chat.target.gate.release()
        _, err = await asyncio.wait_for(chat.proc.communicate(b"/quit\n"), timeout=60)
    assert chat.proc.returncode == 0, err.decode()
    assert "stopping (asked by" in chat.seen.decode()
    assert len(chat.gemini.requests) == 1  # no model call after the stop


def _echo(messages):
    """A model that answers the last human message: `you said: <text>`."""
    from langchain_core.messages import HumanMessage

    said = [m for m in messages if isinstance(m, HumanMessage)][-1].content
    return AIMessage(f"you said: {said}")


class _Terminal:
    """Lines typed at a chat (a queue) and what it printed, with a way to wait for a printed line."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._printed = asyncio.Event()
        self.platform = ConsolePlatform(write=self.write)

    def write(self, text: str) -> None:
        self.out.append(text)
        self._printed.set()

    async def read(self, prompt: str) -> str | None:
        return await self.lines.get()

    def type(self, *lines: str) -> None:
        for line in lines:
            self.lines.put_nowait(line)

    def has_typed_ahead(self) -> bool:
        """Whether a line typed and not yet read waits (`StdinLines.has_typed_ahead`)."""
        return not self.lines.empty()

    def next_typed_ahead(self) -> str | None:
        """The first line typed and not yet read, or None (`StdinLines.next_typed_ahead`)."""
        return None if self.lines.empty() else self.lines.get_nowait()

    async def printed(self, text: str, timeout: float = 60) -> None:
        async def seen() -> None:
            while not any(text in line for line in self.out):
                self._printed.clear()
                await self._printed.wait()

        await asyncio.wait_for(seen(), timeout)


async def _sigterm_mid_turn(chat: ConsoleChat, terminal: _Terminal, gate, text: str) -> asyncio.Task[None]:
    """`text` typed, SIGTERM while the model thinks about it; the leaving (`shut_down(60)`), once it says so."""
    gate.arm()
    running = asyncio.create_task(chat.run())
    terminal.type(text)
    await gate.wait_arrived()
    return await _sigterm(running, chat, terminal)


async def _sigterm(running: asyncio.Task[None], chat: ConsoleChat, terminal: _Terminal) -> asyncio.Task[None]:
    """SIGTERM to the chat `running`; the leaving (`shut_down(60)`), once it says so."""
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    leaving = asyncio.create_task(chat.shut_down(60))
    await terminal.printed("■  The bot is stopping")
    return leaving


async def _leave_a_cut_turn(db_url, model, gate) -> None:
    """A run of the chat whose turn for `question` is cut at shutdown while the model thinks."""
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, admin=h.admin)
        leaving = await _sigterm_mid_turn(chat, terminal, gate, "question")
        assert chat.interrupt() is True  # one more signal: leave at once
        await asyncio.wait_for(leaving, 60)
    assert "!  The turn was cut short; it will be finished on the next start." in terminal.out


@contextlib.asynccontextmanager
async def _back_with_the_left_over_turn_held(
    db_url: str,
) -> AsyncIterator[tuple[_Terminal, ConsoleChat, Gate, asyncio.Task[None]]]:
    """A turn cut at shutdown, then the next `chat.run(recover=True)`, entered while the left-over turn
    waits for the model (`gate`); yields its terminal, chat, gate and running task."""
    gate = Gate()
    model = ScriptedChatModel(script=_echo, gate=gate)
    await _leave_a_cut_turn(db_url, model, gate)
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        gate.arm()
        chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, admin=h.admin)
        running = asyncio.create_task(chat.run(recover=True))
        await gate.wait_arrived()
        yield terminal, chat, gate, running


async def test_lines_typed_while_a_turn_left_over_from_before_is_finished_are_answered_after_it(db_url):
    """A turn cut at shutdown is finished on the next start, as a turn of the chat; a line typed meanwhile is
    answered after it (neither message is lost)."""
    async with _back_with_the_left_over_turn_held(db_url) as (terminal, _, gate, running):
        terminal.type("hello?", "second message while busy")
        await terminal.printed("finishing the turn left over")
        gate.release()
        await terminal.printed("bot> you said: second message while busy")
        terminal.type("/countersign context", "/quit")
        await asyncio.wait_for(running, 60)
    answers = [line for line in terminal.out if line.startswith("bot> ")]
    assert answers == ["bot> you said: question", "bot> you said: hello?", "bot> you said: second message while busy"]
    assert "6 messages kept verbatim" in "\n".join(terminal.out)


async def test_ctrl_c_during_a_turn_left_over_from_before_stops_that_turn(db_url):
    """Ctrl-C while the chat finishes a left-over turn stops that turn like any other; the chat goes on."""
    async with _back_with_the_left_over_turn_held(db_url) as (terminal, chat, gate, running):
        assert chat.interrupt() is True  # the first Ctrl-C stops the left-over turn, not the bot
        await terminal.printed("■  Stopped by")
        gate.release()
        terminal.type("after the stop", "/quit")
        await asyncio.wait_for(running, 60)
    assert "bot> you said: after the stop" in terminal.out


async def test_sigterm_during_a_turn_lets_it_finish_within_the_grace_and_refuses_lines(db_url):
    """Leaving while a turn runs: one line says the bot is stopping, the turn ends within the grace and its answer
    is printed; a line typed meanwhile is told it was not run."""
    from tests.support.gate import Gate

    gate = Gate()
    model = ScriptedChatModel(script=_echo, gate=gate)
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, admin=h.admin)
        leaving = await _sigterm_mid_turn(chat, terminal, gate, "slow one")
        terminal.type("/countersign show")
        await terminal.printed("!  The bot is stopping: `/countersign show` was not run.")
        gate.release()
        await asyncio.wait_for(leaving, 60)
    assert "bot> you said: slow one" in terminal.out
    assert not any("cut short" in line for line in terminal.out)
    assert sum("The bot is stopping:" in line and line.startswith("■") for line in terminal.out) == 1


@pytest.mark.e2e
async def test_sigterm_in_a_real_terminal_session_waits_for_the_turn(db_url, tmp_path):
    """`countersign chat`: SIGTERM while an ungated GET runs says the bot is stopping and lets the turn finish
    within SHUTDOWN_GRACE_S (its answer is printed) before the process exits 0."""
    async with _real_chat_signalled_mid_turn(
        db_url, tmp_path, signal.SIGTERM, b"The bot is stopping", SHUTDOWN_GRACE_S="60"
    ) as chat:
        chat.target.gate.release()
        out, err = await asyncio.wait_for(chat.proc.communicate(), timeout=60)
    assert chat.proc.returncode == 0, err.decode()
    assert "bot> Result:" in out.decode() and "cut short" not in out.decode()


async def _next_start_answers_the_question(db_url: str, model: ScriptedChatModel) -> _Terminal:
    """The next `countersign chat` finishes the turn for `question` left over, then /quit; its terminal."""
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, admin=h.admin)
        running = asyncio.create_task(chat.run(recover=True))
        await terminal.printed("bot> you said: question")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
    return terminal


_CLAIM_LOCK = 4242
_CLAIMS_WAIT_FOR_LOCK = f"""
    CREATE FUNCTION wait_for_the_test() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock({_CLAIM_LOCK}); RETURN NEW; END $$;
    CREATE TRIGGER wait_for_the_test BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION wait_for_the_test();
"""


async def test_a_message_being_claimed_as_the_bot_is_told_to_stop_is_kept_and_answered(db_url):
    """SIGTERM while a typed message's inbox claim is being written, and no grace: the claim is
    written all the same, so the turn the chat says "will be finished on the next start" is.

    The chat handed the message to a task that claimed it: a drain with no grace left cancelled
    that task before its claim was written, and the next start had nothing to finish.
    """
    import asyncpg

    from tests.support.barriers import another_session_waits_for_a_lock, wait_until_async

    model = ScriptedChatModel(script=_echo)
    terminal = _Terminal()
    holder = await asyncpg.connect(db_url)
    try:
        async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
            chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, admin=h.admin)
            # The claim's INSERT waits for an advisory lock `holder` holds (a table lock would
            # hold the upkeep's prune of the inbox as well, and it could be the one seen waiting).
            await holder.execute(_CLAIMS_WAIT_FOR_LOCK)
            holding = holder.transaction()
            await holding.start()
            await holder.execute("SELECT pg_advisory_xact_lock($1)", _CLAIM_LOCK)
            running = asyncio.create_task(chat.run())
            terminal.type("question")
            await wait_until_async(lambda: another_session_waits_for_a_lock(holder), "the claim waiting")
            running.cancel()  # SIGTERM
            await holding.rollback()
            with pytest.raises(asyncio.CancelledError):
                await running
            await asyncio.wait_for(chat.shut_down(0), 60)  # SHUTDOWN_GRACE_S=0, or a second Ctrl-C
    finally:
        await holder.close()
    await _next_start_answers_the_question(db_url, model)


async def test_a_turn_left_over_long_ago_is_announced_too(db_url):
    """Back at the chat long after a turn was cut: the left-over work is due, so the upkeep's first
    look may take it before `recover` does; the chat says it is finishing it all the same."""
    import asyncpg

    from tests.support.gate import Gate

    gate = Gate()
    model = ScriptedChatModel(script=_echo, gate=gate)
    await _leave_a_cut_turn(db_url, model, gate)
    connection = await asyncpg.connect(db_url)
    try:  # an hour later: everything left is due
        await connection.execute("UPDATE inbox SET retry_at = now() - interval '1 hour' WHERE status = 'accepted'")
        await connection.execute(
            "UPDATE conversations SET retry_at = now() - interval '1 hour' WHERE running_since IS NOT NULL"
        )
    finally:
        await connection.close()
    terminal = await _next_start_answers_the_question(db_url, model)
    assert any("finishing the turn left over" in line for line in terminal.out), terminal.out


async def test_a_line_typed_while_the_bot_works_is_a_message_not_an_answer_to_the_card_that_follows(db_url):
    """`a` typed while the bot works, before the card it is about to show: not an Approve. Each line
    typed ahead is taken as a message once the turn ends (a card waits, so the core says so), then
    the card is asked; nothing ran."""
    log = ToolLog()
    gate = Gate()
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}))], gate=gate)
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(log), terminal.platform) as h:
        chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, typed_ahead=terminal)
        gate.arm()
        running = asyncio.create_task(chat.run())
        terminal.type("send hi to bob")
        await gate.wait_arrived()  # the bot works
        terminal.type("a", "and one more thing")
        gate.release()
        await terminal.printed("?  send wants to run")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
        pending = await h.database.pool.fetchval("SELECT count(*) FROM approvals WHERE status = 'pending'")
    assert log.calls == [] and pending == 1, "\n".join(terminal.out)
    text = "\n".join(terminal.out)
    assert text.index("Typed while the bot worked: a") < text.index("?  send wants to run")
    assert text.count("A tool call is waiting for your decision first: send") == 2
    assert "Typed while the bot worked: and one more thing" in text


async def test_a_line_typed_while_the_card_is_fetched_is_not_its_answer(db_url):
    """A line typed after the chat looked for lines typed ahead but before the card was printed
    (the prompt reads the card from the database first) is a message too, not the card's answer
    (breaker's pass: it approved the call)."""
    log = ToolLog()
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}))])
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(log), terminal.platform) as h:
        read_pause = h.service.pause
        typed = False

        async def pause_while_typing(review_id):
            nonlocal typed
            rows = await read_pause(review_id)
            if not typed:  # Enter on "a..." while the bot fetches the card
                typed = True
                terminal.type("actually, also cc carol")
            return rows

        h.service.pause = pause_while_typing
        chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, typed_ahead=terminal)
        running = asyncio.create_task(chat.run())
        terminal.type("send hi to bob")
        await terminal.printed("Typed while the bot worked: actually, also cc carol")
        await terminal.printed("?  send wants to run")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
    assert log.calls == []


async def _at_work_on_first(h, terminal: _Terminal, gate: Gate) -> tuple[ConsoleChat, asyncio.Task[None]]:
    """A chat reading lines typed ahead, `first` typed and its turn held at the model by `gate`."""
    chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, admin=h.admin, typed_ahead=terminal)
    gate.arm()
    running = asyncio.create_task(chat.run())
    terminal.type("first")
    await gate.wait_arrived()
    return chat, running


async def test_a_stop_answers_every_line_typed_ahead_that_did_not_run(db_url):
    """Lines typed while the bot works, then SIGTERM while the first of them runs: it is answered
    within the grace, each of the others is told it was not run (breaker's pass: they vanished)."""
    gate = Gate()
    model = ScriptedChatModel(script=_echo, gate=gate)
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        chat, running = await _at_work_on_first(h, terminal, gate)
        terminal.type("second", "third", "fourth")
        gate.release()
        gate.arm()  # hold the turn for "second"
        await gate.wait_arrived()
        leaving = await _sigterm(running, chat, terminal)
        gate.release()
        await asyncio.wait_for(leaving, 60)
    text = "\n".join(terminal.out)
    assert "bot> you said: second" in text
    assert "`third` was not run" in text and "`fourth` was not run" in text


async def _ctrl_c_while_second_is_claimed(
    h, terminal: _Terminal, gate: Gate, *typed: str, hold: bool = False
) -> tuple[ConsoleChat, asyncio.Task[None], bool]:
    """`first` at work, `typed` typed ahead; Ctrl-C while the first of them is claimed (its inbox row
    waits for an advisory lock another session holds; `hold`: its turn will be held by `gate`).
    The chat, its task, and what `interrupt` answered."""
    import asyncpg

    from tests.support.barriers import another_session_waits_for_a_lock, wait_until_async

    chat, running = await _at_work_on_first(h, terminal, gate)
    holder = await asyncpg.connect(h.database.url)
    try:
        await holder.execute(_CLAIMS_WAIT_FOR_LOCK)
        holding = holder.transaction()
        await holding.start()
        await holder.execute("SELECT pg_advisory_xact_lock($1)", _CLAIM_LOCK)
        try:
            terminal.type(*typed)
            gate.release()
            if hold:
                gate.arm()
            await wait_until_async(lambda: another_session_waits_for_a_lock(holder), f"the claim of `{typed[0]}`")
            answered = chat.interrupt()
        finally:
            await holding.rollback()
    finally:
        await holder.close()
    return chat, running, answered


async def test_ctrl_c_between_lines_typed_ahead_stops_the_work_and_the_chat_goes_on(db_url):
    """Ctrl-C after a turn, while the next line typed ahead is being claimed: the chat stays (it
    left, before), the line being claimed is answered, and the line typed ahead after it is told
    it was not run; a line typed after the Ctrl-C runs."""
    gate = Gate()
    model = ScriptedChatModel(script=_echo, gate=gate)
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        _, running, stays = await _ctrl_c_while_second_is_claimed(h, terminal, gate, "second", "third")
        assert stays is True  # the bot is at work: the first Ctrl-C stops, not leaves
        terminal.type("after the stop")
        await terminal.printed("bot> you said: after the stop")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
    text = "\n".join(terminal.out)
    assert "!  Stopped with Ctrl-C: `third`, typed while the bot worked, was not run." in text
    answers = [line for line in terminal.out if line.startswith("bot> ")]
    assert answers == ["bot> you said: first", "bot> you said: second", "bot> you said: after the stop"]


@pytest.mark.e2e
async def test_a_closing_terminal_s_second_sighup_does_not_cut_the_grace(db_url, tmp_path):
    """`countersign chat`: SIGHUP (the terminal closed) while an ungated GET runs, then another one, as a
    closing terminal may send: the turn still gets its grace; its answer is printed before the process exits 0."""
    async with _real_chat_signalled_mid_turn(
        db_url, tmp_path, signal.SIGHUP, b"The bot is stopping", SHUTDOWN_GRACE_S="60"
    ) as chat:
        assert chat.proc.stdin is not None and chat.proc.stdout is not None
        chat.proc.send_signal(signal.SIGHUP)
        chat.proc.stdin.write(b"still there?\n")  # answered "not run" only if the chat is still waiting
        await chat.proc.stdin.drain()
        refused = await asyncio.wait_for(chat.proc.stdout.readline(), 60)
        assert b"`still there?` was not run" in refused, refused
        chat.target.gate.release()
        out, err = await asyncio.wait_for(chat.proc.communicate(), timeout=60)
    assert chat.proc.returncode == 0, err.decode()
    assert "bot> Result:" in out.decode() and "cut short" not in out.decode()


async def test_a_failed_look_for_left_over_work_is_said_and_the_chat_goes_on(db_url):
    """The database refuses `recover`'s look for unfinished work (a table it reads is gone): the chat
    says so, instead of only logging it, and answers the next message."""
    terminal = _Terminal()
    model = ScriptedChatModel(script=_echo)
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        await h.database.pool.execute("ALTER TABLE reviews RENAME TO reviews_away")
        try:
            chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, admin=h.admin)
            running = asyncio.create_task(chat.run(recover=True))
            await terminal.printed("Could not look for work left over from the last run")
        finally:
            await h.database.pool.execute("ALTER TABLE reviews_away RENAME TO reviews")
        terminal.type("hello", "/quit")
        await asyncio.wait_for(running, 60)
    assert "bot> you said: hello" in terminal.out


async def test_a_turn_that_reaches_a_card_during_the_grace_says_so_on_leaving(db_url):
    """SIGTERM while the model thinks; within the grace the turn stops at a call that needs a decision,
    which nobody was shown: the chat says so as it leaves, and the next start asks it."""
    from tests.support.gate import Gate

    gate = Gate()
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"}))], gate=gate)
    terminal = _Terminal()
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        chat = ConsoleChat(h.service, terminal.platform, read=terminal.read, admin=h.admin)
        leaving = await _sigterm_mid_turn(chat, terminal, gate, "send hi to bob")
        gate.release()
        await asyncio.wait_for(leaving, 60)
    assert "   The turn stopped at 1 call waiting for your decision; you are asked next time." in terminal.out
    assert not any("cut short" in line for line in terminal.out)
    again = _Terminal()
    async with open_service(db_url, model, make_test_registry(ToolLog()), again.platform) as h:
        running = asyncio.create_task(ConsoleChat(h.service, again.platform, read=again.read, admin=h.admin).run())
        await again.printed("?  send wants to run")
        again.type("/quit")
        await asyncio.wait_for(running, 60)


async def test_ctrl_c_while_the_last_line_typed_ahead_is_claimed_says_nothing_runs_and_is_not_spent(db_url):
    """Ctrl-C after a turn, while the one line typed ahead is being claimed: nothing runs, so the chat
    says so (not "Nothing to stop", which read as a refusal) and the Ctrl-C is not spent: the next
    one, during that line's turn, stops the turn instead of leaving (breaker's pass)."""
    gate = Gate()
    terminal = _Terminal()
    model = ScriptedChatModel(script=_echo, gate=gate)
    async with open_service(db_url, model, make_test_registry(ToolLog()), terminal.platform) as h:
        chat, running, between = await _ctrl_c_while_second_is_claimed(h, terminal, gate, "second", hold=True)
        assert between is True
        await gate.wait_arrived()
        assert chat.interrupt() is True  # stops `second`'s turn, the chat stays
        await terminal.printed("stopping (asked by")
        gate.release()
        await terminal.printed("■  Stopped by")
        terminal.type("/quit")
        await asyncio.wait_for(running, 60)
    assert (
        "   Nothing to stop this moment (Ctrl-C during a turn stops it; at the prompt, Ctrl-C leaves)." in terminal.out
    )
    assert not any(line.startswith("!  Nothing to stop") for line in terminal.out)
