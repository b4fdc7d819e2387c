"""The context window: the token budget, where it cuts, what it folds into the summary (docs/decisions/0013)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage

from bot.agents.history import repaired
from bot.turns.context.window import (
    AUTHOR_KEY,
    ContextWindow,
    estimate_tokens,
    fold_point,
    measured_scale,
    transcript,
    within,
)
from tests.support.scripted_model import ScriptedChatModel
from tests.unit.agents.test_history import _assert_well_formed, answer, calls, histories, human, result


def with_ids(messages: list[AnyMessage]) -> list[AnyMessage]:
    """As stored: `add_messages` gives every message an id."""
    for message in messages:
        message.id = message.id or str(uuid.uuid4())
    return messages


def turn(n: int, size: int = 400) -> list[AnyMessage]:
    """One turn: a question, a tool round, an answer; about `size` bytes of text each."""
    return [human(f"question {n} " + "q" * size), calls(f"c{n}"), result(f"c{n}", "r" * size), answer("a" * size)]


def long_history(turns: int) -> list[AnyMessage]:
    return with_ids([m for n in range(turns) for m in turn(n)])


# estimate ---------------------------------------------------------------------------------------


def test_the_estimate_counts_utf8_bytes_and_arguments():
    """Four bytes a token plus a small overhead per message; a call's arguments count; CJK costs more."""
    assert estimate_tokens([human("x" * 400)]) == 100 + 4
    assert estimate_tokens([human("語" * 400)]) == 300 + 4
    call = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"q": "y" * 400}, "id": "a"}])
    assert estimate_tokens([call]) > 100


def test_the_scale_follows_the_models_own_count_within_bounds():
    sent = [SystemMessage(content="s" * 400), human("h" * 400)]  # 208 estimated
    assert measured_scale(None, sent, 0, 1.0) is None
    assert measured_scale(416, sent, 0, 1.0) == pytest.approx(2.0)
    assert measured_scale(10_000, sent, 0, 1.0) == 2.0  # clamped
    assert measured_scale(212, sent, 0, 1.0) is None  # within 10 %: no state write for noise
    assert measured_scale(208 + 100, sent, 100, 2.0) == pytest.approx(1.0)  # tool declarations count


# within: cutting without a summary -------------------------------------------------------------


def test_within_cuts_before_a_human_message():
    history = repaired(long_history(4))
    one_turn = estimate_tokens(history[-4:])
    view = within(history, one_turn * 2 + 1)
    assert len(view) == 8 and isinstance(view[0], HumanMessage) and view[0].text.startswith("question 2")


def test_within_keeps_the_turn_in_progress_whole_even_over_the_budget():
    history = repaired(
        long_history(2) + [human("now")] + [m for i in range(5) for m in (calls(f"x{i}"), result(f"x{i}"))]
    )
    view = within(history, 1)
    assert view[0].text == "now" and len(view) == 11


def test_within_without_a_human_message_never_starts_with_a_result():
    history = repaired([calls("a"), result("a"), calls("b"), result("b"), answer()])
    assert not isinstance(within(history, 1)[0], ToolMessage)


# fold_point --------------------------------------------------------------------------------------


def test_the_fold_ends_before_a_human_message_and_keeps_what_fits():
    history = long_history(6)
    keep = estimate_tokens(history[-8:])
    assert fold_point(history, keep_tokens=keep) == 16
    assert fold_point(history, keep_tokens=10**9) == 4  # the first possible point: one turn folded


def test_the_turn_in_progress_is_never_folded():
    history = long_history(3) + with_ids([human("now"), calls("pending")])  # a review waits on "pending"
    count = fold_point(history, keep_tokens=0)
    assert count == 12 and history[count].text == "now"
    assert fold_point(with_ids([human("only"), calls("a"), result("a")]), keep_tokens=0) == 0


