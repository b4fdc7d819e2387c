"""Signed requests into a Bolt app, built the way Slack builds them.

``SlackEventSender`` plays Slack's side of the Events API and interactivity: it builds the
payloads Slack sends (``event_callback`` envelopes as JSON, interactions as a form-encoded
``payload=``), signs them as "Verifying requests from Slack" describes (``v0=`` plus the hex
HMAC-SHA256 of ``v0:{timestamp}:{body}`` under the signing secret) and posts them over real HTTP.

Example:
    async with SlackEventSender(url, signing_secret="secret") as sender:
        sent = await sender.app_mention("C1", "U1", "<@UBOT> deploy")
        assert sent.status == 200
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import random
import re
import secrets
import string
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import urlencode

import aiohttp

__all__ = ["SEND_ERRORS", "Delivery", "SlackEventSender"]

Payload = dict[str, Any]
ChannelType = Literal["channel", "im", "group", "mpim"]

# Slack's receivers reject requests whose timestamp is more than five minutes away from now.
_STALE_SECONDS = 10 * 60
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_ID_ALPHABET = string.ascii_uppercase + string.digits


SEND_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError)
"""What a send raises when the app cannot be reached, drops the connection or does not answer in
time (a killed replica, a worker restarting): aiohttp's client errors and its total timeout. The
sender used httpx before, whose `TransportError` covered the same cases."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """What happened when one request was delivered to the app.

    Attributes:
        status: The HTTP status the app answered with.
        body: The response body as text.
        headers: The response headers.
        request_body: The exact bytes sent (``retry`` sends them again).
        request_headers: The headers sent, signature included.
        ts: The ts of the message the event or interaction is about, if any.
        event_id: The Events API ``event_id``, for event deliveries.
        envelope_id: The Socket Mode envelope's id, for deliveries over a socket
            (``SocketModeEventSender``); None over HTTP.
    """

    status: int
    body: str
    headers: Mapping[str, str] = field(repr=False)
    request_body: bytes = field(repr=False)
    request_headers: Mapping[str, str] = field(repr=False)
    ts: str | None = None
    event_id: str | None = None
    envelope_id: str | None = None

    @property
    def json(self) -> Any:
        """The response body parsed as JSON, or None when it is empty or not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except json.JSONDecodeError:
            return None


