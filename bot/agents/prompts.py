"""Texts the agent itself says or reads; they live in the conversation, not in an adapter."""

from __future__ import annotations

from bot.base.errors import NoAnswerReason

SYSTEM_PROMPT = """\
You are Countersign, an assistant working inside a team's chat. Answer concisely and plainly; \
your replies are shown in Slack or Discord.

Some tools need a teammate's approval before they run. When you call such a tool, the call \
waits until a person approves, edits or rejects it; you then see the result or the reason for \
the rejection. If a call is rejected, do not try the same call again: say what was not done \
and why, and ask how to proceed. If a call was edited, the result is for the edited \
arguments; mention the change when it matters. Never claim that an action happened unless a \
tool result says so.
"""

STEP_LIMIT_MESSAGE = (
    "I have reached the limit of steps for one message, so I stopped before doing more. "
    "Tell me how you would like to continue."
)
"""Replaces a tool call when the step guard fires (docs/DESIGN.md, Agents: the step guard)."""

ASK_AGAIN_NOTES = {
    NoAnswerReason.MALFORMED_CALL: (
        "\n\nYour previous reply was a function call that could not be parsed. Call a tool only "
        "as declared, with JSON arguments that fit its parameters, or answer in plain text."
    ),
    NoAnswerReason.EMPTY: "\n\nYour previous reply was empty. Answer now, in text, or call a tool.",
}
"""Appended to the system prompt when the model is asked once more after giving no answer
(`bot.agents.no_answer.ASK_AGAIN`); never stored."""

INTERRUPTED_CALL_MESSAGE = (
    "Error: this call did not run because its turn was interrupted (for example by a restart). "
    "Ask the user before trying again."
)
"""Sent to the model in place of a result that a crash left missing."""

ALREADY_STARTED_MESSAGE = (
    "Error: this call was started before an interruption and was not run a second time, so "
    "its outcome is unknown. Tell the user and ask before trying again."
)
"""Answer for a call whose run was claimed before a crash: a tool never runs twice."""

NOT_APPROVED_MESSAGE = (
    "Error: this call was not run because its approval does not cover these exact arguments. "
    "Ask the user how to proceed."
)
"""Answer for a reviewed call whose arguments differ from what was approved (docs/decisions/0006)."""

DEFINITION_CHANGED = (
    "Not run: the tool's definition changed since the card was made (what the MCP server says "
    "{name} does is not what the approver saw), so the approval does not cover it. Nothing was "
    "sent to the server. Tell the user, and ask again: a new call of {name} waits for a new "
    "approval."
)
"""Answer for an approved MCP call whose tool's definition is not the one its card was made under
(docs/decisions/0046-mcp-pins-wiring.md)."""

MCP_HELD_CALL = (
    "Not run: {tool} is held until an admin accepts its new definition with {accept}: its MCP server "
    "changed the tool's definition, or added the tool, since an admin last accepted that server's tools. "
    "Nothing was sent to the server. Tell the user; do not call this tool again until then."
)
"""What the model reads in place of a held MCP tool's result (`bot.tools.mcp.pins.rules.call_refusal`):
`tool` as users see it (`<server>__<tool>`), `accept` the exact command
(docs/decisions/0043-pinned-mcp-definitions.md)."""
MCP_HELD_TOOL = (
    "{tool} is held until an admin accepts its new definition with {accept} (its MCP server changed or "
    "added it since an admin last accepted that server's tools)"
)
"""Why a held MCP tool is not offered (`bot.tools.mcp.pins.rules.held_reason`), after "<tool> is not
available now: " for the model, and in an approver's refusal."""

REJECTED_BY_REVIEWER = "Rejected by a reviewer: {reason}"
REJECTED_BY_REVIEWER_NO_REASON = "Rejected by a reviewer (no reason given)."
REJECTED_BY_COUNTERSIGN = "Rejected: {reason}."
REJECTED_NO_DECISION = "Rejected: no decision was given for this call."
REJECTED_INVALID_DECISION = "Rejected: the reviewer's decision was invalid ({problem})."
REJECTED_BY_POLICY = "Rejected by policy: the tool {name} may not be used here."
"""Tool results for calls that did not run; the model reads them (docs/DESIGN.md, Approvals: a rejection is a
result, not a deleted call, so every call keeps its answer)."""
REFUSED_BY_TOOL = (
    "Error: {problem} Not run, and nobody was asked to approve it: {name} refuses these arguments as "
    "written. Fix them and call it again if it is still needed."
)
"""The answer, at once and without a card, to a call whose arguments its tool refuses before
doing anything (`bot.tools.refusals.refusal`); `problem` is the tool's reason, a sentence."""

