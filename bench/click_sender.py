"""Sends Approve clicks from a separate process, so the sender does not share the bot's loop.

`bench.turns` starts it with the bot's events URL and signing secret on the command line, then
writes one JSON job per line on stdin: a list of clicks. The clicks of a job are sent at once;
the answer is one JSON line on stdout with each click's ack latency in ms, its HTTP status and
the worker that answered it, or with `error` saying why the burst failed (a connection refused
or reset, an answer that is not HTTP, a timeout).
An empty line or end of input ends the process.

What is measured is what Slack would see of the bot: from the moment the click's connection is
opened to the moment the last byte of the response is read, each click on a connection of its own
(Slack does not promise to reuse one). On this machine the sender shares the bot's two cores and
Slack's servers do not, so the sender spends as little CPU as it can while a burst is in flight
(decision 0028):

- every request is built and signed before the burst (`SlackEventSender.block_actions_payload`
  and `form_request`) and written out as bytes with h11;
- the burst itself is one `selectors` loop over non-blocking sockets (epoll on Linux) that only
  connects, writes, reads and takes the time: no event loop, task, stream or parser per click.
  An asyncio sender (h11 over asyncio streams on uvloop) spent about 0.3 ms of CPU per click,
  a third of what the bot spends acking it, on the same two cores;
- each response is parsed with h11 after the whole burst is answered.
"""

from __future__ import annotations

import argparse
import errno
import json
import re
import selectors
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import h11

from tests.standins.slack_events import SlackEventSender

BURST_TIMEOUT_S = 25.0
"""How long a burst may take, in seconds, before the sender gives up on it: less than the
30 s `bench.common.clicks` waits for the sender's answer, so that the answer says what went wrong."""


@dataclass(frozen=True)
class Endpoint:
    """Where clicks are posted: host, port and path of the bot's events URL."""

    host: str
    port: int
    path: str

    @classmethod
    def of(cls, url: str) -> Endpoint:
        """Split an `http://host:port/path` URL.

        Raises:
            ValueError: the URL is not plain HTTP with a host and a port.
        """
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"not an http://host:port/path URL: {url!r}")
        return cls(parts.hostname, parts.port, parts.path or "/")


def request_bytes(endpoint: Endpoint, body: bytes, headers: dict[str, str]) -> bytes:
    """The whole HTTP/1.1 request (head and body) as h11 writes it, connection closed after."""
    connection = h11.Connection(h11.CLIENT)
    head = [
        ("Host", f"{endpoint.host}:{endpoint.port}"),
        ("Content-Length", str(len(body))),
        ("Connection", "close"),
        *headers.items(),
    ]
    data = connection.send(h11.Request(method="POST", target=endpoint.path, headers=head))
    data += connection.send(h11.Data(data=body))
    data += connection.send(h11.EndOfMessage())
    return data


@dataclass(frozen=True)
class Answer:
    """One click's answer: ms from its `connect()` to its response read whole, HTTP status, worker.

    The worker is the response's `X-Countersign-Worker` header (`countersign run --workers N`
    names the worker that answered), or "" without it.
    """

    ms: float
    status: int
    worker: str


@dataclass
class _Click:
    """One click in flight: its socket, what is left to write, what was read, when it started."""

    sock: socket.socket
    unsent: memoryview
    started: float
    received: list[bytes] = field(default_factory=list)
    ms: float | None = None


def burst(endpoint: Endpoint, requests: list[bytes], timeout_s: float = BURST_TIMEOUT_S) -> list[Answer]:
    """Send every request at once, each on a connection of its own; their answers, in order.

    A click's time runs from its `connect()` to the read that completes its response, by the
    response's `Content-Length` (without one, to the read that finds the connection closed). The
    connection is read until the bot closes it, as the request's `Connection: close` asks, and
    the responses are parsed once every connection is closed.

    Raises:
        ConnectionError: a connection failed or was reset, or the bot closed one without an answer.
        h11.ProtocolError: an answer was not HTTP/1.1.
        TimeoutError: the burst was not answered within `timeout_s` seconds.
    """
    selector = selectors.DefaultSelector()
    clicks: list[_Click] = []
    try:
        for request in requests:
            clicks.append(_connect(selector, endpoint, request))
        _run(selector, clicks, timeout_s)
    finally:
        for click in clicks:
            click.sock.close()
        selector.close()
    return [_answer(click) for click in clicks]


