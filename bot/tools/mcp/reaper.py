"""Runs a stdio MCP server's command, and ends every process it started once it ends.

The MCP SDK starts a stdio server in a session of its own, and ends that process group only
when the server does not exit within 2 s of its stdin closing. A server that does exit (as it
should) leaves behind whatever it started itself: `sh -c "python server.py"`'s python, npx's
node, a server's own helper. So the bot does not start the configured command directly but
`python reaper.py GRACE_S MAX_BYTES COMMAND [ARG...]` (`wrapped`), which starts the command in a process
group of its own and, once it exits, or once the SDK stops the reaper, ends that whole group:
SIGTERM, then SIGKILL to whatever is left after `GRACE_S` seconds
(docs/decisions/0052-stdio-server-process-trees.md).

The command inherits the reaper's standard input and error, environment and working directory:
the server sees what it would see when started directly, but for its standard output, which the
reaper relays line by line (one line is one JSON-RPC message). A line longer than `MAX_BYTES`
is never passed on: were it, the SDK would read it on the bot's event loop, in time that grows
with the square of its length (30 MB took minutes, and froze every conversation meanwhile). The
reaper keeps only its start and end, and when it is an answer, passes on in its place a JSON-RPC
error for the same request id (`ANSWER_TOO_LARGE`, its `data` naming the size and the limit),
which the bot reads as "outcome unknown": the server did run the call
(docs/decisions/0053-bounded-mcp-answers.md). The reaper lets go of its own copy of standard
input, so that stdin's end is the server's alone. On Linux the reaper is its descendants' subreaper: an
orphaned descendant becomes its child, and it reaps it, so none is left a zombie (e.g. under a
bot that runs as PID 1 in a container).

This file is run with `python -I -S` and imports only the standard library: it starts with
every stdio server, and must never import the bot.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from types import FrameType

_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_POLL_S = 0.01
_PR_SET_CHILD_SUBREAPER = 36
"""Linux `prctl` option (include/uapi/linux/prctl.h)."""
_READ_BYTES = 65_536
_KEPT_BYTES = 1_024
"""Bytes kept of each end of a line over the limit: where its JSON-RPC id is."""

ANSWER_TOO_LARGE = -32_099
"""The JSON-RPC error code of the error passed on in place of an answer over the limit (a code
of the implementation-defined range); its `data` is `{"countersign": ANSWER_TOO_LARGE_DATA,
"bytes": <the answer's>, "limit": <the limit>}`."""
ANSWER_TOO_LARGE_DATA = "answer_too_large"

_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
_HEAD_ID = re.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_TAIL_ID = re.compile(rb'"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')
"""A JSON-RPC message's id when it is its first key (after `jsonrpc`), or its last (before it)."""


class _StoppedError(Exception):
    """The reaper was asked to stop before its command ended."""


def wrapped(command: str, args: list[str], grace_s: float, max_bytes: int) -> tuple[str, list[str]]:
    """The command and arguments that start `command` under the reaper (POSIX), or unchanged (Windows).

    Args:
        command: the configured command.
        args: its arguments.
        grace_s: seconds the command's process group has, after SIGTERM, before SIGKILL; keep
            it below the SDK's own wait before it kills the reaper (`FORCE_KILL_TIMEOUT`).
        max_bytes: the longest line of the server's standard output passed on, in bytes.

    On Windows the SDK puts the server in a Job Object, which ends its whole tree already; its
    answers are not bounded there.
    """
    if sys.platform == "win32":  # pragma: no cover - the SDK's Job Object ends the tree
        return command, args
    return sys.executable, ["-I", "-S", os.path.abspath(__file__), f"{grace_s:g}", str(max_bytes), command, *args]


def main(argv: list[str]) -> int:
    """Run `argv[2:]`, relay its standard output, and end its process group once it ends.

    Args:
        argv: `[GRACE_S, MAX_BYTES, COMMAND, ARG...]`.

    Returns:
        The command's exit status (128 + the signal's number when a signal ended it); 127 when
        it cannot be started (the reason is written to standard error, the server's log); 2 for
        a malformed `argv`.
    """
    if len(argv) < 3:
        sys.stderr.write("usage: reaper.py GRACE_S MAX_BYTES COMMAND [ARG...]\n")
        return 2
    grace_s, max_bytes = float(argv[0]), int(argv[1])
    _become_subreaper()
    for stop in _STOPS:
        signal.signal(stop, _raise_stopped)
    read_end, write_end = os.pipe()
    try:
        child = subprocess.Popen(argv[2:], stdout=write_end, process_group=0)  # noqa: S603 - the configured command
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[2]!r}: {exc}\n")
        return 127
    finally:
        os.close(write_end)
    _let_go_of_stdin()
    relay = threading.Thread(target=_relay, args=(read_end, 1, max_bytes), name="relay", daemon=True)
    relay.start()
    status: int | None = None
    with contextlib.suppress(_StoppedError):
        status = child.wait()
    for stop in _STOPS:  # a second signal must not cut the ending short
        signal.signal(stop, signal.SIG_IGN)
    end_group(child.pid, grace_s, child)
    relay.join(grace_s)  # the rest of what the server wrote (the pipe ends with its group)
    if status is None:
        status = child.returncode if child.returncode is not None else -signal.SIGTERM
    return status if status >= 0 else 128 - status


