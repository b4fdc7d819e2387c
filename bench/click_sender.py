"""Sends Approve clicks from a separate process, so the sender does not share the bot's loop.

`bench.turns` starts it with the bot's events URL and signing secret on the command line, then
writes one JSON job per line on stdin: a list of clicks. The clicks of a job are sent at once;
the answer is one JSON line on stdout with each click's ack latency in ms, its HTTP status and
the worker that answered it.
An empty line or end of input ends the process.

What is measured is what Slack would see of the bot: from the moment the click's connection is
opened to the moment the last byte of the response is read, each click on a connection of its own
(Slack does not promise to reuse one). Everything the sender itself can do beforehand is done
before the burst starts, because on this machine the sender shares the bot's two cores and Slack's
servers do not: every request is built and signed first (`SlackEventSender.block_actions_payload` and `form_request`),
and it is written and read with h11 over asyncio streams, which costs the sender a fraction of what
a pooled client such as aiohttp's does per request (aiohttp's pool also holds at most 100
connections, so a burst of 200 queued half its clicks in the sender; decision 0028).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import h11

from countersign import event_loop
from tests.standins.slack_events import SlackEventSender


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


async def deliver(endpoint: Endpoint, request: bytes) -> tuple[float, int, str]:
    """Open a connection, send `request`, read the whole response; (ms taken, HTTP status, worker).

    The worker is the response's `X-Countersign-Worker` header (`countersign run --workers N`
    names the worker that answered), or "" without it.

    Raises:
        OSError: the connection failed.
        h11.ProtocolError: the bot's answer was not HTTP/1.1.
        ConnectionError: the bot closed the connection before answering.
    """
    connection = h11.Connection(h11.CLIENT)
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port)
    try:
        writer.write(request)
        status, worker = 0, ""
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("the bot closed the connection before answering")
                connection.receive_data(data)
            elif isinstance(event, h11.Response):
                status = event.status_code
                worker = dict(event.headers).get(b"x-countersign-worker", b"").decode()
            elif isinstance(event, h11.EndOfMessage):
                return (time.perf_counter() - started) * 1000, status, worker
    finally:
        writer.close()


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


async def serve(url: str, secret: str, team: str) -> None:
    """Read jobs from stdin until an empty line; answer each on stdout."""
    loop = asyncio.get_running_loop()
    endpoint = Endpoint.of(url)
    sender = SlackEventSender(url, secret, team_id=team)  # builds and signs; never sends here
    print(json.dumps({"ready": True}), flush=True)
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line.strip():
            return
        requests = [prepare(sender, endpoint, job) for job in json.loads(line)]
        results = await asyncio.gather(*(deliver(endpoint, request) for request in requests))
        answer = {
            "ack_ms": [r[0] for r in results],
            "status": [r[1] for r in results],
            "worker": [r[2] for r in results],
        }
        print(json.dumps(answer), flush=True)


def main() -> None:
    """Entry point: `python -m bench.click_sender URL SECRET TEAM`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("secret")
    parser.add_argument("team")
    args = parser.parse_args()
    # uvloop, as the bot runs: the sender shares the bot's two cores, and Slack's servers do not.
    event_loop.run(serve(args.url, args.secret, args.team), "auto")


if __name__ == "__main__":
    main()
