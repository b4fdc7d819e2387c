"""The `send_email` tool: plain-text email through the operator's SMTP server.

`SMTP_URL` says where and how: `smtp://[user:pass@]host[:port]` (port 25 by default) upgrades
with STARTTLS when the server offers it, `smtps://...` (port 465 by default) uses TLS from the
first byte. With a user in the URL the tool logs in, but only over TLS or to a loopback server:
a password is never sent in the clear across a network.

Recipients are judged and sent in one canonical spelling (`bot.tools.email_address`): the tool
carries that form in its metadata, so the review policy, the card and the approval see the
addresses the tool will send, and the tool applies it again to what it is given.

The password is a `SecretStr` in the settings and lives only inside `_SmtpTarget` here; every
text that leaves this module (tool results, log lines, error messages) is built from the host
and port, and server or library messages are scrubbed of the password before use.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import Any, Final
from urllib.parse import quote, unquote, urlsplit

import aiosmtplib
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from bot.base.errors import ConfigurationError, InvalidArgumentsError
from bot.settings import ToolSettings
from bot.tools.canonical import CANONICAL_ARGS, CANONICAL_CASE, Case, CaseRule, Part
from bot.tools.email_address import ADDRESS_FIELDS, canonical_address, canonical_send_email_args
from bot.tools.registry import ARGS_CHECK

log = logging.getLogger(__name__)

SEND_EMAIL_CASE: Final = tuple(CaseRule(name, Part.ITEMS, Case.LOWER, "addresses") for name in ADDRESS_FIELDS)
"""Addresses are lower case in canonical form (`bot.tools.canonical.CaseRule`): a condition naming one
in capitals never matches, and is refused when saved."""

MAX_RECIPIENTS: Final = 20
"""To and Cc together."""
MAX_SUBJECT_CHARS: Final = 200
MAX_BODY_CHARS: Final = 50_000

_DEFAULT_PORTS: Final = {"smtp": 25, "smtps": 465}


@dataclass(frozen=True, slots=True, kw_only=True)
class _SmtpTarget:
    """A parsed `SMTP_URL`. `repr` and `str` never show the password."""

    host: str
    port: int
    implicit_tls: bool
    username: str | None
    password: str | None = field(repr=False)

    def __str__(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"{shown}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        """Whether the server is this machine (where a plain-text login stays local)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def scrub(self, text: str) -> str:
        """`text` with the password (plain or URL-encoded) replaced by `***`."""
        if self.password:
            for secret in {self.password, quote(self.password, safe="")}:
                text = text.replace(secret, "***")
        return text


