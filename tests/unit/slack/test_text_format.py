"""Slack text helpers: escaping, mrkdwn conversion and message splitting."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.slack.text import MESSAGE_CHARS, escape, split_message, to_mrkdwn

FENCE = "```"
_ENTITY_CUT = re.compile(r"&(?!amp;|lt;|gt;)")


def _content(text: str) -> str:
    """Text without whitespace and backticks: what splitting must preserve, fences aside."""
    return re.sub(r"[\s`]", "", text)


# escape ----------------------------------------------------------------------------------------


def test_escape_replaces_the_three_control_characters():
    """`&`, `<` and `>` become `&amp;`, `&lt;` and `&gt;`."""
    assert escape("a & b < c > d") == "a &amp; b &lt; c &gt; d"


def test_escape_escapes_ampersand_first():
    """An existing entity is escaped again, so `&lt;` shows literally rather than as `<`."""
    assert escape("&lt;") == "&amp;lt;"
    assert escape("<&>") == "&lt;&amp;&gt;"


def test_escape_leaves_other_text_alone():
    """Text without control characters, including mrkdwn markers and non-ASCII, is unchanged."""
    text = "*bold* _it_ ~s~ `code` ü 日本 @here #general"
    assert escape(text) == text


# to_mrkdwn -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("<!here>", "&lt;!here&gt;"),
        ("<!everyone>", "&lt;!everyone&gt;"),
        ("<@U123>", "&lt;@U123&gt;"),
        ("<!subteam^S1>", "&lt;!subteam^S1&gt;"),
        ("<https://x|y>", "&lt;https://x|y&gt;"),
        ("<#C123|general>", "&lt;#C123|general&gt;"),
        ("Tom & Jerry", "Tom &amp; Jerry"),
    ],
)
def test_to_mrkdwn_neutralises_special_syntax(raw, expected):
    """Broadcasts, mentions, links and `&` are escaped so Slack shows them as plain text."""
    converted = to_mrkdwn(raw)
    assert converted == expected
    assert "<" not in converted
    assert ">" not in converted


def test_to_mrkdwn_converts_double_star_bold():
    """`**bold**` becomes Slack's `*bold*`."""
    assert to_mrkdwn("this is **very** important") == "this is *very* important"


def test_to_mrkdwn_converts_several_bold_spans():
    """Each `**...**` span is converted independently (non-greedy)."""
    assert to_mrkdwn("**a** and **b c**") == "*a* and *b c*"


def test_to_mrkdwn_bold_requires_non_space_edges():
    """`** x**` is not bold: the text must touch both markers, as in Markdown."""
    assert to_mrkdwn("** x**") == "** x**"
    assert to_mrkdwn("**x **") == "**x **"


def test_to_mrkdwn_escapes_inside_bold():
    """Control characters inside bold are still escaped."""
    assert to_mrkdwn("**<!here>**") == "*&lt;!here&gt;*"


def test_to_mrkdwn_keeps_plain_text():
    """Text without markup passes through unchanged."""
    assert to_mrkdwn("hello world") == "hello world"


# split_message: basics -------------------------------------------------------------------------


def test_split_short_text_is_one_chunk():
    """Text within the limit comes back as a single chunk (outer whitespace stripped)."""
    assert split_message("  hello there \n") == ["hello there"]


def test_split_text_exactly_at_limit_is_one_chunk():
    """A text of exactly `limit` characters is not split."""
    text = "x" * 40
    assert split_message(text, 40) == [text]


def test_split_one_over_limit_is_two_chunks():
    """A text one character over the limit is split into two chunks, both within it."""
    text = "word " * 8 + "x"  # 41 characters
    chunks = split_message(text, 40)
    assert len(chunks) == 2
    assert all(len(c) <= 40 for c in chunks)


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \n"])
def test_split_empty_or_whitespace_gives_no_chunks(text):
    """Empty or whitespace-only text yields no messages at all."""
    assert split_message(text) == []


