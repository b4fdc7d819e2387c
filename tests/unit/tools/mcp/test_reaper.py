"""The reaper's relay of a stdio server's lines: within the limit as they are, over it as an error for the same id."""

from __future__ import annotations

import json
import os
import threading

import pytest

from bot.tools.mcp.reaper import ANSWER_TOO_LARGE, ANSWER_TOO_LARGE_DATA, _relay


def relayed(data: bytes, limit: int) -> bytes:
    """What the relay passes on of `data` written to it in 7-byte pieces, with `limit`."""
    source_read, source_write = os.pipe()
    sink_read, sink_write = os.pipe()
    out: list[bytes] = []

    def drain() -> None:
        while chunk := os.read(sink_read, 65_536):
            out.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    relay = threading.Thread(target=_relay, args=(source_read, sink_write, limit))
    relay.start()
    for start in range(0, len(data), 7):
        os.write(source_write, data[start : start + 7])
    os.close(source_write)
    relay.join(30)
    os.close(sink_write)
    reader.join(30)
    os.close(sink_read)
    return b"".join(out)


def test_lines_within_the_limit_pass_as_they_are():
    """Every line up to the limit, empty ones too, is passed on unchanged and in order."""
    data = b'{"jsonrpc":"2.0","id":1,"result":{}}\n\n{"jsonrpc":"2.0","method":"x"}\n'
    assert relayed(data, 40) == data


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"text":"' + b"x" * 5000 + b'","id":9}}', 7),
        (b'{"result":{"content":[{"id":3,"text":"' + b"y" * 5000 + b'"}]},"jsonrpc":"2.0","id":"a\\"b"}', 'a"b'),
        (b'{"result":{"t":"' + b"z" * 5000 + b'"},"id":12,"jsonrpc":"2.0"}\r', 12),
    ],
    ids=["id-first", "id-last", "id-then-jsonrpc"],
)
def test_an_answer_over_the_limit_becomes_an_error_for_its_id(line, request_id):
    """An answer longer than the limit is replaced by one ANSWER_TOO_LARGE error naming its id, size and limit."""
    before, after = b'{"jsonrpc":"2.0","id":0,"result":{}}\n', b'{"jsonrpc":"2.0","id":99,"result":{}}\n'
    out = relayed(before + line + b"\n" + after, 1000).splitlines(keepends=True)
    assert out[0] == before and out[2] == after
    error = json.loads(out[1])
    assert error["id"] == request_id
    assert error["error"]["code"] == ANSWER_TOO_LARGE
    assert error["error"]["data"] == {"countersign": ANSWER_TOO_LARGE_DATA, "bytes": len(line), "limit": 1000}


def test_a_request_of_the_server_over_the_limit_is_dropped():
    """A server's own request over the limit is not answered in its place: it is dropped, and the next line passes."""
    line = b'{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{"t":"' + b"q" * 5000 + b'"}}\n'
    after = b'{"jsonrpc":"2.0","id":5,"result":{}}\n'
    assert relayed(line + after, 1000) == after