ARGS_TOO_DEEP = (
    "Error: the arguments of {name} are nested more than {depth} levels deep, more than Countersign takes "
    "(what you sent is shown cut at that depth). Not run, and nobody was asked to approve it. Call it again "
    "with arguments nested less deeply if it is still needed."
)
"""The answer, at once and without a card, to a call whose arguments are nested deeper than
`bot.tools.canonical.MAX_ARGS_DEPTH` (`bot.agents.history.with_shallow_args`)."""
POLICY_CHANGED_NEEDS_REVIEW = (
    "Not run: while this call waited for the reviewed calls beside it, an admin changed the policy, "
    "and {name} now needs approval. Call it again if it is still needed."
)

TRUST_ENDED = (
    "Not run: the trust that let {name} run without an approval card no longer covers this call "
    "(it expired or was revoked, or the policy changed). Call it again if it is still needed; it "
    "will then wait for approval."
)
"""Answer for a call a trust grant covered when planned but no longer covers when it would run (docs/decisions/0022)."""
STOPPED_ANSWER = "Stopped by {name}."
"""The closing message of a stopped turn (docs/decisions/0021): the model's history records that
the user stopped it, so the next message continues from there (`bot.turns.stop.signal`)."""
TOOL_UNAVAILABLE = "Error: {name} is not available now: {reason}; nothing ran. Tell the user, and try later."
"""Answer for a call of a tool that exists but is not offered now (its MCP server is not connected)."""
MCP_TOO_MANY_QUESTIONS = (
    "Error: {name}: the MCP server kept asking questions ({rounds} rounds answered), so the call was not "
    "sent again. Whether it took effect is unknown; do not call it again without asking the user."
)
"""Answer for an MCP call whose server asked more rounds of questions than one call may.

See docs/decisions/0054-mcp-elicitation.md."""
MCP_INPUT_REQUIRED = (
    "Error: {name}: {what}. Whether it took effect is unknown; do not call it again without asking the user."
)
"""Answer for an MCP call whose server, after a question, asked for sampling, roots or only its state."""
MCP_UNUSABLE_QUESTION = (
    "Error: {name}: the MCP server asked the user a question Countersign cannot show ({reason}), so the call "
    "was not sent again. Whether it took effect is unknown; do not call it again without asking the user."
)
"""Answer for an MCP call whose server asked a question outside MCP's form subset, or a link not http(s)."""
MCP_ROUND_CUT_SHORT = (
    "Error: {name}: the call was sent again with the user's answer to the MCP server's question, and that "
    "round was cut short before its answer came, so it was not sent a second time. Whether it took effect is "
    "unknown; tell the user and ask before trying again."
)
"""Answer for an MCP call whose round after a question was claimed and never finished (a crash, a stop)."""
STOPPED_CALL = "Not run: {name} stopped this turn before the call ran."
"""The result of every call a stopped turn leaves unanswered (a reviewed one, a waiting one)."""
CANCELLED_CALL = (
    "Cancelled: {name} stopped this turn while the call ran, so it may or may not have taken effect. "
    "Tell the user and ask before trying again."
)
"""The result of a cancellable tool that a stop cut short (`bot.tools.registry.CANCELLABLE`)."""
GIVEN_UP_CALL = (
    "Not run: the bot could not carry on after this call was reviewed, tried several times, and "
    "gave up. Tell the user and ask before trying again."
)
GIVEN_UP_DELEGATION = (
    "{name} could not finish: the bot could not carry on after the calls it wanted were reviewed, "
    "tried several times, and gave up. Its outcome is unknown; do not assume it did anything."
)
"""The results of the calls of a pause whose resume the bot gave up on (`bot.agents.given_up`)."""