@pytest.mark.parametrize("limit", [-1, 0, 1, 15])
def test_split_limit_below_16_raises(limit):
    """A limit too small for a fence pair is refused with ValueError."""
    with pytest.raises(ValueError, match="at least 16"):
        split_message("hello", limit)


def test_split_limit_16_is_accepted():
    """16 is the smallest accepted limit and still yields chunks within it."""
    chunks = split_message("alpha beta gamma delta epsilon zeta eta theta", 16)
    assert chunks
    assert all(len(c) <= 16 for c in chunks)


def test_split_default_limit_is_message_chars():
    """Without a limit, chunks are at most MESSAGE_CHARS long."""
    text = ("lorem ipsum dolor sit amet " * 600).strip()
    chunks = split_message(text)
    assert len(chunks) > 1
    assert all(len(c) <= MESSAGE_CHARS for c in chunks)
    assert " ".join(chunks).split() == text.split()


def test_split_preserves_all_words_in_order():
    """Concatenating the chunks gives back every word, in order."""
    words = [f"word{i}" for i in range(300)]
    text = " ".join(words)
    chunks = split_message(text, 100)
    assert all(len(c) <= 100 for c in chunks)
    assert " ".join(chunks).split() == words


# split_message: boundaries ---------------------------------------------------------------------


def test_split_prefers_paragraph_boundary():
    """With a paragraph break in reach, the cut is there, not at a later line or space."""
    first = "First paragraph has words.\nIt has a second line."
    second = "Second paragraph goes on and on for a while longer."
    chunks = split_message(f"{first}\n\n{second}", 60)
    assert chunks[0] == first
    assert chunks[1] == second


def test_split_prefers_line_boundary_over_space():
    """Without a paragraph break, the cut is at the last newline in reach."""
    chunks = split_message("line one is here\nline two is here and long", 30)
    assert chunks == ["line one is here", "line two is here and long"]


def test_split_prefers_sentence_boundary_over_space():
    """Without newlines, the cut is after the last `. ` in reach."""
    chunks = split_message("First sentence here. Second sentence follows on.", 30)
    assert chunks[0] == "First sentence here."


def test_split_falls_back_to_word_boundary():
    """Without newlines or sentences, the cut is at a space: no word is broken."""
    text = "aaaa bbbb cccc dddd eeee ffff gggg"
    chunks = split_message(text, 16)
    assert chunks == ["aaaa bbbb", "cccc dddd", "eeee ffff gggg"]


def test_split_cuts_mid_word_only_when_there_is_no_space():
    """A single overlong word is cut into pieces that together give the word back."""
    word = "a" * 40
    chunks = split_message(word, 16)
    assert all(len(c) <= 16 for c in chunks)
    assert "".join(chunks) == word


def test_split_ignores_a_boundary_too_close_to_the_start():
    """A space in the first third of the room is not used: chunks do not get tiny."""
    text = "a " + "b" * 40
    chunks = split_message(text, 20)
    assert chunks[0].startswith("a b")
    assert len(chunks[0]) > 5


@pytest.mark.parametrize("entity", ["&amp;", "&lt;", "&gt;"])
@pytest.mark.parametrize("offset", range(6))
def test_split_never_cuts_an_entity_in_half(entity, offset):
    """An escaped entity near the cut point is kept whole in one chunk."""
    text = "a" * (8 + offset) + entity + "b" * 30
    chunks = split_message(text, 16)
    for chunk in chunks:
        assert not _ENTITY_CUT.search(chunk), chunks
    assert "".join(chunks) == text


def test_split_escaped_text_never_cuts_entities():
    """Splitting escaped text full of `&<>` leaves every entity intact."""
    text = escape("<&>" * 200)
    chunks = split_message(text, 37)
    assert all(len(c) <= 37 for c in chunks)
    assert all(not _ENTITY_CUT.search(c) for c in chunks)
    assert "".join(chunks) == text


# split_message: code fences --------------------------------------------------------------------


