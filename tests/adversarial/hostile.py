"""Hypothesis strategies for hostile input, and the checks every property shares.

Text is built from atoms people (and attackers) really send: control characters and NUL,
zero-width and bidi marks, mixed scripts and combining marks, lone surrogates (JSON can
carry them, UTF-8 cannot), both platforms' mention and broadcast syntax, Markdown, and
whitespace of every kind, plus plain random text; `huge` repeats a piece up to a size limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

# cel-python raises the interpreter's recursion limit to 2500 each time it builds an environment
# (CEL's nesting minimums); Hypothesis warns (an error here) when a test changes the limit. The
# bot runs with 2500 after its first condition anyway, so the tests start there too.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 2500))

CONTROL = [chr(c) for c in (*range(0x00, 0x20), 0x7F, 0x85, 0x9B)]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e"]
BIDI = ["\u200e", "\u200f", "\u061c", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2069"]
SPACES = [" ", "\t", "\n", "\r\n", "\u00a0", "\u1680", "\u2003", "\u2028", "\u2029", "\u3000", "\x0b", "\x0c"]
SCRIPTS = [
    "Привет",
    "مرحبا",
    "שלום",
    "你好",
    "こんにちは",
    "नमस्ते",
    "😀",
    "👩\u200d👩\u200d👧",
    "e\u0301\u0301",
    "ﷺ",
    "\U0001d54f",
    "İı",
]
SURROGATES = ["\ud800", "\udfff", "\udbff"]
SLACK_SYNTAX = [
    "<@UBOT>",
    "<@UALICE|alice>",
    "<@W123>",
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<#C1|general>",
    "<!subteam^S1|@team>",
    "<https://evil.example|click>",
    "<mailto:a@b.example>",
    "&lt;",
    "&gt;",
    "&amp;",
    "<",
    ">",
    "&",
]
DISCORD_SYNTAX = [
    "<@1500000000000000002>",
    "<@!1500000000000000002>",
    "<@1700000000000000003>",
    "<@&1600000000000000020>",
    "@everyone",
    "@here",
    "<#1600000000000000010>",
    "<t:0:R>",
    "<:blob:1>",
    "</countersign help:1>",
    "||spoiler||",
]
MARKDOWN = ["```", "`", "*", "**", "_", "~", "> ", "# ", "- ", "[x](https://evil.example)", "\\"]
WORDS = ["echo", "hello", "please", "post", "get", "help", "show", "when", "in", "for", "widget", "args.url"]

ATOMS = [
    *CONTROL,
    *ZERO_WIDTH,
    *BIDI,
    *SPACES,
    *SCRIPTS,
    *SURROGATES,
    *SLACK_SYNTAX,
    *DISCORD_SYNTAX,
    *MARKDOWN,
    *WORDS,
]


def hostile_text(*, max_atoms: int = 24, surrogates: bool = True) -> st.SearchStrategy[str]:
    """Short text made of hostile atoms and random characters."""
    atoms = ATOMS if surrogates else [a for a in ATOMS if a not in SURROGATES]
    piece = st.one_of(st.sampled_from(atoms), st.text(max_size=8))
    return st.lists(piece, max_size=max_atoms).map("".join)


def huge(base: st.SearchStrategy[str], *, limit: int) -> st.SearchStrategy[str]:
    """`base` repeated to somewhere between a few hundred characters and `limit`."""
    return st.tuples(base.filter(bool), st.integers(300, limit)).map(lambda p: (p[0] * (p[1] // len(p[0]) + 1))[: p[1]])


def blank_text() -> st.SearchStrategy[str]:
    """Nothing to read: empty, or only whitespace, zero-width and direction marks."""
    return st.lists(st.sampled_from([*SPACES, *ZERO_WIDTH, *BIDI]), max_size=12).map("".join)


def message_text(*, limit: int, surrogates: bool = True) -> st.SearchStrategy[str]:
    """What a person may send: hostile, blank or huge (up to `limit` characters)."""
    small = hostile_text(surrogates=surrogates)
    return st.one_of(small, small, blank_text(), huge(small, limit=limit))


def json_values(*, max_leaves: int = 12, surrogates: bool = True) -> st.SearchStrategy[Any]:
    """JSON-like values with hostile leaves: huge and non-finite numbers, odd strings, nesting."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.sampled_from([2**63, -(2**63) - 1, 10**30, 2**64]),
        st.floats(allow_nan=True, allow_infinity=True),
        hostile_text(max_atoms=6, surrogates=surrogates),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(hostile_text(max_atoms=3, surrogates=surrogates), inner, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def edit_form_text(*, surrogates: bool = True) -> st.SearchStrategy[str]:
    """What may be typed into an Edit form: broken, deep, huge, non-object or odd JSON.

    With `surrogates`, the text itself may hold lone surrogates (a JSON payload can carry
    them); typed escapes like `"\\ud800"` are always among the literals.
    """
    values = json_values(surrogates=surrogates)
    as_json = values.map(lambda v: json.dumps(v, ensure_ascii=False, allow_nan=True))
    as_ascii_json = values.map(lambda v: json.dumps(v, allow_nan=True))
    deep = st.tuples(st.integers(30, 1500), st.sampled_from(["[", '{"a":'])).map(
        lambda p: p[1] * p[0] + ("1" if p[1] != "[" else "") + ("]" if p[1] == "[" else "}") * p[0]
    )
    literals = st.sampled_from(
        [
            "NaN",
            '{"url": NaN}',
            '{"method": "POST", "url": Infinity}',
            '{"body": -Infinity}',
            "1" * 5000,
            '{"n": 1' + "0" * 4000 + "}",
            '{"a": "\\ud800"}',
            '{"\\udfff": 1}',
            '{"a": "\\u0000"}',
            "[]",
            '"text"',
            "null",
            "true",
            "{",
            '{"a":1,}',
            "\ufeff{}",
            "{'single': 'quotes'}",
            '{"method": "POST", "url": "http://x", "method": "GET"}',
        ]
    )
    return st.one_of(as_json, as_ascii_json, deep, literals, hostile_text(surrogates=surrogates), blank_text())


_TRACE = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|\b[A-Z]\w*(Error|Exception)\((?!\))"
    r"|\b(KeyError|TypeError|AttributeError|ValueError|UnicodeEncodeError|RecursionError|asyncpg)\b"
)


