"""History helpers: unanswered calls, and the repaired history the model is sent."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from bot.agents.history import (
    answers_after,
    last_tool_call_message,
    repaired,
    unanswered_tool_calls,
    with_fresh_call_ids,
)
from bot.agents.prompts import INTERRUPTED_CALL_MESSAGE


def human(text: str = "hi") -> HumanMessage:
    """A user message."""
    return HumanMessage(content=text)


def answer(text: str = "done") -> AIMessage:
    """A final AI answer without tool calls."""
    return AIMessage(content=text)


def calls(*ids: str, name: str = "lookup") -> AIMessage:
    """An AI message calling `name` once per id."""
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": {"q": i}, "id": i, "type": "tool_call"} for i in ids],
    )


def result(call_id: str, text: str | None = None) -> ToolMessage:
    """The tool result for `call_id`."""
    return ToolMessage(content=text or f"result {call_id}", tool_call_id=call_id, name="lookup")


def shape(messages: list[AnyMessage]) -> list[str]:
    """Messages as short strings: H, A, A[ids], T:id."""
    out = []
    for m in messages:
        if isinstance(m, ToolMessage):
            out.append(f"T:{m.tool_call_id}")
        elif isinstance(m, AIMessage) and m.tool_calls:
            out.append("A[" + ",".join(str(c["id"]) for c in m.tool_calls) + "]")
        elif isinstance(m, AIMessage):
            out.append("A")
        else:
            out.append("H")
    return out


# last_tool_call_message ------------------------------------------------------------------------


def test_last_tool_call_message_finds_the_calling_ai_message():
    """The last AI message with tool calls is found with its index, past its results."""
    ai = calls("a", "b")
    history = [human(), ai, result("a")]
    assert last_tool_call_message(history) == (1, ai)


def test_last_tool_call_message_none_when_last_ai_has_no_calls():
    """When the last AI message is a plain answer, there is nothing pending."""
    history = [human(), calls("a"), result("a"), answer()]
    assert last_tool_call_message(history) is None


def test_last_tool_call_message_none_after_a_human_message():
    """A human message after the calls means the calls are no longer the current ones."""
    history = [human(), calls("a"), human("again")]
    assert last_tool_call_message(history) is None


def test_last_tool_call_message_none_for_empty_or_human_only():
    """An empty or human-only history has no tool-calling message."""
    assert last_tool_call_message([]) is None
    assert last_tool_call_message([human()]) is None


# answers_after ---------------------------------------------------------------------------------


def test_answers_after_collects_results_by_call_id():
    """Results right after the AI message are keyed by their tool_call_id."""
    history = [human(), calls("a", "b"), result("b"), result("a"), answer()]
    answers = answers_after(history, 1)
    assert set(answers) == {"a", "b"}
    assert answers["a"].content == "result a"


def test_answers_after_stops_at_the_first_non_tool_message():
    """Tool messages after a later non-tool message are not counted."""
    history = [human(), calls("a", "b"), result("a"), answer(), result("b")]
    assert set(answers_after(history, 1)) == {"a"}


def test_answers_after_nothing_when_no_results():
    """No result after the AI message gives an empty mapping."""
    assert answers_after([human(), calls("a")], 1) == {}


# unanswered_tool_calls -------------------------------------------------------------------------


def test_unanswered_tool_calls_in_call_order():
    """Calls without a result are returned in the order the model made them."""
    history = [human(), calls("a", "b", "c"), result("b")]
    assert [c["id"] for c in unanswered_tool_calls(history)] == ["a", "c"]


def test_unanswered_tool_calls_empty_when_all_answered():
    """When every call has a result nothing is unanswered."""
    history = [human(), calls("a", "b"), result("b"), result("a")]
    assert unanswered_tool_calls(history) == []


def test_unanswered_tool_calls_empty_after_a_human_message():
    """Calls left behind by a later human message are not pending any more."""
    assert unanswered_tool_calls([human(), calls("a"), human("new")]) == []


def test_unanswered_tool_calls_only_looks_at_the_last_calling_message():
    """An earlier unanswered call is not reported once a later AI message made new calls."""
    history = [human(), calls("old"), result("x"), human(), calls("new")]
    assert [c["id"] for c in unanswered_tool_calls(history)] == ["new"]


def test_unanswered_tool_calls_ignores_results_for_other_ids():
    """A result for an unrelated id does not answer a call."""
    history = [human(), calls("a"), result("zzz")]
    assert [c["id"] for c in unanswered_tool_calls(history)] == ["a"]


# repaired ----------------------------------------------------------------------------


def test_repair_unchanged_when_valid_and_short():
    """A valid history comes back as the same messages."""
    history = [human(), calls("a", "b"), result("a"), result("b"), answer()]
    view = repaired(history)
    assert view == history
    assert all(v is h for v, h in zip(view, history, strict=True))


def test_repair_synthesises_missing_results_in_call_order():
    """Missing results become error ToolMessages, placed in call order among the real ones."""
    history = [human(), calls("a", "b", "c"), result("b")]
    view = repaired(history)
    assert shape(view) == ["H", "A[a,b,c]", "T:a", "T:b", "T:c"]
    synthetic = [view[2], view[4]]
    for message, call_id in zip(synthetic, ["a", "c"], strict=True):
        assert message.content == INTERRUPTED_CALL_MESSAGE
        assert message.status == "error"
        assert message.tool_call_id == call_id
        assert message.name == "lookup"
    assert view[3] is history[2]


def test_repair_repairs_a_history_that_continued_after_a_crash():
    """A call left unanswered before a new human message gets its synthetic result there."""
    history = [human(), calls("a"), human("hello?"), answer()]
    view = repaired(history)
    assert shape(view) == ["H", "A[a]", "T:a", "H", "A"]
    assert view[2].status == "error"


def test_repair_reorders_results_to_call_order():
    """Results stored out of order are sent in call order (Gemini pairs by position)."""
    history = [human(), calls("a", "b", "c"), result("c"), result("a"), result("b"), answer()]
    view = repaired(history)
    assert shape(view) == ["H", "A[a,b,c]", "T:a", "T:b", "T:c", "A"]
    assert [m.content for m in view[2:5]] == ["result a", "result b", "result c"]


def test_repair_drops_orphan_results():
    """Results whose call is not right before them are dropped."""
    history = [result("ghost"), human(), answer(), result("stray"), calls("a"), result("x")]
    history.append(result("a"))
    view = repaired(history)
    assert shape(view) == ["H", "A", "A[a]", "T:a"]
    assert view[-1].content == "result a"


def test_repair_keeps_the_first_of_duplicate_results():
    """Two results for one call: the first is kept, the second dropped."""
    history = [human(), calls("a"), result("a", "first"), result("a", "second")]
    view = repaired(history)
    assert shape(view) == ["H", "A[a]", "T:a"]
    assert view[2].content == "first"


def test_repair_does_not_change_the_stored_history():
    """Repair builds a new list; the stored messages are left as they were."""
    history = [human(), calls("a", "b"), result("b")]
    before = list(history)
    repaired(history)
    assert history == before


# repaired: property --------------------------------------------------------------------------


@st.composite
def histories(draw: Any) -> list[AnyMessage]:
    """Random stored histories: turns of human text, answers and tool rounds, damaged at random.

    Damage: results missing, duplicated, shuffled, or for unknown ids; orphan results anywhere;
    answers without content (stored by older versions).
    """
    messages: list[AnyMessage] = [human("start")]
    counter = 0
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["human", "answer", "round", "orphan", "no_answer"]))
        if kind == "human":
            messages.append(human())
        elif kind == "answer":
            messages.append(answer())
        elif kind == "no_answer":
            messages.append(AIMessage(content=draw(st.sampled_from(["", []]))))
        elif kind == "orphan":
            messages.append(result(f"orphan{counter}"))
            counter += 1
        else:
            ids = [f"c{counter + i}" for i in range(draw(st.integers(1, 4)))]
            counter += len(ids)
            messages.append(calls(*ids))
            kept = draw(st.lists(st.sampled_from([*ids, "unknown"]), max_size=6))
            messages.extend(result(i) for i in kept)
    return messages


def _assert_well_formed(view: list[AnyMessage]) -> None:
    assert not view or not isinstance(view[0], ToolMessage)
    index = 0
    while index < len(view):
        message = view[index]
        assert not isinstance(message, ToolMessage), shape(view)
        index += 1
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = [str(c["id"]) for c in message.tool_calls]
            block = view[index : index + len(ids)]
            assert all(isinstance(m, ToolMessage) for m in block), shape(view)
            assert [m.tool_call_id for m in block] == ids, shape(view)
            index += len(ids)


@settings(max_examples=300, database=None)
@given(history=histories())
def test_property_the_repaired_history_is_always_well_formed(history):
    """Every call is followed by exactly one result per call, in call order; no leading result."""
    full = repaired(history)
    _assert_well_formed(full)
    # Nothing but results and answers without content is lost in repair: the rest is kept, in order.
    kept = [m for m in history if not isinstance(m, ToolMessage) and not _no_answer(m)]
    assert [m for m in full if not isinstance(m, ToolMessage)] == kept
    assert not any(_no_answer(m) for m in full)


def _no_answer(message: AnyMessage) -> bool:
    return isinstance(message, AIMessage) and not message.tool_calls and not message.text


def test_repair_leaves_out_an_answer_without_content():
    """An empty AI message from an older version is not sent: Gemini refuses it as an empty part."""
    history = [human("a"), AIMessage(content=[]), human("b"), AIMessage(content=""), human("c")]
    assert [m.text for m in repaired(history)] == ["a", "b", "c"]


def test_every_call_gets_a_fresh_id_and_keeps_its_name_and_arguments():
    """Shared, empty and unique ids alike are replaced by ids of their own; names and arguments stay."""
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": "a", "args": {"x": 1}, "id": "c1"},
            {"name": "b", "args": {"y": 2}, "id": "c1"},
            {"name": "c", "args": {}, "id": ""},
            {"name": "d", "args": {}, "id": "c4"},
        ],
    )
    fixed = with_fresh_call_ids(message)
    ids = [call["id"] for call in fixed.tool_calls]
    assert len(set(ids)) == 4 and all(ids) and set(ids).isdisjoint({"c1", "c4"})
    assert [(c["name"], c["args"]) for c in fixed.tool_calls] == [
        ("a", {"x": 1}),
        ("b", {"y": 2}),
        ("c", {}),
        ("d", {}),
    ]
    again = with_fresh_call_ids(message)
    assert set(ids).isdisjoint(call["id"] for call in again.tool_calls)  # the same answer twice: other ids


def test_an_answer_without_calls_is_left_as_it_is():
    """A text answer has no id to replace."""
    message = AIMessage(content="done")
    assert with_fresh_call_ids(message) is message


def test_integers_beyond_64_bits_become_floats_so_the_checkpoint_can_be_written():
    """A model's 2**70 (or -2**63 - 2**22) would make the checkpoint unwritable; it is kept as a float."""
    from bot.agents.history import without_nul

    message = AIMessage(
        content="", tool_calls=[{"name": "a", "args": {"n": 2**70, "m": -(2**63) - 2**22, "k": 5}, "id": "c"}]
    )
    args = without_nul(message).tool_calls[0]["args"]
    assert args == {"n": float(2**70), "m": float(-(2**63) - 2**22), "k": 5}
    assert isinstance(args["n"], float) and isinstance(args["k"], int)