class SlackEventSender:
    """Posts signed Events API and interactivity requests to a Bolt app's endpoint.

    Use it as ``async with SlackEventSender(...) as sender:`` to reuse one HTTP client; without
    ``async with`` each request opens and closes its own.

    Every sending method takes ``bad_signature=True`` (sign with the wrong secret) and
    ``stale=True`` (sign with a timestamp ten minutes old) to exercise request verification.

    Args:
        url: The app's events URL, e.g. ``http://127.0.0.1:PORT/slack/events``.
        signing_secret: The app's signing secret.
        team_id: The workspace id.
        api_app_id: The app id.
        bot_user_id: The installing bot user, reported in ``authorizations``.
        verification_token: The deprecated ``token`` Slack still puts in payloads.
        team_domain: The workspace subdomain put in interaction payloads.
        enterprise_id: The Enterprise Grid org the workspace belongs to (``E...``), put in
            events as Slack does (``enterprise_id``, ``context_enterprise_id``,
            ``authorizations``); None for a workspace outside any org.
        timeout: Seconds to wait for the app to answer (generous: a form's answer needs the database).
    """

    def __init__(
        self,
        url: str,
        signing_secret: str,
        team_id: str = "T1",
        api_app_id: str = "A1",
        *,
        bot_user_id: str = "UBOT",
        verification_token: str = "verification-token",  # noqa: S107 - a fake legacy token
        team_domain: str = "standin",
        enterprise_id: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.url = url
        self.signing_secret = signing_secret
        self.team_id = team_id
        self.api_app_id = api_app_id
        self.bot_user_id = bot_user_id
        self.verification_token = verification_token
        self.team_domain = team_domain
        self.enterprise_id = enterprise_id
        self._timeout = timeout
        self._client: aiohttp.ClientSession | None = None
        self._ids = itertools.count(1)
        self._last_ts_us = 0
        self.home_teams: dict[str, str] = {}
        """A user's home workspace when it is not ``team_id`` (a Slack Connect user of another
        organisation): their interactions carry it as ``user.team_id``, as Slack's do."""

    async def __aenter__(self) -> Self:
        self._client = self._session()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the shared HTTP client, if one is open."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    # ------------------------------------------------------------------ signing

    def sign(self, body: bytes, *, timestamp: int | None = None, secret: str | None = None) -> dict[str, str]:
        """Slack's signature headers for ``body``.

        Args:
            body: The exact request body.
            timestamp: Unix seconds to sign with; now when None.
            secret: Sign with this secret instead of the app's.

        Returns:
            ``X-Slack-Request-Timestamp`` and ``X-Slack-Signature``.
        """
        timestamp = int(time.time()) if timestamp is None else timestamp
        key = (self.signing_secret if secret is None else secret).encode()
        base = b"v0:" + str(timestamp).encode() + b":" + body
        digest = hmac.new(key, base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}"}

    async def send_raw(self, body: bytes, headers: Mapping[str, str] | None = None) -> Delivery:
        """Post ``body`` with ``headers`` as given: nothing is signed, only transport headers added.

        Args:
            body: The request body.
            headers: All request headers, e.g. ``{"Content-Type": ..., **sender.sign(body)}``.
        """
        sent = dict(headers or {})
        if self._client is not None:
            return await self._post(self._client, body, sent)
        async with self._session() as client:
            return await self._post(client, body, sent)

    def _session(self) -> aiohttp.ClientSession:
        # aiohttp, not httpx: under a few hundred requests a second httpx's pool (a scan of every
        # connection per request) cost more CPU than the app it sends to (bench.throughput).
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self._timeout), skip_auto_headers=("Accept-Encoding",)
        )

    async def _post(self, client: aiohttp.ClientSession, body: bytes, sent: dict[str, str]) -> Delivery:
        async with client.post(self.url, data=body, headers=sent) as response:
            text = await response.text()
            return Delivery(
                status=response.status,
                body=text,
                headers={name.lower(): value for name, value in response.headers.items()},  # as httpx gave them
                request_body=body,
                request_headers=sent,
            )

    # ------------------------------------------------------------------- events

    async def url_verification(
        self, challenge: str | None = None, *, bad_signature: bool = False, stale: bool = False
    ) -> Delivery:
        """Send the ``url_verification`` handshake; Bolt answers with the challenge."""
        payload = {
            "token": self.verification_token,
            "challenge": challenge or secrets.token_urlsafe(24),
            "type": "url_verification",
        }
        return await self._post_json(payload, bad_signature=bad_signature, stale=stale)

    async def app_mention(
        self,
        channel: str,
        user: str,
        text: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        retry_reason: str | None = None,
        bad_signature: bool = False,
        stale: bool = False,
    ) -> Delivery:
        """Send an ``app_mention`` event (write the mention into ``text``: ``"<@UBOT> hi"``).

        Args:
            channel: The channel id.
            user: The author.
            text: The message text.
            ts: The message ts; a fresh, increasing one when None.
            thread_ts: The parent's ts when the mention is a thread reply.
            event_id: The envelope's event_id; a fresh ``Ev...`` when None.
            retry_num: Sent as ``X-Slack-Retry-Num`` (pass the first delivery's event_id too).
            retry_reason: Sent as ``X-Slack-Retry-Reason``, e.g. ``"http_timeout"``.
            bad_signature: Sign with the wrong secret.
            stale: Sign with a timestamp ten minutes old.
        """
        ts = ts or self._next_ts()
        event: Payload = {
            "type": "app_mention",
            "user": user,
            "text": text,
            "ts": ts,
            "client_msg_id": str(uuid.uuid4()),
            "team": self.team_id,
            "blocks": _rich_text_blocks(text),
            "channel": channel,
            "event_ts": ts,
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        return await self.event(
            event,
            ts=ts,
            event_id=event_id,
            retry_num=retry_num,
            retry_reason=retry_reason,
            bad_signature=bad_signature,
            stale=stale,
        )

    async def message(
        self,
        channel: str,
        user: str,
        text: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        channel_type: ChannelType = "channel",
        subtype: str | None = None,
        bot_id: str | None = None,
        *,
        previous_text: str | None = None,
        event_id: str | None = None,
        retry_num: int | None = None,
        retry_reason: str | None = None,
        bad_signature: bool = False,
        stale: bool = False,
    ) -> Delivery:
        """Send a ``message`` event, including the ``message_changed``/``message_deleted`` shapes.

        For ``subtype="message_changed"``, ``ts`` is the edited message's ts, ``text`` its new
        text and ``previous_text`` its old one; for ``"message_deleted"``, ``ts`` is the deleted
        message's ts and ``text`` what it said. Those events get a fresh ts of their own, as
        Slack's do; ``Delivery.ts`` is always the ts of the message the event is about.

        Args:
            channel: The channel id.
            user: The author.
            text: The message text.
            ts: The message ts; a fresh, increasing one when None (required for edits/deletes).
            thread_ts: The parent's ts for a thread reply.
            channel_type: ``"channel"``, ``"im"``, ``"group"`` or ``"mpim"``.
            subtype: The message subtype, e.g. ``"bot_message"``, ``"message_changed"``.
            bot_id: Set for messages posted by an app (Slack adds bot_id and app_id).
            previous_text: The old text of an edited message.
            event_id: The envelope's event_id; a fresh ``Ev...`` when None.
            retry_num: Sent as ``X-Slack-Retry-Num``.
            retry_reason: Sent as ``X-Slack-Retry-Reason``.
            bad_signature: Sign with the wrong secret.
            stale: Sign with a timestamp ten minutes old.

        Raises:
            ValueError: An edit or delete without the ts of the message it is about.
        """
        if subtype in ("message_changed", "message_deleted") and ts is None:
            raise ValueError(f"{subtype} needs ts, the ts of the message it is about")
        ts = ts or self._next_ts()
        inner = self._message_body(user, text, ts, thread_ts, bot_id)
        if subtype == "message_changed":
            event_ts = self._next_ts()
            previous = self._message_body(user, previous_text or "", ts, thread_ts, bot_id)
            inner["edited"] = {"user": user, "ts": event_ts}
            event: Payload = {
                "type": "message",
                "subtype": subtype,
                "hidden": True,
                "message": inner,
                "previous_message": previous,
                "channel": channel,
                "ts": event_ts,
                "event_ts": event_ts,
            }
        elif subtype == "message_deleted":
            event_ts = self._next_ts()
            event = {
                "type": "message",
                "subtype": subtype,
                "hidden": True,
                "deleted_ts": ts,
                "previous_message": inner,
                "channel": channel,
                "ts": event_ts,
                "event_ts": event_ts,
            }
        else:
            event = {**inner, "channel": channel, "event_ts": ts}
            if subtype is not None:
                event["subtype"] = subtype
        event["channel_type"] = channel_type
        return await self.event(
            event,
            ts=ts,
            event_id=event_id,
            retry_num=retry_num,
            retry_reason=retry_reason,
            bad_signature=bad_signature,
            stale=stale,
        )

    async def event(
        self,
        event: Payload,
        *,
        ts: str | None = None,
        event_id: str | None = None,
        retry_num: int | None = None,
        retry_reason: str | None = None,
        bad_signature: bool = False,
        stale: bool = False,
    ) -> Delivery:
        """Wrap any event in Slack's ``event_callback`` envelope and send it.

        Args:
            event: The inner event, e.g. ``{"type": "reaction_added", ...}``.
            ts: Reported back as ``Delivery.ts``.
            event_id: The envelope's event_id; a fresh ``Ev...`` when None.
            retry_num: Sent as ``X-Slack-Retry-Num``.
            retry_reason: Sent as ``X-Slack-Retry-Reason``.
            bad_signature: Sign with the wrong secret.
            stale: Sign with a timestamp ten minutes old.
        """
        event_id = event_id or self._event_id()
        envelope: Payload = {
            "token": self.verification_token,
            "team_id": self.team_id,
            "context_team_id": self.team_id,
            "context_enterprise_id": self.enterprise_id,
            "api_app_id": self.api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            **({"enterprise_id": self.enterprise_id} if self.enterprise_id else {}),
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": self.enterprise_id,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-{secrets.token_urlsafe(24)}",
        }
        extra: dict[str, str] = {}
        if retry_num is not None:
            extra["X-Slack-Retry-Num"] = str(retry_num)
        if retry_reason is not None:
            extra["X-Slack-Retry-Reason"] = retry_reason
        delivery = await self._post_json(envelope, extra_headers=extra, bad_signature=bad_signature, stale=stale)
        return replace(delivery, ts=ts, event_id=event_id)

    async def retry(self, previous: Delivery, *, retry_num: int = 1, retry_reason: str = "http_timeout") -> Delivery:
        """Redeliver an event as Slack retries it: same body, fresh signature, retry headers."""
        headers = {
            "Content-Type": previous.request_headers.get("Content-Type", "application/json"),
            "X-Slack-Retry-Num": str(retry_num),
            "X-Slack-Retry-Reason": retry_reason,
            **self.sign(previous.request_body),
        }
        delivery = await self.send_raw(previous.request_body, headers)
        return replace(delivery, ts=previous.ts, event_id=previous.event_id)

    # ------------------------------------------------------------ interactivity

    async def block_actions(
        self,
        user: str,
        channel: str,
        message_ts: str,
        action_id: str,
        value: str,
        trigger_id: str,
        block_id: str = "b",
        thread_ts: str | None = None,
        *,
        message: Payload | None = None,
        response_url: str | None = None,
        user_name: str | None = None,
        bad_signature: bool = False,
        stale: bool = False,
    ) -> Delivery:
        """Send a button click on a message (a ``block_actions`` interaction).

        Args:
            user: Who clicked.
            channel: The message's channel.
            message_ts: The message's ts.
            action_id: The button's action_id.
            value: The button's value.
            trigger_id: For ``views.open``; issue one with ``SlackApiStandIn.new_trigger_id()``.
            block_id: The actions block's id.
            thread_ts: The message's thread, when it is a reply.
            message: The message as Slack would send it (e.g. ``slack.message(channel, ts)``);
                a minimal bot message when None.
            response_url: Where ``respond()`` posts, e.g. ``slack.new_response_url(...)``.
            user_name: The clicker's handle; the lower-cased id when None.
            bad_signature: Sign with the wrong secret.
            stale: Sign with a timestamp ten minutes old.
        """
        payload = self.block_actions_payload(
            user,
            channel,
            message_ts,
            action_id,
            value,
            trigger_id,
            block_id,
            thread_ts,
            message=message,
            response_url=response_url,
            user_name=user_name,
        )
        delivery = await self._post_form(payload, bad_signature=bad_signature, stale=stale)
        return replace(delivery, ts=message_ts)

    def block_actions_payload(
        self,
        user: str,
        channel: str,
        message_ts: str,
        action_id: str,
        value: str,
        trigger_id: str,
        block_id: str = "b",
        thread_ts: str | None = None,
        *,
        message: Payload | None = None,
        response_url: str | None = None,
        user_name: str | None = None,
    ) -> Payload:
        """The ``block_actions`` payload ``block_actions`` sends (same arguments), not sent.

        A load generator builds its requests first (``form_request``, then ``bench.click_sender``),
        so that encoding and signing are not in what it measures.
        """
        if message is None:
            message = {"type": "message", "user": self.bot_user_id, "ts": message_ts, "text": ""}
        # Drop the None defaults of SlackApiStandIn.message(); Slack omits absent keys.
        message = {k: v for k, v in message.items() if v is not None}
        if thread_ts is not None:
            message["thread_ts"] = thread_ts
        payload: Payload = {
            "type": "block_actions",
            "user": self._user(user, user_name),
            "api_app_id": self.api_app_id,
            "token": self.verification_token,
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel,
                "is_ephemeral": False,
            },
            "trigger_id": trigger_id,
            "team": {"id": self.team_id, "domain": self.team_domain},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": channel.lower()},
            "message": message,
            "state": {"values": {}},
            "response_url": response_url or self._fake_response_url(),
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": block_id,
                    "value": value,
                    "action_ts": self._next_ts(),
                }
            ],
        }
        return payload

    async def view_submission(
        self,
        user: str,
        callback_id: str,
        private_metadata: str,
        values: Mapping[str, Mapping[str, str]],
        view_id: str = "V1",
        *,
        view: Payload | None = None,
        trigger_id: str | None = None,
        user_name: str | None = None,
        bad_signature: bool = False,
        stale: bool = False,
    ) -> Delivery:
        """Send a modal submission with plain-text inputs.

        Args:
            user: Who submitted.
            callback_id: The view's callback_id.
            private_metadata: The view's private_metadata.
            values: ``{block_id: {action_id: text}}`` typed into ``plain_text_input`` elements.
            view_id: The view's id (e.g. from ``views.open``'s reply).
            view: The view as stored (e.g. ``slack.views[view_id]``) to build on; its state,
                callback_id, private_metadata and id are replaced by the arguments.
            trigger_id: The submission's trigger id; a fresh fake one when None.
            user_name: The submitter's handle; the lower-cased id when None.
            bad_signature: Sign with the wrong secret.
            stale: Sign with a timestamp ten minutes old.
        """
        state = {
            block: {action: {"type": "plain_text_input", "value": text} for action, text in actions.items()}
            for block, actions in values.items()
        }
        base: Payload = {
            "team_id": self.team_id,
            "type": "modal",
            "blocks": [],
            "title": {"type": "plain_text", "text": "Modal"},
            "close": None,
            "submit": {"type": "plain_text", "text": "Submit"},
            "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
            "clear_on_close": False,
            "notify_on_close": False,
            "previous_view_id": None,
            "root_view_id": view_id,
            "app_id": self.api_app_id,
            "external_id": "",
            "app_installed_team_id": self.team_id,
            "bot_id": None,
            **(view or {}),
        }
        base.update(
            id=view_id,
            callback_id=callback_id,
            private_metadata=private_metadata,
            state={"values": state},
        )
        payload: Payload = {
            "type": "view_submission",
            "team": {"id": self.team_id, "domain": self.team_domain},
            "user": self._user(user, user_name),
            "api_app_id": self.api_app_id,
            "token": self.verification_token,
            "trigger_id": trigger_id or f"{next(self._ids)}.{secrets.token_hex(16)}",
            "view": base,
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }
        return await self._post_form(payload, bad_signature=bad_signature, stale=stale)

    async def slash_command(
        self,
        command: str,
        text: str,
        user: str,
        channel: str,
        response_url: str,
        *,
        user_name: str | None = None,
        trigger_id: str | None = None,
        bad_signature: bool = False,
        stale: bool = False,
    ) -> Delivery:
        """Invoke a slash command, form-encoded as Slack sends it (not wrapped in `payload`).

        Args:
            command: e.g. ``"/countersign"``.
            text: the words after the command (already escaped, e.g. ``<@U1|alice>``).
            user: who typed it.
            channel: where.
            response_url: where the app answers (``SlackApiStandIn.new_response_url``).
            user_name: The user's name (defaults to the id lowercased).
            trigger_id: Defaults to a fresh one.
            bad_signature: Sign with the wrong secret.
            stale: Sign with a timestamp ten minutes old.
        """
        form = {
            "token": self.verification_token,
            "team_id": self.team_id,
            "team_domain": self.team_domain,
            "channel_id": channel,
            "channel_name": channel.lower(),
            "user_id": user,
            "user_name": user_name or user.lower(),
            "command": command,
            "text": text,
            "api_app_id": self.api_app_id,
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": trigger_id or f"{next(self._ids)}.{secrets.token_hex(16)}",
        }
        return await self._post_command(form, bad_signature=bad_signature, stale=stale)

    # ------------------------------------------------------------------ helpers
    #
    # The three ways a payload leaves: an event (JSON), an interaction (``payload=`` form), a
    # slash command (a plain form). ``SocketModeEventSender`` overrides these three to send
    # the same payloads as Socket Mode envelopes instead.

    async def _post_json(
        self,
        payload: Payload,
        *,
        extra_headers: Mapping[str, str] | None = None,
        bad_signature: bool,
        stale: bool,
    ) -> Delivery:
        body = json.dumps(payload).encode()
        return await self._post_signed(body, "application/json", extra_headers or {}, bad_signature, stale)

    async def _post_form(self, payload: Payload, *, bad_signature: bool, stale: bool) -> Delivery:
        return await self.send_raw(*self.form_request(payload, bad_signature=bad_signature, stale=stale))

    def form_request(
        self, payload: Payload, *, bad_signature: bool = False, stale: bool = False
    ) -> tuple[bytes, dict[str, str]]:
        """An interaction's body (``payload=`` form-encoded JSON) and its signed headers, not sent."""
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return body, self._signed_headers(body, "application/x-www-form-urlencoded", {}, bad_signature, stale)

    async def _post_command(self, form: Mapping[str, str], *, bad_signature: bool, stale: bool) -> Delivery:
        body = urlencode(form).encode()
        return await self._post_signed(body, "application/x-www-form-urlencoded", {}, bad_signature, stale)

    async def _post_signed(
        self,
        body: bytes,
        content_type: str,
        extra_headers: Mapping[str, str],
        bad_signature: bool,
        stale: bool,
    ) -> Delivery:
        return await self.send_raw(body, self._signed_headers(body, content_type, extra_headers, bad_signature, stale))

    def _signed_headers(
        self,
        body: bytes,
        content_type: str,
        extra_headers: Mapping[str, str],
        bad_signature: bool,
        stale: bool,
    ) -> dict[str, str]:
        timestamp = int(time.time()) - (_STALE_SECONDS if stale else 0)
        secret = f"not-{self.signing_secret}" if bad_signature else None
        return {
            "Content-Type": content_type,
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            **self.sign(body, timestamp=timestamp, secret=secret),
            **extra_headers,
        }

    def _message_body(self, user: str, text: str, ts: str, thread_ts: str | None, bot_id: str | None) -> Payload:
        body: Payload = {"type": "message", "user": user, "text": text, "ts": ts}
        if bot_id is None:
            body["client_msg_id"] = str(uuid.uuid4())
        else:
            body.update(bot_id=bot_id, app_id=self.api_app_id)
        body.update(team=self.team_id, blocks=_rich_text_blocks(text))
        if thread_ts is not None:
            body["thread_ts"] = thread_ts
        return body

    def _user(self, user: str, user_name: str | None) -> Payload:
        name = user_name or user.lower()
        return {"id": user, "username": name, "name": name, "team_id": self.home_teams.get(user, self.team_id)}

    def _fake_response_url(self) -> str:
        return f"https://hooks.slack.com/actions/{self.team_id}/{next(self._ids)}/{secrets.token_urlsafe(18)}"

    def _event_id(self) -> str:
        suffix = "".join(random.choices(_ID_ALPHABET, k=8))  # unique by the counter; the suffix only looks like Slack's
        return f"Ev{next(self._ids):02d}{suffix}"

    def _next_ts(self) -> str:
        # Wall-clock microseconds, bumped so that every ts is strictly greater than the last.
        self._last_ts_us = max(time.time_ns() // 1000, self._last_ts_us + 1)
        seconds, micros = divmod(self._last_ts_us, 1_000_000)
        return f"{seconds}.{micros:06d}"


def _rich_text_blocks(text: str) -> list[Payload]:
    """The rich_text block Slack attaches to a typed message, with user mentions parsed."""
    elements: list[Payload] = []
    position = 0
    for match in _MENTION.finditer(text):
        if match.start() > position:
            elements.append({"type": "text", "text": text[position : match.start()]})
        elements.append({"type": "user", "user_id": match.group(1)})
        position = match.end()
    if position < len(text):
        elements.append({"type": "text", "text": text[position:]})
    block_id = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(5))
    return [
        {
            "type": "rich_text",
            "block_id": block_id,
            "elements": [{"type": "rich_text_section", "elements": elements}],
        }
    ]