def _connect(selector: selectors.BaseSelector, endpoint: Endpoint, request: bytes) -> _Click:
    """Start a non-blocking connect for one click and wait for it to be writable."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    started = time.perf_counter()
    code = sock.connect_ex((endpoint.host, endpoint.port))
    if code not in (0, errno.EINPROGRESS):
        sock.close()
        reason = errno.errorcode.get(code, code)
        raise ConnectionError(f"could not connect to {endpoint.host}:{endpoint.port}: {reason}")
    click = _Click(sock, memoryview(request), started)
    selector.register(sock, selectors.EVENT_WRITE, click)
    return click


def _run(selector: selectors.BaseSelector, clicks: list[_Click], timeout_s: float) -> None:
    """Write each request once its connection is up, read until each connection closes."""
    open_clicks = len(clicks)
    deadline = time.monotonic() + timeout_s
    while open_clicks:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{open_clicks} of {len(clicks)} clicks unanswered after {timeout_s:.0f} s")
        for key, events in selector.select(left):
            click: _Click = key.data
            if events & selectors.EVENT_WRITE:
                _write(selector, click)
            elif _read(click):
                selector.unregister(click.sock)
                open_clicks -= 1


def _write(selector: selectors.BaseSelector, click: _Click) -> None:
    """The socket can be written: send what is left of the request; once it is all sent, read."""
    error = click.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if error:
        raise ConnectionError(f"a click's connection failed: {errno.errorcode.get(error, error)}")
    sent = click.sock.send(click.unsent)
    click.unsent = click.unsent[sent:]
    if not click.unsent:
        selector.modify(click.sock, selectors.EVENT_READ, click)


def _read(click: _Click) -> bool:
    """The socket can be read: keep what came, time a completed response; True once the bot closed the connection."""
    now = time.perf_counter()
    data = click.sock.recv(65536)
    if data:
        click.received.append(data)
        if click.ms is None and _complete(b"".join(click.received)):
            click.ms = (now - click.started) * 1000
        return False
    if click.ms is None:
        click.ms = (now - click.started) * 1000
    return True


_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*([0-9]+)", re.IGNORECASE)


def _complete(received: bytes) -> bool:
    """Whether `received` holds a whole response head and as much body as its `Content-Length` says."""
    head_end = received.find(b"\r\n\r\n")
    if head_end < 0:
        return False
    length = _CONTENT_LENGTH.search(received, 0, head_end)
    return length is not None and len(received) >= head_end + 4 + int(length[1])


def _answer(click: _Click) -> Answer:
    """Parse a click's response (after the burst)."""
    if not click.received:
        raise ConnectionError("the bot closed the connection before answering")
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method="POST", target="/", headers=[("Host", "bot"), ("Content-Length", "0")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(b"".join(click.received))
    connection.receive_data(b"")
    status, worker = 0, ""
    while True:
        event = connection.next_event()
        if isinstance(event, h11.Response):
            status = event.status_code
            worker = dict(event.headers).get(b"x-countersign-worker", b"").decode()
        elif isinstance(event, h11.EndOfMessage):
            assert click.ms is not None  # taken at the latest when the connection closed
            return Answer(click.ms, status, worker)
        elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
            raise ConnectionError("the bot closed the connection in the middle of its answer")


def prepare(sender: SlackEventSender, endpoint: Endpoint, job: dict[str, Any]) -> bytes:
    """One Approve click as request bytes, signed now."""
    payload = sender.block_actions_payload(
        job["user"],
        job["channel"],
        job["ts"],
        job["action_id"],
        job["value"],
        job["trigger_id"],
        thread_ts=job["thread_ts"],
    )
    return request_bytes(endpoint, *sender.form_request(payload))


def serve(url: str, secret: str, team: str) -> None:
    """Read jobs from stdin until an empty line; answer each on stdout."""
    endpoint = Endpoint.of(url)
    sender = SlackEventSender(url, secret, team_id=team)  # builds and signs; never sends here
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            return
        requests = [prepare(sender, endpoint, job) for job in json.loads(line)]
        try:
            answers = burst(endpoint, requests)
        except (OSError, TimeoutError, h11.ProtocolError) as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
            continue
        reply = {
            "ack_ms": [a.ms for a in answers],
            "status": [a.status for a in answers],
            "worker": [a.worker for a in answers],
        }
        print(json.dumps(reply), flush=True)


def main() -> None:
    """Entry point: `python -m bench.click_sender URL SECRET TEAM`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("secret")
    parser.add_argument("team")
    args = parser.parse_args()
    serve(args.url, args.secret, args.team)


if __name__ == "__main__":
    main()
