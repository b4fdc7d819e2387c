"""The canonical form of send_email arguments: one spelling per mailbox, refusals with reasons."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.base.errors import InvalidArgumentsError
from bot.tools.email_address import LINE_BREAKS, canonical_address, canonical_send_email_args

_FULL_WIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}
"""ASCII `!`..`~` to their full-width forms (NFKC maps them back)."""


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("ana@example.com", "ana@example.com"),
        ("a@EXTERNAL.example", "a@external.example"),
        ("a@external.example.", "a@external.example"),
        (" \ta@external.example\n", "a@external.example"),
        ("a@\uff45\uff58\uff54\uff45\uff52\uff4e\uff41\uff4c.example", "a@external.example"),
        ("a@external\u3002example", "a@external.example"),
        ("a@external\uff0eexample", "a@external.example"),
        ("a@external\uff61example", "a@external.example"),
        ("\uff41\uff20external.example", "a@external.example"),
        ("Ana.B+Tag@Example.COM", "ana.b+tag@example.com"),
        ("kontakt@bücher.de", "kontakt@xn--bcher-kva.de"),
        ("kontakt@XN--BCHER-KVA.de", "kontakt@xn--bcher-kva.de"),
        ("kontakt@BÜCHER.de", "kontakt@xn--bcher-kva.de"),
        ("bot@localhost", "bot@localhost"),
    ],
)
def test_spellings_of_one_mailbox_have_one_canonical_address(written, canonical):
    """Case, surrounding whitespace, the root's dot, full-width letters, other full stops and IDNA collapse."""
    assert canonical_address(written) == canonical
    assert canonical_address(canonical) == canonical


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("ana", "0 `@`"),
        ("a@b@example.com", "2 `@`"),
        ("a\uff20b@example.com", "2 `@`"),  # a full-width @ counts as one
        ("Ana <ana@example.com>", "not a bare email address"),
        ('"ana b"@example.com', "not a bare email address"),
        ("ana(comment)@example.com", "not a bare email address"),
        ("ana b@example.com", "not a bare email address"),
        ("ana..b@example.com", "not a bare email address"),
        ("ąna@example.com", "not a bare email address"),
        ("@example.com", "not a bare email address"),
        ("a" * 65 + "@example.com", "not a bare email address"),
        ("ana@", "no valid domain"),
        ("ana@example..com", "no valid domain"),
        ("ana@exa_mple.com", "no valid domain"),
        ("ana@-bad-.example", "no valid domain"),
        ("ana@127.0.0.1", "no valid domain"),
        ("ana@[127.0.0.1]", "no valid domain"),
        ("ana@example.com (work)", "no valid domain"),
        ("ana@example.com\nBcc: eve@evil.example", "2 `@`"),
        ("ana@" + "a" * 60 + "." + "b" * 60 + "." + "c" * 60 + "." + "d" * 60 + ".example", "longer than 254"),
    ],
)
def test_addresses_without_one_reading_are_refused_with_a_reason(written, reason):
    """Display names, several `@`, quotes, comments, spaces, empty parts and IP domains are refused, saying why."""
    with pytest.raises(InvalidArgumentsError) as refused:
        canonical_address(written, field="args.cc")
    assert reason in refused.value.message
    assert refused.value.field == "args.cc"


def test_the_arguments_have_every_address_canonical_each_once_and_the_subject_trimmed():
    """To and Cc canonical, a recipient repeated (in any spelling) kept the first time, To before Cc."""
    args = {
        "to": ["Ana@Example.com", "bob@example.org", "ana@example.com."],
        "cc": ["BOB@example.org", "carol@example.net"],
        "subject": "  Report \t",
        "body": "  Kept AS IS\n",
    }
    assert canonical_send_email_args(args) == {
        "to": ["ana@example.com", "bob@example.org"],
        "cc": ["carol@example.net"],
        "subject": "Report",
        "body": "  Kept AS IS\n",
    }


def test_a_bad_cc_address_names_its_field_and_a_broken_subject_is_refused():
    """The refusal says which argument is wrong."""
    with pytest.raises(InvalidArgumentsError) as refused:
        canonical_send_email_args({"to": ["a@example.com"], "cc": ["Eve <eve@evil.example>"]})
    assert refused.value.field == "args.cc"
    with pytest.raises(InvalidArgumentsError, match="single line") as refused:
        canonical_send_email_args({"to": ["a@example.com"], "subject": "Hi\r\nBcc: eve@evil.example"})
    assert refused.value.field == "args.subject"