# with_fresh_call_ids: Gemini 3 thought signatures follow renamed calls --------------------------


def signed(*ids: str, signatures: dict[str, str]) -> AIMessage:
    """An AI message calling `lookup` once per id, with langchain-google-genai's signature map."""
    from bot.agents.signatures import SIGNATURES_KEY

    message = calls(*ids)
    message.additional_kwargs[SIGNATURES_KEY] = dict(signatures)
    return message


def signatures_of(message: AIMessage) -> dict[str, str]:
    from bot.agents.signatures import SIGNATURES_KEY

    return dict(message.additional_kwargs.get(SIGNATURES_KEY, {}))


def test_fresh_ids_move_every_signature():
    """Every call gets a fresh id; the signed first call keeps its signature under its new id."""
    fixed = with_fresh_call_ids(signed("a", "b", signatures={"a": "sig-a"}))
    first, second = (call["id"] for call in fixed.tool_calls)
    assert {first, second}.isdisjoint({"a", "b"})
    assert signatures_of(fixed) == {first: "sig-a"}


def test_a_shared_id_leaves_the_signature_with_the_first_call():
    """Two calls sharing one id: both get ids of their own, the signature goes with the first (Gemini signs the first)."""
    fixed = with_fresh_call_ids(signed("dup", "dup", signatures={"dup": "sig"}))
    first, second = (call["id"] for call in fixed.tool_calls)
    assert first != second and "dup" not in {first, second}
    assert signatures_of(fixed) == {first: "sig"}


def test_the_signature_key_is_langchain_google_genais():
    """Our copy of the private key still names the map langchain-google-genai reads (an upgrade would show here)."""
    from langchain_google_genai import chat_models

    from bot.agents.signatures import SIGNATURES_KEY

    assert chat_models._FUNCTION_CALL_THOUGHT_SIGNATURES_MAP_KEY == SIGNATURES_KEY