@settings(max_examples=300, database=None)
@given(history=histories(), budget=st.integers(1, 400), keep=st.floats(0, 400))
def test_property_folding_and_cutting_never_break_the_tool_call_pairing(history, budget, keep):
    """Over random damaged histories: the kept part starts at a human message, is well formed, and
    the turn in progress is always kept whole."""
    count = fold_point(history, keep_tokens=keep)
    last_human = max(i for i, m in enumerate(history) if isinstance(m, HumanMessage))
    assert count <= last_human
    assert count == 0 or isinstance(history[count], HumanMessage)
    view = within(repaired(history[count:]), budget)
    _assert_well_formed(view)
    assert isinstance(view[0], HumanMessage)
    assert view[0] is history[last_human] or history.index(view[0]) < last_human


# fit: the summary --------------------------------------------------------------------------------


def summarizer(*replies: Any) -> ScriptedChatModel:
    return ScriptedChatModel(replies=list(replies))


async def test_under_the_budget_nothing_is_folded_or_asked():
    model = summarizer()
    window = ContextWindow(budget_tokens=100_000, summarizer=model)
    history = long_history(3)
    fitted = await window.fit(history, system_prompt="sys")
    assert fitted.view == history and fitted.removed == [] and fitted.system_prompt == "sys"
    assert model.prompts == []


async def test_an_overflow_folds_the_oldest_turns_into_one_summary():
    """Over the budget: one summary call over the oldest turns; they are removed; the prompt carries it."""
    model = summarizer(AIMessage("alice asked for the weather; it was sunny"))
    history = long_history(8)
    budget = estimate_tokens(history) // 2
    window = ContextWindow(budget_tokens=budget, summarizer=model, keep_share=0.5)
    fitted = await window.fit(history, system_prompt="sys", summary="earlier: bob said hi")
    folded = len(fitted.removed)
    assert folded and folded % 4 == 0
    assert [r.id for r in fitted.removed] == [m.id for m in history[:folded]]
    assert all(isinstance(r, RemoveMessage) for r in fitted.removed)
    assert fitted.view == history[folded:]
    assert estimate_tokens(fitted.view) <= budget * 0.5
    assert fitted.summary == "alice asked for the weather; it was sunny"
    assert fitted.system_prompt.startswith("sys") and fitted.summary in fitted.system_prompt
    [request] = model.prompts
    assert "earlier: bob said hi" in request[1].text and "question 0" in request[1].text
    assert f"question {folded // 4}" not in request[1].text  # the kept turns are not summarised


async def test_a_failed_or_empty_summary_cuts_instead_and_removes_nothing(caplog):
    history = long_history(8)
    budget = estimate_tokens(history) // 2
    for reply in (RuntimeError("model down"), AIMessage("")):
        window = ContextWindow(budget_tokens=budget, summarizer=summarizer(reply))
        fitted = await window.fit(history, system_prompt="sys", summary="kept")
        assert fitted.removed == [] and fitted.summary == "kept"
        assert estimate_tokens(fitted.view) <= budget and isinstance(fitted.view[0], HumanMessage)
    # One line each at WARNING, naming the error, with no traceback (the terminal shows warnings).
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2 and all(r.exc_info is None for r in warnings)
    assert "RuntimeError: model down" in warnings[0].getMessage()
    assert "they stay stored" in warnings[1].getMessage()


async def test_without_a_summarizer_older_turns_are_only_cut():
    history = long_history(8)
    fitted = await ContextWindow(budget_tokens=estimate_tokens(history) // 2).fit(history, system_prompt="sys")
    assert fitted.removed == [] and fitted.view == history[len(history) - len(fitted.view) :]


def test_the_transcript_names_authors_tools_and_cuts_long_results():
    message = HumanMessage(content="send it", additional_kwargs={AUTHOR_KEY: {"user_id": "U1", "name": "alice"}})
    text = transcript([message, calls("a", name="send_email"), result("a", "x" * 5000), answer("sent")])
    lines = text.splitlines()
    assert lines[0] == "alice: send it"
    assert lines[1].startswith("assistant called send_email with {")
    assert lines[2].startswith("result of lookup: xxx") and len(lines[2]) < 1600
    assert lines[3] == "assistant: sent"
