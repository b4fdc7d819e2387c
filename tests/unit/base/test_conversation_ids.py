"""Thread ids: the DESIGN.md formats, their round trip, and refusal of ambiguous parts; Discord message refs."""

from __future__ import annotations

import pytest

from adapters.discord.conversations import message_ref, parse_message_ref
from bot.base.conversation import Actor, ConversationRef


@pytest.mark.parametrize(
    ("ref", "thread_id"),
    [
        (ConversationRef(platform="slack", workspace_id="T1", channel_id="C1"), "slack:T1:C1"),
        (
            ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread="1715938200.000100"),
            "slack:T1:C1:1715938200.000100",
        ),
        (
            ConversationRef(platform="discord", workspace_id="1234", channel_id="5678"),
            "discord:1234:5678",
        ),
        (
            ConversationRef(platform="discord", workspace_id="1234", channel_id="5678", thread="9012"),
            "discord:1234:5678:9012",
        ),
        (ConversationRef(platform="discord", workspace_id="dm", channel_id="42"), "discord:dm:42"),
    ],
)
def test_thread_id_format(ref, thread_id):
    """Thread ids are `<platform>:<workspace>:<channel>[:<thread>]` as DESIGN.md says."""
    assert ref.thread_id == thread_id


@pytest.mark.parametrize(
    "thread_id",
    [
        "slack:T1:C1",
        "slack:T1:C1:1715938200.000100",
        "discord:1234:5678",
        "discord:1234:5678:9012",
        "discord:dm:42",
        "console:local:terminal",
    ],
)
def test_from_thread_id_round_trips(thread_id):
    """Parsing a thread id and formatting it again gives the same string."""
    assert ConversationRef.from_thread_id(thread_id).thread_id == thread_id


def test_from_thread_id_fills_the_fields():
    """Parsing sets platform, workspace, channel and thread."""
    ref = ConversationRef.from_thread_id("slack:T1:C1:1.2")
    assert ref == ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread="1.2")
    assert ConversationRef.from_thread_id("slack:T1:C1").thread is None


def test_refs_in_different_workspaces_have_different_ids():
    """The same channel id in two workspaces never shares a thread id."""
    one = ConversationRef(platform="slack", workspace_id="T1", channel_id="C1")
    two = ConversationRef(platform="slack", workspace_id="T2", channel_id="C1")
    assert one.thread_id != two.thread_id


@pytest.mark.parametrize("thread_id", ["", "slack", "slack:T1", "slack:T1:C1:1.2:extra", "a:b:c:d:e"])
def test_from_thread_id_refuses_wrong_part_counts(thread_id):
    """Fewer than three or more than four parts are refused."""
    with pytest.raises(ValueError, match="not a Countersign thread id"):
        ConversationRef.from_thread_id(thread_id)


@pytest.mark.parametrize("thread_id", [":T1:C1", "slack::C1", "slack:T1:", "slack:T1:C1:", "::", ":::"])
def test_from_thread_id_refuses_empty_parts(thread_id):
    """An empty platform, workspace, channel or thread part is refused."""
    with pytest.raises(ValueError, match="must be non-empty"):
        ConversationRef.from_thread_id(thread_id)


@pytest.mark.parametrize("field", ["platform", "workspace_id", "channel_id"])
@pytest.mark.parametrize("value", ["", "a:b", ":"])
def test_constructor_refuses_empty_or_colon_parts(field, value):
    """A required part that is empty or contains ':' is refused, naming the field."""
    parts = {"platform": "slack", "workspace_id": "T1", "channel_id": "C1"}
    parts[field] = value
    with pytest.raises(ValueError, match=field):
        ConversationRef(**parts)


@pytest.mark.parametrize("thread", ["", "1.2:3", ":"])
def test_constructor_refuses_empty_or_colon_thread(thread):
    """A thread part that is empty or contains ':' is refused (None means no thread)."""
    with pytest.raises(ValueError, match="thread"):
        ConversationRef(platform="slack", workspace_id="T1", channel_id="C1", thread=thread)


def test_refs_are_frozen_values():
    """ConversationRef and Actor are immutable and compare by value."""
    ref = ConversationRef(platform="slack", workspace_id="T1", channel_id="C1")
    with pytest.raises(AttributeError):
        ref.channel_id = "C2"  # type: ignore[misc]
    assert ref == ConversationRef(platform="slack", workspace_id="T1", channel_id="C1")
    actor = Actor(platform="slack", workspace_id="T1", user_id="U1", display_name="Ann")
    assert actor.is_admin is None
    assert actor.groups == frozenset()


_CHANNEL = ConversationRef(platform="discord", workspace_id="1234", channel_id="5678")
_TICKET = ConversationRef(platform="discord", workspace_id="1234", channel_id="5678", thread="9012")


@pytest.mark.parametrize(
    ("conversation", "channel", "ref", "place"),
    [
        (_CHANNEL, 5678, "77", (5678, 77)),  # a mention in the channel
        (_TICKET, 9012, "77", (9012, 77)),  # a message in a ticket
        (_CHANNEL, 9012, "9012/77", (9012, 77)),  # a mention in a thread of a whole-channel conversation
    ],
)
def test_a_discord_message_ref_names_where_the_message_is(conversation, channel, ref, place):
    """A Discord message's id in the core is bare where the conversation posts, `<channel>/<id>` elsewhere."""
    assert message_ref(conversation, channel, 77) == ref
    assert parse_message_ref(conversation, ref) == place


@pytest.mark.parametrize("ref", ["", "x", "12/x", "a/12", "1/2/3", "/"])
def test_a_discord_message_ref_that_is_none_names_no_message(ref):
    """Anything but `<id>` or `<channel>/<id>` names no message (nothing is read for it)."""
    assert parse_message_ref(_CHANNEL, ref) is None