class _Line:
    """The line being read: whole while within the limit, else only its ends and its length."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.head = b""
        self.tail = b""

    @property
    def over(self) -> bool:
        return self.size > self.limit

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        self.size += len(piece)
        if not self.over:
            self.parts.append(piece)
            return
        if self.parts:  # just went over: keep the start, let go of the rest
            whole = b"".join(self.parts)
            self.head, self.tail, self.parts = whole[:_KEPT_BYTES], whole[-_KEPT_BYTES:], []
        if len(self.head) < _KEPT_BYTES:
            self.head += piece[: _KEPT_BYTES - len(self.head)]
        self.tail = (self.tail + piece)[-_KEPT_BYTES:]

    def take(self) -> bytes:
        """What to pass on for this line (ending with a newline), or b"" for nothing; starts a new line."""
        over = self.over
        out = _too_large(self.head, self.tail, self.size, self.limit) if over else b"".join(self.parts) + b"\n"
        self.parts, self.size, self.head, self.tail = [], 0, b"", b""
        return out


def _relay(source: int, sink: int, limit: int) -> None:
    """Pass on `source`'s lines to `sink` until `source` ends, each over `limit` bytes as an error."""
    line = _Line(limit)
    writing = True
    while chunk := _read(source):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            line.add(chunk[start:end])
            out = line.take()
            if writing and out:
                writing = _write(sink, out)  # once the bot is gone, read on so the server never blocks
            start = end + 1
        line.add(chunk[start:])
    os.close(source)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, _READ_BYTES)
    except OSError:
        return b""


def _write(fd: int, data: bytes) -> bool:
    """Write all of `data`; False once the other end is gone."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except OSError:
            return False
    return True


def _too_large(head: bytes, tail: bytes, size: int, limit: int) -> bytes:
    """The line passed on for a message of `size` bytes over `limit`: an error for its id, or b"" for none.

    Said on standard error too (the bot's log). A message whose id cannot be found at either end,
    or that is the server's own request (no answer of the bot's), is dropped.
    """
    found = _HEAD_ID.search(head) or _TAIL_ID.search(tail)
    request = b'"method"' in head and b'"result"' not in head and b'"error"' not in head
    what = f"a message of {size} bytes from the server is over the limit of {limit} bytes"
    if found is None or request:
        sys.stderr.write(f"countersign: {what}; dropped\n")
        return b""
    sys.stderr.write(f"countersign: {what}; answered with an error instead\n")
    error = {
        "code": ANSWER_TOO_LARGE,
        "message": f"the answer had {size} bytes, over the limit of {limit} bytes",
        "data": {"countersign": ANSWER_TOO_LARGE_DATA, "bytes": size, "limit": limit},
    }
    message = {"jsonrpc": "2.0", "id": json.loads(found.group(1)), "error": error}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def end_group(pgid: int, grace_s: float, leader: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group `pgid`, and SIGKILL what is left of it after `grace_s` seconds.

    Args:
        pgid: the group (its leader's pid).
        grace_s: seconds the group has to end after SIGTERM.
        leader: the group's leader when it is this process's child: reaped as it ends, so that
            it does not keep the group alive as a zombie.

    Children this process inherited as subreaper are reaped as they end, for the same reason.
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:
        pass  # EPERM never proves the group is gone: wait, then escalate
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(leader)
        if not _group_alive(pgid):
            return
        time.sleep(_POLL_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(pgid):  # reap what SIGKILL ended
        _reap(leader)
        time.sleep(_POLL_S)


def _reap(leader: subprocess.Popen[bytes] | None) -> None:
    """Reap the leader and any inherited orphan that has ended; never blocks."""
    if leader is not None:
        leader.poll()
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _group_alive(pgid: int) -> bool:
    """Whether the group has a member (signal 0; only ESRCH proves it gone)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise _StoppedError


def _let_go_of_stdin() -> None:
    """Point this process's standard input at /dev/null (the server has its own copy).

    Standard output is where the server's lines are relayed to; standard error is where a
    failure of the reaper itself is said.
    """
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)


def _become_subreaper() -> None:
    """On Linux, become the subreaper of this process's descendants; elsewhere, nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # orphans then go to init, which reaps them


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
