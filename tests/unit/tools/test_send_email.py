"""The send_email tool against a real local SMTP server (aiosmtpd)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from bot.base.errors import ConfigurationError
from bot.settings import ToolSettings
from bot.tools.canonical import canonical_args
from bot.tools.refusals import refusal
from bot.tools.send_email import MAX_RECIPIENTS, make_send_email_tool
from tests.support.bot_process import free_port
from tests.support.smtp_target import PASSWORD, SmtpServer
from tests.support.smtp_target import smtp_server as running_smtp_server


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    """A real SMTP server on 127.0.0.1 (AUTH allowed without TLS, as it is loopback)."""
    with running_smtp_server() as server:
        yield server


def settings_for(url: str | None, **extra) -> ToolSettings:
    """Tool settings sending through `url`."""
    return ToolSettings(
        smtp_url=SecretStr(url) if url is not None else None,
        smtp_from="bot@countersign.example",
        smtp_timeout_s=5.0,
        **extra,
    )


async def send(tool, **args) -> str:
    """Invoke the tool as the agent does and return its text."""
    result = await tool.ainvoke(args)
    assert isinstance(result, str)
    return result


async def test_message_arrives_with_headers_and_body(smtp_server):
    """From, To, Cc, Subject and the plain-text body arrive as sent; envelope has everyone."""
    tool = make_send_email_tool(settings_for(f"smtp://127.0.0.1:{smtp_server.port}"))

    result = await send(
        tool,
        to=["ana@example.com", "Bob@Example.org"],
        cc=["carol@example.net", "ana@example.com"],
        subject="Deploy finished — zażółć",
        body="Hello,\n\nthe deploy of v1.2 finished.\n",
    )

    assert result == "Sent to ana@example.com, bob@example.org (cc: carol@example.net)."
    [delivered] = smtp_server.recorder.messages
    assert delivered.mail_from == "bot@countersign.example"
    assert delivered.rcpt_tos == ["ana@example.com", "bob@example.org", "carol@example.net"]
    message = delivered.message
    assert message["From"] == "bot@countersign.example"
    assert message["To"] == "ana@example.com, bob@example.org"
    assert message["Cc"] == "carol@example.net"
    assert message["Bcc"] is None
    assert message["Subject"] == "Deploy finished — zażółć"
    assert message.get_content_type() == "text/plain"
    # SMTP carries CRLF line ends; the text is otherwise unchanged.
    assert message.get_content().replace("\r\n", "\n") == "Hello,\n\nthe deploy of v1.2 finished.\n"
    assert message["Message-ID"].endswith("@countersign.example>")


async def test_login_uses_url_credentials_and_never_echoes_the_password(smtp_server, caplog):
    """User and password from SMTP_URL log in; a refused login says so without the password."""
    encoded = "s3cr3t-p%40ss%3Aword"
    good = make_send_email_tool(settings_for(f"smtp://bot%40corp:{encoded}@127.0.0.1:{smtp_server.port}"))
    bad = make_send_email_tool(settings_for(f"smtp://bot%40corp:wrong-{encoded}@127.0.0.1:{smtp_server.port}"))

    ok = await send(good, to=["ana@example.com"], subject="s", body="b")
    refused = await send(bad, to=["ana@example.com"], subject="s", body="b")

    assert ok == "Sent to ana@example.com."
    assert smtp_server.recorder.logins[0] == ("bot@corp", PASSWORD)
    assert refused.startswith("Error: the mail server refused the bot's login")
    assert len(smtp_server.recorder.messages) == 1
    for text in (ok, refused, caplog.text, repr(good), repr(bad)):
        assert PASSWORD not in text
        assert encoded not in text


def non_loopback_ipv4() -> str | None:
    """This machine's outgoing IPv4 address (no packet is sent), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


async def test_password_is_not_sent_in_the_clear_over_a_network():
    """Without TLS on a non-loopback server the tool refuses to log in and sends nothing."""
    address = non_loopback_ipv4()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    with running_smtp_server(address) as server:
        tool = make_send_email_tool(settings_for(f"smtp://bot:{PASSWORD}@{address}:{server.port}"))
        result = await send(tool, to=["ana@example.com"], subject="s", body="b")
    assert result.startswith(f"Error: the mail server at {address}:{server.port} offers no TLS")
    assert server.recorder.logins == []
    assert server.recorder.messages == []


async def test_partly_refused_recipients_are_reported(smtp_server):
    """Recipients the server refuses are named; the others still get the message."""
    tool = make_send_email_tool(settings_for(f"smtp://127.0.0.1:{smtp_server.port}"))
    result = await send(tool, to=["bounce@example.com"], cc=["ana@example.com"], subject="s", body="b")
    assert result == (
        "Sent to (cc: ana@example.com). The mail server refused: bounce@example.com (550 No such user here)."
    )


async def test_all_recipients_refused_is_an_error(smtp_server):
    """When every recipient is refused nothing is sent and the reasons are given."""
    tool = make_send_email_tool(settings_for(f"smtp://127.0.0.1:{smtp_server.port}"))
    result = await send(tool, to=["bounce@example.com"], subject="s", body="b")
    assert result.startswith("Error: the mail server refused every recipient: bounce@example.com")
    assert smtp_server.recorder.messages == []


async def test_unreachable_server_is_an_error_string():
    """A server that does not listen gives an error naming host:port, not a traceback."""
    port = free_port()
    tool = make_send_email_tool(settings_for(f"smtp://user:{PASSWORD}@127.0.0.1:{port}"))
    result = await send(tool, to=["ana@example.com"], subject="s", body="b")
    assert result.startswith(f"Error: could not reach the mail server at 127.0.0.1:{port}")
    assert "was not sent" in result
    assert PASSWORD not in result


