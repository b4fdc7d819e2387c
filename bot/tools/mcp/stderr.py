"""A stdio MCP server's stderr as the bot's own log lines: bounded in length and rate, with its key.

Left alone, a stdio server writes its stderr straight to the bot's (the MCP SDK's default), and
its lines (often rich-formatted, with colours and boxes) break `LOG_FORMAT=json`, whose every
line must be one JSON object. Instead the server gets the write end of a pipe as its stderr
(the MCP SDK's `stdio_client(errlog=...)`), and a task reads the other end line by line and logs
each as `MCP server <key>: <line>` at INFO, with `mcp_server` set (`bot.base.log_context`). A line is
cut at `MAX_LINE_CHARS`; terminal escapes and other control characters are dropped; past
`BURST_LINES` lines at once, at most `LINES_PER_S` a second are logged and the rest are counted
and said in one line (docs/decisions/0044-mcp-operations.md). The pipe is always read, so a
chatty server never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from typing import TextIO

from bot.base.log_context import about

log = logging.getLogger(__name__)

MAX_LINE_CHARS = 1_000
"""Characters of one stderr line logged; the rest is cut and the cut said."""
LINES_PER_S = 20.0
"""Stderr lines logged per second per server once a burst is spent."""
BURST_LINES = 100
"""Stderr lines logged at once (e.g. a server's start) before `LINES_PER_S` applies."""
CLOSE_WAIT_S = 2.0
"""Seconds `aclose` waits for the last lines (the pipe's end) before it stops reading."""
_READ_BYTES = 65_536
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f]")
"""Terminal escapes (colours, cursor moves, titles) and control characters other than tab."""


class StderrLog:
    """The pipe one stdio server's process writes its stderr to, read into the bot's log.

    Args:
        key: the server's key in the MCP servers file (`mcp_server` of each line).
        max_line_chars: characters of a line logged.
        lines_per_s: lines logged per second once `burst_lines` are spent.
        burst_lines: lines logged at once.

    Use: `writer = stderr.open()` before the server starts (its `log_file`), `await
    stderr.aclose()` once its session has ended.
    """

    def __init__(
        self,
        key: str,
        *,
        max_line_chars: int = MAX_LINE_CHARS,
        lines_per_s: float = LINES_PER_S,
        burst_lines: int = BURST_LINES,
    ) -> None:
        self.key = key
        self._max = max_line_chars
        self._rate = lines_per_s
        self._burst = float(burst_lines)
        self._tokens = float(burst_lines)
        self._refilled = time.monotonic()
        self._dropped = 0
        self._writer: TextIO | None = None
        self._task: asyncio.Task[None] | None = None

    def open(self) -> TextIO:
        """A new pipe, read from now on in the running event loop; returns its write end for the server.

        Raises:
            OSError: no pipe could be made (out of file descriptors).
        """
        read_fd, write_fd = os.pipe()
        self._writer = os.fdopen(write_fd, "w", encoding="utf-8")
        reading = os.fdopen(read_fd, "rb", buffering=0)
        self._task = asyncio.create_task(self._read(reading), name=f"mcp-stderr-{self.key}")
        return self._writer

    async def aclose(self) -> None:
        """Close the bot's copy of the write end, log what is left, and stop reading.

        The pipe ends once the server's process (and any child it left holding its stderr) has
        gone too; reading stops after `CLOSE_WAIT_S` seconds otherwise. Never raises.
        """
        writer, self._writer = self._writer, None
        task, self._task = self._task, None
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.close()
        if task is None:
            return
        done, _ = await asyncio.wait([task], timeout=CLOSE_WAIT_S)
        if not done:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._say_dropped()

    async def _read(self, pipe: object) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_READ_BYTES)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        pending = b""
        cutting = False  # inside a line already logged cut: skip to its end
        try:
            while chunk := await reader.read(_READ_BYTES):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    if not cutting:
                        self._line(raw)
                    cutting = False
                if not cutting and len(pending) > self._max * 4:  # a line without end: log its start now
                    self._line(pending)
                    pending, cutting = b"", True
                elif cutting:
                    pending = b""
            if pending and not cutting:
                self._line(pending)
        except Exception:
            log.exception("MCP server %s: its stderr could not be read", self.key)
        finally:
            transport.close()

    def _line(self, raw: bytes) -> None:
        """Log one line of the server's stderr, or count it when over the rate."""
        text = _ESCAPES.sub("", raw.decode("utf-8", errors="replace")).rstrip()
        if not text.strip():
            return
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self._rate)
        self._refilled = now
        if self._tokens < 1:
            self._dropped += 1
            return
        self._tokens -= 1
        self._say_dropped()
        if len(text) > self._max:
            text = f"{text[: self._max]} [cut: over {self._max} characters]"
        with about(mcp_server=self.key):
            log.info("MCP server %s: %s", self.key, text)

    def _say_dropped(self) -> None:
        if self._dropped:
            with about(mcp_server=self.key):
                log.warning(
                    "MCP server %s: %d lines of its stderr were not logged (over %g lines a second)",
                    self.key,
                    self._dropped,
                    self._rate,
                )
            self._dropped = 0
