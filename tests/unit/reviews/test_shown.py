"""What approvers are shown of a call's arguments: the tool's order, every key, visible shortening."""

from __future__ import annotations

import json
import sys
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.reviews.shown import (
    LEAST_SHOWN,
    ShownLine,
    arrange,
    leaves_free,
    reveal_invisible,
    shorten,
)

HTTP_ORDER = ("method", "url", "headers", "body")


def plain_cost(line: ShownLine) -> int:
    """A line's cost as a plain-text card draws it: its text, a cut marker, a line break."""
    return len(line.text) + (len(f"… (+{line.hidden:,} characters)") if line.hidden else 0) + 1


def as_stored(args: dict) -> dict:
    """`args` in the order PostgreSQL's jsonb gives an object's keys back: shorter keys first."""
    return {key: args[key] for key in sorted(args, key=lambda key: (len(key.encode()), key.encode()))}


def test_the_tool_order_comes_first_whatever_order_the_database_gave():
    """A long `body` read back from jsonb (which puts `url` and `body` first) is still listed after `method` and `headers`."""
    args = {"method": "POST", "url": "https://a.example/", "headers": {"X-Pay-To": "eve"}, "body": "x" * 5_000}
    stored = as_stored(args)
    assert list(stored) == ["url", "body", "method", "headers"]
    assert arrange(stored, HTTP_ORDER).keys == HTTP_ORDER


def test_keys_the_schema_does_not_name_come_after_it_shortest_value_first_then_by_name():
    """Unknown keys follow the tool's own, by the length of their JSON value, ties by name."""
    args = {"zeta": "long value", "alpha": [1, 2, 3], "url": "u", "beta": 1, "aa": 2, "method": "GET"}
    assert arrange(args, HTTP_ORDER).keys == ("method", "url", "aa", "beta", "alpha", "zeta")


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=30), max_size=8), st.randoms())
def test_the_order_never_depends_on_the_order_the_arguments_come_in(args, rnd):
    """Any permutation of the same arguments is laid out the same way."""
    keys = list(args)
    rnd.shuffle(keys)
    shuffled = {key: args[key] for key in keys}
    assert arrange(shuffled, ("b", "a")) == arrange(args, ("b", "a"))
    assert set(arrange(args).keys) == set(args)


def test_whole_lines_when_they_fit():
    """Arguments that fit are shown whole, one `"key": value` line each."""
    lines = shorten(arrange({"url": "https://a.example/", "method": "POST"}, HTTP_ORDER), 500, plain_cost)
    assert lines == (ShownLine('"method": "POST"'), ShownLine('"url": "https://a.example/"'))


def test_every_key_is_shown_and_the_room_goes_to_the_long_values():
    """A long body is shortened; the short keys before and after it stay whole; the room is kept."""
    args = {"method": "POST", "url": "https://a.example/", "headers": {"X-Pay-To": "eve"}, "body": "x" * 10_000}
    arguments = arrange(args, HTTP_ORDER)
    lines = shorten(arguments, 1_000, plain_cost)
    assert lines is not None
    assert [line.text.split(":")[0] for line in lines] == ['"method"', '"url"', '"headers"', '"body"']
    assert [line.hidden for line in lines[:3]] == [0, 0, 0]
    assert lines[2].text == '"headers": {"X-Pay-To": "eve"}'
    body = lines[3]
    assert body.hidden > 0 and len(body.text) + body.hidden == len(arguments.lines()[3])
    assert sum(plain_cost(line) for line in lines) <= 1_000
    assert sum(plain_cost(line) for line in lines) > 1_000 - 2 * len(lines)  # the room is used