@pytest.mark.parametrize(
    ("to", "cc"),
    [
        (["not-an-address"], None),
        (["Ana <ana@example.com>"], None),
        (["ana@example.com\nBcc: eve@evil.example"], None),
        (["ana@example.com, eve@evil.example"], None),
        (["ana@localhost", "a@b@c.com"], None),
        (["ana@example.com"], ["eve@-bad-.example"]),
        (["ana@exa_mple.com"], None),
        (["ana@127.0.0.1"], None),
        (["ana..b@example.com"], None),
        (['"ana"@example.com'], None),
        (["ana@example.com (work)"], None),
        (["ana@[127.0.0.1]"], None),
        ([" "], None),
        ([], None),
        (["ana%evil.example@relay.example.com"], None),  # the percent hack: a relay may send it on to evil.example
        (["ana@example.com"], ["evil.example!ana@relay.example.com"]),  # a bang path
    ],
)
async def test_bad_address_is_refused(smtp_server, to, cc):
    """Anything but a list of bare addresses is refused before connecting."""
    tool = make_send_email_tool(settings_for(f"smtp://127.0.0.1:{smtp_server.port}"))
    result = await send(tool, to=to, cc=cc, subject="s", body="b")
    assert result.startswith("Error:")
    assert smtp_server.recorder.messages == []


async def test_too_many_recipients_is_refused(smtp_server):
    """More than MAX_RECIPIENTS distinct addresses in To and Cc together are refused."""
    tool = make_send_email_tool(settings_for(f"smtp://127.0.0.1:{smtp_server.port}"))
    to = [f"user{i}@example.com" for i in range(MAX_RECIPIENTS)]
    result = await send(tool, to=to, cc=["one-more@example.com"], subject="s", body="b")
    assert result == f"Error: at most {MAX_RECIPIENTS} recipients (To and Cc together) are allowed."
    assert smtp_server.recorder.messages == []


@pytest.mark.parametrize("separator", ["\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1e"])
async def test_multiline_subject_is_refused(smtp_server, separator):
    """A subject with any line break (header injection, or a character the email package refuses) is refused
    with a reason before connecting, never with a failure while the message is built."""
    tool = make_send_email_tool(settings_for(f"smtp://127.0.0.1:{smtp_server.port}"))
    result = await send(tool, to=["ana@example.com"], subject=f"Hi{separator}Bcc: eve@evil.example", body="b")
    assert result.startswith("Error: the subject must be a single line: it has a line break")
    assert smtp_server.recorder.messages == []


@pytest.mark.parametrize(
    "written",
    [
        "a@EXTERNAL.example",
        "a@external.example.",
        "  a@external.example\t",
        "a@\uff45\uff58\uff54\uff45\uff52\uff4e\uff41\uff4c.example",  # full-width letters
        "a@external\u3002example",  # ideographic full stop
        "\uff21\uff20external.example",  # full-width A and @
        "A@External.Example.",
    ],
)
async def test_every_spelling_of_an_address_is_sent_to_the_canonical_address(smtp_server, written):
    """The envelope and the To header carry the canonical address the policy judged, whatever the spelling."""
    tool = make_send_email_tool(settings_for(f"smtp://127.0.0.1:{smtp_server.port}"))
    assert canonical_args(tool, {"to": [written], "subject": "s", "body": "b"})["to"] == ["a@external.example"]
    result = await send(tool, to=[written], subject="s", body="b")
    assert result == "Sent to a@external.example."
    [delivered] = smtp_server.recorder.messages
    assert delivered.rcpt_tos == ["a@external.example"]
    assert delivered.message["To"] == "a@external.example"


@pytest.mark.parametrize("url", ["http://mail.example.com", "mail.example.com:25", "smtp://", "smtp://host:99999"])
def test_bad_smtp_url_fails_at_start_without_echoing_it(url):
    """A malformed SMTP_URL raises ConfigurationError at build time."""
    with pytest.raises(ConfigurationError, match="SMTP_URL"):
        make_send_email_tool(settings_for(url))


def test_smtp_url_error_never_contains_the_password():
    """Even a rejected SMTP_URL's error message leaves out the credentials."""
    with pytest.raises(ConfigurationError) as caught:
        make_send_email_tool(settings_for(f"smtpx://user:{PASSWORD}@host"))
    assert PASSWORD not in str(caught.value)


def test_schema_seen_by_the_model():
    """to, subject and body are required; cc is optional; all are described."""
    tool = make_send_email_tool(settings_for("smtp://127.0.0.1:2525"))
    schema = tool.tool_call_schema.model_json_schema()
    assert schema["required"] == ["to", "subject", "body"]
    assert schema["properties"]["cc"]["default"] is None
    assert all(p["description"] for p in schema["properties"].values())


async def test_what_the_tool_refuses_before_sending_is_refused_before_a_card(smtp_server):
    """`send_email` refuses too many recipients (its `ARGS_CHECK`, with the tool's own words) and a display
    name (its canonical form) before anything is sent, so no card asks about them; a good call passes."""
    tool = make_send_email_tool(settings_for(f"smtp://127.0.0.1:{smtp_server.port}"))
    crowd = {"to": [f"user{i}@example.com" for i in range(MAX_RECIPIENTS + 1)], "subject": "s", "body": "b"}
    assert refusal(tool, crowd) == f"at most {MAX_RECIPIENTS} recipients (To and Cc together) are allowed."
    assert (await send(tool, **crowd)) == f"Error: {refusal(tool, crowd)}"
    assert "display name" in (refusal(tool, {"to": ["Ana <a@x.example>"], "subject": "s", "body": "b"}) or "")
    assert refusal(tool, {"to": ["ana@example.com"], "subject": "s", "body": "b"}) is None
    assert smtp_server.recorder.messages == []