def test_split_code_fence_is_closed_and_reopened():
    """A chunk ending inside ``` is closed, and the next chunk reopens the fence."""
    code = "\n".join(f"print({i})" for i in range(30))
    text = f"Here is code:\n{FENCE}\n{code}\n{FENCE}\nDone."
    chunks = split_message(text, 80)
    assert len(chunks) > 2
    assert all(len(c) <= 80 for c in chunks)
    for chunk in chunks:
        assert chunk.count(FENCE) % 2 == 0, chunk
    for chunk in chunks[1:-1]:
        assert chunk.startswith(FENCE + "\n")
        assert chunk.endswith("\n" + FENCE)
    assert chunks[-1].endswith("Done.")
    lines = [line for c in chunks for line in c.splitlines() if line.startswith("print(")]
    assert lines == code.splitlines()


def test_split_without_fence_adds_no_fences():
    """Text without code never gets ``` added."""
    chunks = split_message("plain words " * 50, 40)
    assert all(FENCE not in c for c in chunks)


def test_split_closed_fence_is_not_reopened():
    """After a code block ends, the following chunks are not wrapped in fences."""
    text = f"{FENCE}\nshort code\n{FENCE}\n\n" + "after the code " * 10
    chunks = split_message(text, 40)
    assert chunks[0] == f"{FENCE}\nshort code\n{FENCE}"
    assert all(FENCE not in c for c in chunks[1:])


def test_split_keeps_indentation_of_code_at_a_chunk_start():
    """Code lines keep their leading spaces when a fence continues into the next chunk."""
    code = "\n".join(f"    line{i}" for i in range(10))
    chunks = split_message(f"{FENCE}\n{code}\n{FENCE}", 30)
    lines = [line for c in chunks for line in c.splitlines() if "line" in line]
    assert lines == code.splitlines()


def test_split_never_cuts_a_fence_marker_in_half():
    """Inline ```code``` stays whole, and text after it is not turned into code blocks."""
    chunks = split_message("see ```code``` here and more words to go on", 16)
    assert any("```code```" in c for c in chunks), chunks
    assert sum(c.count(FENCE) for c in chunks) == 2, chunks


# split_message: properties ---------------------------------------------------------------------

_PIECES = st.sampled_from([*"ab c.\n&<>`;", "&amp;", "&lt;", "&gt;", FENCE, "\n\n", ". ", "word ", "\t"])


@settings(max_examples=400, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(_PIECES, max_size=250).map("".join), limit=st.integers(16, 120))
def test_split_property_chunks_fit_and_content_is_preserved(text, limit):
    """For any text and limit: chunks fit, are non-blank, and keep all content in order."""
    chunks = split_message(text, limit)
    assert all(len(c) <= limit for c in chunks)
    assert all(c.strip() for c in chunks)
    assert _content("".join(chunks)) == _content(text)
    # Backticks only ever come in whole added fence markers on top of the original ones.
    added = "".join(chunks).count("`") - text.count("`")
    assert added >= 0
    assert added % 3 == 0


@settings(max_examples=300, database=None)
@given(
    raw=st.text(alphabet=st.sampled_from([*"ab c.\n&<>`"]), max_size=300),
    limit=st.integers(16, 80),
)
def test_split_property_escaped_text_keeps_entities_whole(raw, limit):
    """For any escaped text, no chunk contains a cut-off `&amp;`, `&lt;` or `&gt;`."""
    chunks = split_message(escape(raw), limit)
    assert all(len(c) <= limit for c in chunks)
    assert all(not _ENTITY_CUT.search(c) for c in chunks)


@settings(max_examples=300, database=None)
@given(
    lines=st.lists(
        st.one_of(
            st.just(FENCE),
            st.text(alphabet=st.sampled_from([*"ab c."]), min_size=1, max_size=40),
        ),
        max_size=30,
    ),
    limit=st.integers(16, 80),
)
def test_split_property_fences_on_own_lines_stay_balanced(lines, limit):
    """With balanced fences on their own lines, every chunk has balanced fences."""
    if lines.count(FENCE) % 2:
        lines = [*lines, FENCE]
    chunks = split_message("\n".join(lines), limit)
    assert all(len(c) <= limit for c in chunks)
    assert all(c.count(FENCE) % 2 == 0 for c in chunks)
