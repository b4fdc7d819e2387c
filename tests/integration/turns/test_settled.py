"""A conversation at rest is not read before its next turn; every other state still is (decision 0014)."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from bot.base.errors import ModelError, ModelErrorKind
from bot.ports import ModelFailed, ReviewPending
from bot.reviews.decisions import Approve
from bot.turns.conversations_postgres import PostgresConversationStore
from tests.support.scripted_model import ScriptedChatModel, calls, tool_call
from tests.support.service import actor, conversation, message, open_service


async def at_rest(h) -> bool:
    """Whether the conversation's row, as a message's `touch` reads it, says it is at rest."""
    return (await PostgresConversationStore(h.database.pool).touch(conversation())).at_rest


async def test_only_a_clean_outcome_leaves_a_conversation_at_rest(db_url, registry, tool_log):
    """An answer leaves it at rest; a failed run, a waiting card and its resume do not, until a clean end."""
    model = ScriptedChatModel(
        replies=[
            AIMessage("first"),
            ModelError(ModelErrorKind.UNAVAILABLE, "unreachable"),
            AIMessage("third"),
            calls(tool_call("send", {"to": "bob", "body": "hi"})),
            AIMessage("sent"),
        ]
    )
    async with open_service(db_url, model, registry) as h:
        await h.service.handle_message(message("one"))
        assert await at_rest(h)
        await h.service.handle_message(message("two"))
        assert isinstance(h.platform.notices[-1][1], ModelFailed)
        assert not await at_rest(h)  # told of a failure, not finished: read before the next turn
        await h.service.handle_message(message("three"))
        assert await at_rest(h)  # the long way found nothing to repair and said so
        await h.service.handle_message(message("send it"))
        [card] = [c.approval for c in h.platform.cards.values()]
        assert not await at_rest(h)  # a review is open
        await h.service.decide(card.id, actor(), Approve())
        await h.service.tasks.join()
        assert await at_rest(h)
    assert [text for _, text in h.platform.answers] == ["first", "third", "sent"]
    assert tool_log.calls == [("send", {"to": "bob", "body": "hi", "urgent": False})]


async def test_a_pause_whose_review_could_not_be_stored_gets_its_card_on_the_next_message(db_url, registry):
    """The database refuses the review of a pause (the run fails and says so): the next message opens the card and waits."""
    model = ScriptedChatModel(replies=[calls(tool_call("send", {"to": "bob", "body": "hi"})), AIMessage("never")])
    async with open_service(db_url, model, registry) as h:
        await h.database.pool.execute(
            """
            CREATE FUNCTION refuse_review() RETURNS trigger LANGUAGE plpgsql AS
              $$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$;
            CREATE TRIGGER refuse_review BEFORE INSERT ON reviews FOR EACH ROW EXECUTE FUNCTION refuse_review();
            """
        )
        await h.service.handle_message(message("send it"))
        assert h.platform.cards == {}
        assert not await at_rest(h)
        await h.database.pool.execute("DROP TRIGGER refuse_review ON reviews; DROP FUNCTION refuse_review()")
        await h.service.handle_message(message("anything?", user="bob"))
        [card] = h.platform.cards.values()
        assert card.approval.tool_name == "send" and card.approval.requester_id == "alice"
        assert isinstance(h.platform.notices[-1][1], ReviewPending)
        assert len(model.prompts) == 1  # the new message did not reach the model
