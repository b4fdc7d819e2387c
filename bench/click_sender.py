"""Sends Approve clicks from a separate process, so the sender does not share the bot's loop.

`bench.turns` starts it with the bot's events URL and signing secret on the command line, then
writes one JSON job per line on stdin: a list of clicks. The clicks of a job are sent at once;
the answer is one JSON line on stdout with each click's ack latency in ms (request sent ->
HTTP response read) and the HTTP statuses. An empty line or end of input ends the process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from tests.standins.slack_events import SlackEventSender


async def click(sender: SlackEventSender, job: dict[str, Any]) -> tuple[float, int]:
    """One Approve click; its ack latency in ms and the HTTP status."""
    started = time.perf_counter()
    delivery = await sender.block_actions(
        job["user"],
        job["channel"],
        job["ts"],
        job["action_id"],
        job["value"],
        job["trigger_id"],
        thread_ts=job["thread_ts"],
    )
    return (time.perf_counter() - started) * 1000, delivery.status


async def serve(url: str, secret: str, team: str) -> None:
    """Read jobs from stdin until an empty line; answer each on stdout."""
    loop = asyncio.get_running_loop()
    async with SlackEventSender(url, secret, team_id=team) as sender:
        print(json.dumps({"ready": True}), flush=True)
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line.strip():
                return
            jobs = json.loads(line)
            results = await asyncio.gather(*(click(sender, job) for job in jobs))
            answer = {"ack_ms": [r[0] for r in results], "status": [r[1] for r in results]}
            print(json.dumps(answer), flush=True)


def main() -> None:
    """Entry point: `python -m bench.click_sender URL SECRET TEAM`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("secret")
    parser.add_argument("team")
    args = parser.parse_args()
    asyncio.run(serve(args.url, args.secret, args.team))


if __name__ == "__main__":
    main()