def _parse_smtp_url(url: str) -> _SmtpTarget:
    """Parse `SMTP_URL`; the error never includes the URL (it may hold the password)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ConfigurationError(
            "SMTP_URL must look like smtp://user:pass@host:port or smtps://user:pass@host:port"
            f" (got scheme {scheme or 'none'!r})"
        )
    try:
        port = parts.port
    except ValueError:
        raise ConfigurationError("SMTP_URL has an invalid port") from None
    if not parts.hostname:
        raise ConfigurationError("SMTP_URL has no host")
    return _SmtpTarget(
        host=parts.hostname,
        port=port or _DEFAULT_PORTS[scheme],
        implicit_tls=scheme == "smtps",
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )


class _RefusedError(Exception):
    """An email the tool will not send; the message is the model-facing explanation."""


def _checked(to: list[str], cc: list[str] | None, subject: str, body: str) -> tuple[list[str], list[str], str]:
    """The canonical To, Cc and subject the tool sends; raises `_RefusedError` naming what is wrong."""
    try:
        canonical = canonical_send_email_args({"to": to, "cc": cc or [], "subject": subject})
    except InvalidArgumentsError as exc:
        raise _RefusedError(f"{exc.message}.") from None
    to_list, cc_list = list(canonical["to"]), list(canonical["cc"])
    if not to_list:
        raise _RefusedError("`to` needs at least one address.")
    if len(to_list) + len(cc_list) > MAX_RECIPIENTS:
        raise _RefusedError(f"at most {MAX_RECIPIENTS} recipients (To and Cc together) are allowed.")
    if len(canonical["subject"]) > MAX_SUBJECT_CHARS:
        raise _RefusedError(f"the subject is longer than {MAX_SUBJECT_CHARS} characters.")
    if len(body) > MAX_BODY_CHARS:
        raise _RefusedError(f"the body is longer than {MAX_BODY_CHARS} characters.")
    return to_list, cc_list, canonical["subject"]


def refusal(args: Mapping[str, Any]) -> str | None:
    """Why `send_email` would refuse `args` without sending anything, or None (its `ARGS_CHECK`).

    The same checks the tool makes first (`_checked`): recipients, their number, the lengths
    of the subject and body. An edit with such arguments is refused in the form, and a call
    with them is answered at once, with no card (`bot.tools.refusals`).
    """
    try:
        _checked(args.get("to") or [], args.get("cc"), args.get("subject") or "", args.get("body") or "")
    except _RefusedError as refused:
        return str(refused)
    return None


def _build_message(sender: str, to: list[str], cc: list[str], subject: str, body: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(to)
    if cc:
        message["Cc"] = ", ".join(cc)
    message["Subject"] = subject
    message["Date"] = format_datetime(datetime.now(UTC))
    domain = sender.rpartition("@")[2] or None
    message["Message-ID"] = make_msgid(domain=domain)
    message.set_content(body)  # text/plain; utf-8, with a transfer encoding that fits
    return message


class _SendEmailArgs(BaseModel):
    """Arguments of the send_email tool."""

    to: list[str] = Field(description='Recipient addresses, e.g. ["ana@example.com"].')
    subject: str = Field(description="Subject line (one line).")
    body: str = Field(description="The message, plain text.")
    cc: list[str] | None = Field(default=None, description="Optional Cc addresses.")


def make_send_email_tool(settings: ToolSettings) -> BaseTool:
    """Build the `send_email` tool for `settings.smtp_url`.

    Args:
        settings: SMTP URL, sender address and timeout.

    Returns:
        The tool, named `send_email`.

    Raises:
        ConfigurationError: when `SMTP_URL` is unset or malformed, or `SMTP_FROM` is not an
            address.
    """
    if settings.smtp_url is None:
        raise ConfigurationError("send_email needs SMTP_URL")
    target = _parse_smtp_url(settings.smtp_url.get_secret_value())
    try:
        sender = canonical_address(settings.smtp_from)
    except InvalidArgumentsError:
        raise ConfigurationError(f"SMTP_FROM {settings.smtp_from!r} is not an email address") from None
    timeout_s = settings.smtp_timeout_s

    async def deliver(message: EmailMessage, recipients: list[str]) -> dict[str, str]:
        """Send `message`; returns the recipients the server refused, with its reasons."""
        client = aiosmtplib.SMTP(
            hostname=target.host,
            port=target.port,
            use_tls=target.implicit_tls,
            start_tls=None,  # STARTTLS when the server offers it
            timeout=timeout_s,
        )
        async with asyncio.timeout(timeout_s * 2), client:
            if target.username is not None:
                encrypted = client.get_transport_info("sslcontext") is not None
                if not encrypted and not target.is_loopback:
                    raise _RefusedError(
                        f"the mail server at {target} offers no TLS, so the bot will not send "
                        "its password; an administrator must fix SMTP_URL. The email was not "
                        "sent."
                    )
                await client.login(target.username, target.password or "")
            refused, _ = await client.send_message(message, sender=sender, recipients=recipients)
        return {address: f"{reply.code} {reply.message}" for address, reply in refused.items()}

    async def send_email(to: list[str], subject: str, body: str, cc: list[str] | None = None) -> str:
        """Send a plain-text email.

        Sending waits for a human's approval, who sees the recipients, subject and text.
        Give bare addresses (name@example.com), at most 20 recipients in To and Cc together.
        Returns "Sent to ..." on success, or a line starting with "Error:" saying what went
        wrong and whether the email was sent.
        """
        try:
            to_list, cc_list, subject_line = _checked(to, cc, subject, body)
            message = _build_message(sender, to_list, cc_list, subject_line, body)
            refused = await deliver(message, to_list + cc_list)
        except _RefusedError as refusal:
            return f"Error: {refusal}"
        except aiosmtplib.SMTPRecipientsRefused as exc:
            reasons = "; ".join(
                f"{error.recipient} ({error.code} {target.scrub(error.message)})" for error in exc.recipients
            )
            return f"Error: the mail server refused every recipient: {reasons}. Nothing was sent."
        except aiosmtplib.SMTPAuthenticationError:
            log.error("send_email: the mail server at %s refused the login", target)
            return (
                "Error: the mail server refused the bot's login; an administrator must fix "
                "SMTP_URL. The email was not sent."
            )
        except aiosmtplib.SMTPSenderRefused as exc:
            return (
                f"Error: the mail server refused the sender address {sender} ({exc.code} "
                f"{target.scrub(exc.message)}); an administrator must fix SMTP_FROM. The email "
                "was not sent."
            )
        except (aiosmtplib.SMTPTimeoutError, TimeoutError):
            log.warning("send_email: the mail server at %s timed out", target)
            return (
                f"Error: the mail server at {target} did not answer within {timeout_s:g} "
                "seconds; the email may not have been sent. Tell the user before trying again."
            )
        except (aiosmtplib.SMTPConnectError, aiosmtplib.SMTPServerDisconnected, OSError) as exc:
            detail = target.scrub(str(exc)) or type(exc).__name__
            log.warning("send_email: cannot reach the mail server at %s: %s", target, detail)
            return (
                f"Error: could not reach the mail server at {target} ({detail}); the email was "
                "not sent. Try again later."
            )
        except aiosmtplib.SMTPException as exc:
            detail = target.scrub(str(exc)) or type(exc).__name__
            log.warning("send_email via %s failed: %s", target, detail)
            return f"Error: sending failed: {detail}. The email was probably not sent."

        to_sent = [address for address in to_list if address not in refused]
        cc_sent = [address for address in cc_list if address not in refused]
        log.info("send_email: sent to %d recipient(s) via %s", len(to_sent + cc_sent), target)
        parts = [", ".join(to_sent)] if to_sent else []
        if cc_sent:
            parts.append(f"(cc: {', '.join(cc_sent)})")
        text = f"Sent to {' '.join(parts)}."
        if refused:
            reasons = "; ".join(f"{a} ({target.scrub(r)})" for a, r in refused.items())
            text += f" The mail server refused: {reasons}."
        return text

    return StructuredTool.from_function(
        coroutine=send_email,
        name="send_email",
        description=inspect.cleandoc(send_email.__doc__ or ""),
        args_schema=_SendEmailArgs,
        metadata={CANONICAL_ARGS: canonical_send_email_args, CANONICAL_CASE: SEND_EMAIL_CASE, ARGS_CHECK: refusal},
    )