def looks_like_a_trace(text: str) -> bool:
    """Whether `text` shows a stack trace or an exception's repr (nothing a chat user should read)."""
    return bool(_TRACE.search(text))


E2E_SETTINGS = settings(
    max_examples=int(os.environ.get("HOSTILE_MAX_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    # No "explain" phase: it traces every line of the bot while replaying a failure, which
    # takes minutes end to end; the failing example itself is what a reader needs.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
"""Hypothesis settings for properties over the running bot: each example is a real round trip
(HTTP or gateway, PostgreSQL, the model stand-in), so they are few; the bot is shared by the
examples of one test (fixtures are set up once per test, not per example). To explore more,
run with e.g. `HOSTILE_MAX_EXAMPLES=300` (and a longer `--timeout`)."""


# --- admin commands -------------------------------------------------------------------------

COMMAND_WORDS = [
    *("help", "show", "policy", "approvers", "admins", "quorum", "self-approval", "expiry"),
    *("cards", "scope", "agent", "audit", "add", "remove", "on", "off", "for", "in", "limit"),
    *("review", "auto", "deny", "default", "http_request", "calculator", "current_time", "nope"),
    *("channel", "thread", "here", "dm", "react", "subagents", "90s", "0s", "30d", "31d", "1h30m"),
    *("10", "11", "0", "-1", "99999999999999999999", "٣", "²"),
]
CONDITIONS = [
    "args.method != 'GET'",
    "args.url.startsWith('https://internal.example')",
    "args.nope == 1",
    "args.url ==",
    "size(args.url) > 99999999999999999999999",
    "args.url.matches('(a+)+$')",
    "'\\u0000' == args.url",
    "args.url == '\x00'",
    "1/0 == 1",
    "true",
    "\"args.method == 'POST'\"",
]


def command_text(mentions: list[str]) -> st.SearchStrategy[str]:
    """Text after `/countersign`: near-valid commands, hostile words, deep or odd conditions."""
    word = st.one_of(st.sampled_from([*COMMAND_WORDS, *mentions]), hostile_text(max_atoms=3, surrogates=False))
    words = st.lists(word, max_size=8).map(" ".join)
    deep = st.tuples(st.integers(50, 3000), st.sampled_from(["(", "!", "-", "[", "args.url + "])).map(_nested)
    condition = st.one_of(st.sampled_from(CONDITIONS), hostile_text(surrogates=False), deep)
    policy = st.tuples(st.sampled_from(["http_request", "calculator", "nope"]), condition).map(
        lambda p: f"policy {p[0]} review when {p[1]}"
    )
    return st.one_of(words, words, policy)


def _nested(spec: tuple[int, str]) -> str:
    """`depth` levels of `opener` around `true`, mostly within the 1,000 characters a condition may have."""
    depth, opener = spec
    closer = {"(": ")", "[": "]"}.get(opener, "")
    if depth < 1000:
        depth = min(depth, 996 // len(opener + closer))
    return opener * depth + "true" + closer * depth


REFUSED_PREFIXES = ("That did not work", "That condition was refused", "Only admins", "Settings belong")
"""How a refused `/countersign` reply starts (adapters.words.admin.error_text): nothing changed."""
UNEXPECTED = "Something went wrong"
"""How the reply to an unexpected failure starts: never for any input."""

CONFIG_TABLES = ("tool_policies", "approvers", "bot_admins", "settings")


async def config_snapshot(pool: Any) -> tuple[Any, ...]:
    """Every admin setting and the number of `config` audit rows, comparable across a command."""
    tables = []
    for table in CONFIG_TABLES:
        rows = await pool.fetch(f"SELECT * FROM {table}")  # noqa: S608 - fixed table names
        tables.append(sorted(repr(sorted((k, v) for k, v in dict(r).items() if not k.endswith("_at"))) for r in rows))
    audits = await pool.fetchval("SELECT count(*) FROM audit_log WHERE kind = 'config'")
    return (*tables, audits)


def check_command_reply(reply: str, before: tuple[Any, ...], after: tuple[Any, ...]) -> None:
    """A reply is words, never a failure; a refused command changed nothing; a change is audited."""
    assert reply and not looks_like_a_trace(reply), reply
    assert not reply.startswith(UNEXPECTED), reply
    if reply.startswith(REFUSED_PREFIXES):
        assert after == before, reply
    elif after[:-1] != before[:-1]:
        assert after[-1] > before[-1], f"a change without a config audit row: {reply}"


async def world(bot) -> dict[str, Any]:
    """What a refused interaction must leave as it was: every approval's status, the trust grants,
    the conversations' turns and stop columns, and the tool runs."""
    pool = bot.runtime.database.pool
    approvals = await pool.fetch("SELECT id, status, decided_by_id FROM approvals ORDER BY id")
    grants = await pool.fetch("SELECT * FROM trust_grants ORDER BY 1")
    stops = await pool.fetch(
        "SELECT thread_id, turn_id, stop_requested_at, stopped_by_id, stopped_by_name FROM conversations "
        "ORDER BY thread_id"
    )
    runs = await pool.fetchval("SELECT count(*) FROM tool_runs")
    return {
        "approvals": [tuple(r) for r in approvals],
        "trust_grants": [tuple(r) for r in grants],
        "stops": [tuple(r) for r in stops],
        "tool_runs": runs,
    }


async def pauses_and_turns(bot, approvals: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """By name, the pause (review id as the batch buttons carry it) and the turn id (as a Stop button carries
    it) of each named approval's conversation; an ended turn that kept no id gets a made-up one."""
    pauses: dict[str, str] = {}
    turns: dict[str, str] = {}
    for name, approval_id in approvals.items():
        row = await bot.runtime.database.pool.fetchrow(
            "SELECT a.review_id, c.turn_id FROM approvals a JOIN conversations c USING (thread_id) WHERE a.id = $1",
            approval_id,
        )
        pauses[name] = row["review_id"].hex
        turns[name] = row["turn_id"] or hashlib.sha256(name.encode()).hexdigest()[:32]
    return pauses, turns