def test_many_long_values_share_the_room_and_each_says_how_much_is_hidden():
    """Twenty long values: every key is listed, each value cut visibly, within the room."""
    args = {f"cc{i:02}": "someone@example.com, " * 40 for i in range(20)}
    args["cc19"] += "evil@attacker.example"
    arguments = arrange(args)
    lines = shorten(arguments, 2_000, plain_cost)
    assert lines is not None and len(lines) == 20
    assert {line.text.split('"')[1] for line in lines} == set(args)
    assert all(line.hidden > 0 for line in lines)
    for line, raw in zip(lines, arguments.lines(), strict=True):
        assert raw.startswith(line.text) and len(line.text) + line.hidden == len(raw)
    assert sum(plain_cost(line) for line in lines) <= 2_000


def test_too_many_keys_for_the_room_is_said_not_hidden():
    """When even `LEAST_SHOWN` characters per key do not fit, the layout refuses (None) instead of dropping keys."""
    args = {f"key{i:03}": "v" * 100 for i in range(200)}
    assert shorten(arrange(args), 2_000, plain_cost) is None
    assert shorten(arrange(args), 200 * (LEAST_SHOWN + 40), plain_cost) is not None


def test_invisible_characters_are_revealed_and_never_cut_in_half():
    """A right-to-left override is shown as `\\u202e`; a cut lands before it, never inside its escape."""
    value = "a" * 30 + "\u202e" * 200
    arguments = arrange({"to": value})
    lines = shorten(arguments, 60, plain_cost)
    assert lines is not None
    [line] = lines
    assert "\u202e" not in line.text
    assert "\\u202e" in line.text or line.text.endswith("a")
    assert not line.text.endswith(("\\", "\\u", "\\u2", "\\u20", "\\u202"))
    assert line.hidden == len(arguments.lines()[0]) - len(line.text.replace("\\u202e", "x"))
    assert "\\u202e" in arguments.text() and "\u202e" not in arguments.text()


def test_the_full_text_is_indented_json_in_the_tool_order():
    """`Arguments.text` is the whole arguments, parseable, keys in the tool's order."""
    args = as_stored({"method": "POST", "url": "u", "headers": {"A": "b"}, "body": "é" * 3_000})
    text = arrange(args, HTTP_ORDER).text()
    assert list(json.loads(text)) == list(HTTP_ORDER)
    assert json.loads(text) == args
    assert "é" in text and text.startswith('{\n  "method": "POST"')


def test_reveal_invisible_shows_every_hidden_category():
    """Format, control (but newline and tab), private-use and unassigned characters become escapes."""
    for ch in ("\u202e", "\u200b", "\ufeff", "\x07", "\ue000", "\U000e0001", "\u0378"):
        assert unicodedata.category(ch) in {"Cf", "Cc", "Co", "Cn"}
        assert reveal_invisible(f"a{ch}b") == f"a\\u{ord(ch):04x}b"
    assert reveal_invisible("a\nb\tc é") == "a\nb\tc é"


def test_every_character_that_breaks_a_line_but_the_newline_is_revealed():
    """U+2028, U+2029 and the controls that `str.splitlines` splits on are escapes, so no value draws a line of its own."""
    breakers = [chr(i) for i in range(sys.maxunicode + 1) if len(f"a{chr(i)}b".splitlines()) > 1]
    assert {"\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1e"} <= set(breakers)
    for ch in breakers:
        shown = reveal_invisible(f"a{ch}b")
        assert shown == ("a\nb" if ch == "\n" else f"a\\u{ord(ch):04x}b"), repr(ch)
    arguments = arrange({"subject": 'Q3 report\u2028"cc": []', "cc": ["x@evil.example"]}, ("subject", "cc"))
    assert len(arguments.text().splitlines()) == 6  # {, subject, "cc": [, its address, ], }


def test_a_partial_trust_names_the_arguments_it_leaves_free():
    """A grant binding `method` and `url` leaves `headers` and `body` free; one binding everything leaves none."""
    assert leaves_free(("url", "method"), (*HTTP_ORDER, "extra")) == ("headers", "body", "extra")
    assert leaves_free((), HTTP_ORDER) == ()
    assert leaves_free(("url",), ("url", "body", "body")) == ("body",)