_SEPARATORS = ["\n", "\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


@pytest.mark.parametrize("separator", _SEPARATORS, ids=[f"U+{ord(s):04X}" for s in _SEPARATORS])
def test_a_subject_with_any_line_break_is_refused(separator):
    """Every character the email package would refuse in a header (what `str.splitlines` breaks at) is refused
    when the call enters, not after it was approved."""
    with pytest.raises(InvalidArgumentsError, match="single line") as refused:
        canonical_send_email_args({"to": ["a@example.com"], "subject": f"Report{separator}Bcc: eve@evil.example"})
    assert refused.value.field == "args.subject"


def test_the_line_breaks_are_exactly_those_of_splitlines():
    """`LINE_BREAKS` is every code point `str.splitlines` breaks a line at, no more and no fewer."""
    breaking = {chr(c) for c in range(0x110000) if len(f"a{chr(c)}b".splitlines()) > 1}
    assert breaking == LINE_BREAKS


@pytest.mark.parametrize(
    "written", ["ana%evil.example@relay.corp.example", "evil.example!ana@relay.corp.example", "ana\uff05x@corp.example"]
)
def test_a_local_part_that_routes_through_a_relay_is_refused(written):
    """`%` (the percent hack) and `!` (a bang path) would let a relay deliver to another host than the domain a
    condition reads: refused, saying why, in whichever spelling (a full-width `%` too)."""
    with pytest.raises(InvalidArgumentsError, match="`%` or `!` before the `@`") as refused:
        canonical_address(written, field="args.cc")
    assert "route to another host" in refused.value.message
    assert refused.value.field == "args.cc"


def test_values_of_unexpected_types_are_left_for_the_schema():
    """A `to` that is not a list of text is not the canonical form's business: the schema refuses it."""
    args = {"to": "a@example.com", "cc": [1], "subject": None}
    assert canonical_send_email_args(args) == args


_BASES = ["a@external.example", "ceo@corp.example", "ana.b+tag@xn--bcher-kva.de", "x_y@sub.example.org"]


@st.composite
def _spellings(draw: st.DrawFn, base: str) -> str:
    """Another spelling of the canonical `base`: case, full-width characters, full stops, the root's dot, spaces."""
    local, _, domain = base.partition("@")
    if domain.startswith("xn--bcher-kva") and draw(st.booleans()):
        domain = domain.replace("xn--bcher-kva", "bücher")
    chars = []
    text = f"{local}@{domain}"
    for index, ch in enumerate(text):
        if ch.isascii() and ch.isalpha() and draw(st.booleans()):
            ch = ch.upper()
        if ch == "." and index > text.index("@") and draw(st.booleans()):  # NFKC keeps `。`: UTS #46 maps it
            ch = draw(st.sampled_from(["\u3002", "\uff0e", "\uff61"]))
        elif ch in _FULL_WIDTH and draw(st.booleans()):
            ch = _FULL_WIDTH[ch]
        chars.append(ch)
    text = "".join(chars)
    if draw(st.booleans()):
        text += "."
    return draw(st.sampled_from(["", " ", "\t"])) + text + draw(st.sampled_from(["", " ", "\n"]))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), base=st.sampled_from(_BASES))
def test_property_every_spelling_of_an_address_has_the_base_as_canonical_form(data, base):
    """Whatever the spelling, the canonical address is the base."""
    written = data.draw(_spellings(base))
    assert canonical_address(written) == base, written


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40) | st.from_regex(r"\A[^@\s]{1,12}@[^@\s]{1,20}\Z"))
def test_property_canonical_address_is_idempotent_or_refuses(text):
    """Any text either has a canonical address that is its own canonical form and plain ASCII, or is refused."""
    try:
        canonical = canonical_address(text)
    except InvalidArgumentsError as refused:
        problem, canonical = refused.message, ""
    else:
        problem = ""
        assert canonical_address(canonical) == canonical
        assert canonical.isascii() and canonical == canonical.lower() and canonical.count("@") == 1
    assert problem or canonical