SUPERVISOR_INSTRUCTIONS = """\

You work with subagents, which are your tools: each does one kind of work and has its own tools. \
Give a subagent one self-contained task in `query`: it sees nothing but that text (not this \
conversation, not the user's words, not the other subagents' work), so include every name, \
address, number and detail it needs. When the work splits into independent parts, call several \
subagents in the same answer; they run at the same time. A subagent answers with a report; \
combine the reports into one answer for the user, and say plainly what failed or was rejected.
"""
"""Appended to the system prompt of the supervisor (docs/DESIGN.md, Agents: subagents start fresh)."""

SUBAGENT_REPORT_RULES = """\

Your last message is your report, and it is the only thing the one who gave you the task will \
see: none of your tool calls or their results reach them. Put every result in it, including \
what failed, what was rejected or not approved, and what you could not find. Never claim that an \
action happened unless a tool result says so.
"""
"""Appended to every subagent's prompt (docs/decisions/0008: the report carries every result)."""

SUBAGENT_CLOSING = """\

You have no steps left for tool calls. Write your report now, without calling any tool, from \
what you have so far; say what is unfinished."""
"""The closing instruction when a subagent's step or round limit fires (docs/DESIGN.md, Agents)."""

SUBAGENT_STEP_LIMIT = (
    "Stopped before finishing: this task reached its step limit, and no report could be written. "
    "Treat anything not listed here as not done."
)
"""A subagent's report when a guard fired and the closing answer had no text either; its tool
results follow, quoted (`bot.agents.llm_node`)."""

SUBAGENT_NO_REPORT = "{name} finished without a report, so its outcome is unknown. Do not assume it did anything."
"""What the supervisor reads when a subagent's last message is not an answer (an old checkpoint)."""

SUBAGENT_NO_ANSWER = (
    "{name} finished without a report: {why}. Its outcome is unknown; do not assume it did anything, "
    "and tell the user what could not be done."
)
"""What the supervisor reads when a subagent's model gave no answer, also when asked again."""

NO_ANSWER_WHY = {
    NoAnswerReason.BLOCKED: "Gemini blocked its request with its safety filters",
    NoAnswerReason.SAFETY: "Gemini withheld its reply with its safety filters",
    NoAnswerReason.RECITATION: "Gemini withheld its reply because it resembled published text",
    NoAnswerReason.MAX_TOKENS: "its model reached the output limit before writing anything",
    NoAnswerReason.MALFORMED_CALL: "its model wrote a tool call that could not be parsed",
    NoAnswerReason.EMPTY: "its model returned an empty reply",
    NoAnswerReason.OTHER: "its model stopped without an answer and gave no reason",
}
"""`SUBAGENT_NO_ANSWER`'s reason, for the supervisor's model."""

SUBAGENT_FAILED = "{name} could not finish: its model call failed ({kind}). Its outcome is unknown."
"""What the supervisor reads when a subagent's model failed after its retries."""

UNKNOWN_SUBAGENT = "Error: {name} is not a subagent; the subagents are: {available}."
TOO_MANY_DELEGATIONS = (
    "Not run: at most {limit} subagent tasks can start from one answer. Wait for these reports, then give the rest."
)
INVALID_DELEGATION = "Error: {name} needs one argument, `query`, a non-empty string with the whole task."

SUMMARY_SECTION = """

Summary of the earlier part of this conversation, a record of what was said and done there \
(not instructions; those messages are no longer shown to you):
{summary}
"""
"""Appended to the system prompt when a conversation has a running summary
(`bot.turns.context.window`); never stored."""

SUMMARY_INSTRUCTIONS = """\
You keep the running summary of a long conversation in a team's chat between people and an \
assistant that calls tools, some only after a teammate approved the call. Rewrite the summary so \
that it also covers the new messages, for an assistant that will see only the summary and the \
newest messages. Keep: who asked for what, what was done and its results (failures and \
rejections too, and why), decisions and preferences people stated, open questions and promises. \
Keep names, ids, numbers, addresses and dates exactly. Leave out small talk. Write plain text, \
at most {words} words, and nothing but the summary.
"""
"""The system prompt of a summary request."""

SUMMARY_REQUEST = """\
Summary so far:
{summary}

New messages to fold into it, oldest first:
{transcript}
"""
"""The request that folds older messages into the summary."""
