"""The SMTP server the `send_email` tool sends to in tests (aiosmtpd); records every message."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.support.bot_process import free_port

PASSWORD = "s3cr3t-p@ss:word"
"""The one password the server accepts."""


@dataclass
class Delivered:
    """One message the server accepted: its envelope and the parsed message."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage


@dataclass
class Recorder:
    """aiosmtpd handler that keeps every message it accepts; `bounce@...` recipients are refused."""

    messages: list[Delivered] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 - aiosmtpd's name
        parsed = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(Delivered(envelope.mail_from, list(envelope.rcpt_tos), parsed))
        return "250 Message accepted"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options) -> str:  # noqa: N802
        if address.startswith("bounce@"):
            return "550 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    def authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        assert isinstance(auth_data, LoginPassword)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        self.logins.append((login, password))
        # handled=False: aiosmtpd itself answers 535 on failure, as a real server does.
        return AuthResult(success=password == PASSWORD, handled=False)


@dataclass
class SmtpServer:
    """A running server: where it listens and what it received."""

    port: int
    recorder: Recorder
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        """`smtp://host:port`, as `SMTP_URL` wants it."""
        return f"smtp://{self.host}:{self.port}"


@contextmanager
def smtp_server(host: str = "127.0.0.1") -> Iterator[SmtpServer]:
    """A real SMTP server on `host` (AUTH allowed without TLS), stopped on exit."""
    recorder = Recorder()
    controller = Controller(
        recorder,
        hostname=host,
        port=free_port(),
        auth_require_tls=False,
        authenticator=recorder.authenticate,
    )
    controller.start()
    try:
        yield SmtpServer(controller.port, recorder, host)
    finally:
        controller.stop()
