"""Every sentence only the Slack adapter shows a person: its own words and mrkdwn.

A sentence Discord says in the same words lives in `adapters.words` instead
(docs/decisions/0060-words-in-one-place.md).
"""

from __future__ import annotations

from adapters.words.display import ProgressWords
from adapters.words.mcp import DEFINITION_CHANGED
from bot.base.errors import ModelErrorKind

WORKING_REACTION = "hourglass_flowing_sand"

CARD_FALLBACK = "Approval needed: {tool} (requested by {requester})"
CARD_FALLBACK_SUBAGENT = "Approval needed: {subagent} wants to call {tool} (requested by {requester})"
CARD_HEADER_PENDING = ":raised_hand: Approval needed"
CARD_HEADER = {
    "approved": ":white_check_mark: Approved",
    "edited": ":pencil2: Approved with edits",
    "rejected": ":no_entry_sign: Rejected",
    "expired": ":hourglass: Expired",
    "stopped": ":black_square_for_stop: Stopped",
}
CARD_TOOL_LINE = "*Tool:* `{tool}`{position}"
CARD_SUBAGENT_LINE = "*{subagent}* wants to call `{tool}`{position}"
"""The tool line of a card for a call a subagent wants (docs/agents.md)."""
CARD_POSITION = "  ·  {position} of {total}"
CARD_REQUESTER_LINE = "*Requested by:* <@{user}>"
CARD_WHY_LINE = "*Why:* {why}"
CARD_ARGS_TITLE = "*Arguments*"
CARD_FINAL_ARGS_TITLE = "*Arguments used*"
CARD_EDITED_ARGS_TITLE = "*Edited arguments, waiting for approvals*"
CARD_SHORTENED_SEE_ALL = "_Long values are shortened: *All arguments* shows every key and value in full._"
CARD_SHORTENED = "_Long values are shortened._"
CARD_NO_ARGUMENTS = "_No arguments._"
CARD_KEYS_NOT_LISTED = "_Too many arguments to list on this card._"
TOO_LONG_TO_REVIEW = (
    ":no_entry: *Too long to review in Slack:* these arguments take {size} characters, and its largest view "
    "holds {limit}. Approve is not offered, as nobody could see everything it would run: Reject the call, or "
    "Edit it if it fits."
)
"""On a card whose arguments Slack cannot show in full, and to whoever tries to approve it."""
TOO_MANY_KEYS = (
    ":no_entry: *Too many arguments to review in Slack:* this call has {size}, and a card lists about {limit}. "
    "Approve is not offered, as nobody could see everything it would run: Reject the call, or Edit it if it fits."
)
REFUSED_TOO_LONG = (
    "This call cannot be approved in Slack: its arguments take {size} characters, more than the {limit} its "
    "largest view holds, so nobody could see everything it would run. Nothing was changed; reject it, or edit "
    "it if it fits."
)
REFUSED_TOO_MANY_KEYS = (
    "This call cannot be approved in Slack: it has {size} arguments, more than the about {limit} a card "
    "lists, so nobody could see everything it would run. Nothing was changed; reject it, or edit it if it fits."
)
CARD_TRUST_FREE = (
    ":unlock: *Approve and trust* binds only {bound}: later calls with the same {bound} and *any* {free} run "
    "without a card until the trust ends."
)
"""Under a card that offers a trust binding some arguments only: the arguments it leaves free."""
CARD_TRUSTED_FREE = ":unlock: The trust binds only {bound}; {free} stay free."
ARGS_VIEW_TITLE = "All arguments"
ARGS_VIEW_PENDING = (
    "Every argument of `{tool}` that an approval would run ({keys} keys, in the tool's order), "
    "shown in {parts} part(s) that follow each other."
)
ARGS_VIEW_DECIDED = "Every argument of `{tool}` as decided ({keys} keys, in the tool's order), in {parts} part(s)."
ARGS_VIEW_PLAIN = (
    "Every argument of `{tool}` ({keys} keys, in the tool's order), in {parts} parts of plain text that follow "
    "each other: too long for code blocks here."
)
ARGS_VIEW_TOO_LONG = "These arguments are too long to show in Slack. Nothing was changed."
CARD_DECIDED = "{outcome} by <@{user}> · {when}"
CARD_REASON = "*Reason:* {reason}"
CARD_OUTCOME_UNKNOWN = (
    ":warning: Outcome unknown: the call started, then the bot stopped, the call was stopped, or no readable answer "
    "came. It was not run again; it may or may not have taken effect."
)
CARD_NOT_RUN = ":no_entry_sign: The bot could not carry on after this decision and gave up, so the call did not run."
"""The line on the card of an approved call whose pause the bot gave up resuming before it ran."""
CARD_DEFINITION_CHANGED = f":no_entry_sign: {DEFINITION_CHANGED}"
"""The line on the card of an approved MCP call refused because its tool's definition changed since."""
CARD_ESCALATED = ":arrow_upper_right: Escalated to {target} · {when}"
"""The line on every copy of a card that escalated (`/countersign escalate`)."""
CARD_ESCALATED_TEXT = "{mention} This card was escalated to you: {card}"
"""The notification text of an escalated copy posted in a channel, naming its audience."""
CARD_OUTCOME_WORD = {
    "approved": "Approved",
    "edited": "Edited and approved",
    "rejected": "Rejected",
    "expired": "Expired",
    "stopped": "Stopped",
}

BUTTON_APPROVE = "Approve"
BUTTON_EDIT = "Edit"
BUTTON_REJECT = "Reject"
BUTTON_SHOW_ARGS = "All arguments"
BUTTON_STOP = "Stop"
"""The button on the progress message that stops the running turn (docs/decisions/0021)."""

BUTTON_APPROVE_ALL = "Approve all {count}"
BUTTON_REJECT_ALL = "Reject all {count}"
BATCH_LINE = (
    "*{count} calls of this request wait for a decision.* *Approve all* and *Reject all* decide each one "
    "you may decide, as its own buttons would; the others stay pending."
)
"""Above the batch buttons on the first card of a pause with two or more pending calls."""
REJECT_ALL_TITLE = "Reject all calls"
REJECT_ALL_SUBMIT = "Reject all"
REJECT_ALL_INTRO = (
    "Each of the {count} waiting calls of this request that you may decide is rejected. The agent is told, "
    "with your reason if you give one."
)
BATCH_DONE_TITLE = "Reject all"
CLOSE = "Close"
BATCH_APPROVED = ":white_check_mark: Approved: {calls}."
BATCH_REJECTED = ":no_entry_sign: Rejected: {calls}."

EDIT_TITLE = "Edit tool call"
EDIT_SUBMIT = "Approve edit"
REJECT_TITLE = "Reject tool call"
REJECT_SUBMIT = "Reject"
CANCEL = "Cancel"
EDIT_INTRO = (
    "Edit the arguments of `{tool}` as a JSON object. Submitting approves the call with "
    "these arguments; the tool itself cannot be changed."
)
EDIT_LABEL = "Arguments (JSON)"
REJECT_LABEL = "Reason (optional)"

EDIT_NOT_JSON = "This is not valid JSON: {problem}"
EDIT_NOT_OBJECT = 'The arguments must be a JSON object, like {"name": "value"}.'
EDIT_TOO_LONG = (
    "The arguments of this call are too long to edit here ({length} characters; Slack allows "
    "{limit}). Nothing was changed; decide the call as it is with the card's other buttons."
)

REFUSED_NOT_PERMITTED = (
    "You can't decide this approval: only the person who asked, the workspace's admins and the bot admins can."
)
REFUSED_OTHER_WORKSPACE = "You can't decide this approval: it belongs to another workspace."
EDIT_REFUSED = "Your edit was not applied: {problem} Nothing was changed; correct the arguments and submit again."
"""An edit its tool refuses, in the edit form; `problem` is a sentence (`adapters.words.decisions.as_sentence`)."""

REVIEW_PENDING = (
    "A tool call in this conversation is waiting for approval, so I did not pass your message "
    "on. Please decide it first: {links}"
)
REVIEW_BUSY = (
    "A tool call in this conversation is still being worked on, so I did not pass your message on. "
    "Please send it again in a moment."
)
QUESTION_PENDING = (
    "A tool call in this conversation is waiting for {name} to answer a question from the MCP server "
    "{server}, so I did not pass your message on. Please send it again once the question is answered."
)
REVIEW_PENDING_LINK = "<{url}|{tool} ({position})>"
CARDS_IN_CHANNEL = "Approval needed for {tools}: the card is in <#{channel}>{link}."
EXPIRED_NOTICE = "Your request to run `{tool}` expired without a decision, so it did not run."
ASK_ELSEWHERE = "I can't run `{tool}` here: it needs someone other than you to approve it. Ask in a channel instead."
"""A call refused for want of a decider where it was asked (Discord DMs have it; Slack never sends it today)."""
RESUME_GIVEN_UP = (
    "I could not carry on after the decision on your request: I tried several times and gave up."
    "{not_run}{unknown} You can ask again."
)
"""To the requester, privately, once the bot gave up resuming a decided pause (its cards say the same)."""
STOPPED_NOTICE = ":black_square_for_stop: Stopped by <@{user}>."
"""Said in the conversation in place of an answer when a turn was stopped."""
CARD_TALLY = "*Approvals:* {count} of {quorum}{names}"

CONTEXT_NEEDS_LINK = (
    "Slack does not tell a slash command which thread it was typed in, and in this channel each thread "
    "is a conversation of its own. Name the thread with its link: on the thread's first message (or any "
    "reply) choose *Copy link*, then send `/countersign {command} <link>`{also}."
)
CONTEXT_NEEDS_LINK_ALSO = {"context": " (or `/countersign context reset <link>`)"}
"""`CONTEXT_NEEDS_LINK`'s aside, by the command it answers (`context`, `stop`)."""
CONTEXT_LINK_PROBLEMS = {
    "not_a_message": "That is not a link to a Slack message. Use *Copy link* on a message of the thread.",
    "other_workspace": "That link points into another Slack workspace; name a thread of this channel.",
    "other_channel": (
        "That link points into another channel. Run the command in the thread's own channel, "
        "with the link of a message of that thread."
    ),
}
"""By `adapters.slack.thread_links.LinkProblem` value."""

REPLY_CUT = "(The rest is cut: ask for less, e.g. `audit limit 20` or `audit tool <name>`.)"

PROGRESS = ProgressWords(
    working_one=":hourglass_flowing_sand: _{names} is working…_",
    working_many=":hourglass_flowing_sand: _{names} are working…_",
    waiting_one=":raised_hand: _{names} waits for approval_",
    waiting_many=":raised_hand: _{names} wait for approval_",
    agent=":hourglass_flowing_sand: _Putting the answer together…_",
    retrying={
        ModelErrorKind.BUSY: ":hourglass_flowing_sand: _The model is rate limited; trying again in {wait}…_",
        ModelErrorKind.UNAVAILABLE: ":hourglass_flowing_sand: _The model did not answer; trying again in {wait}…_",
    },
    busy=":hourglass_flowing_sand: _Working on it…_",
    stopping=":black_square_for_stop: _Stopping (asked by {name})…_",
)
"""The progress message, updated in place while subagents work, a model call waits to be
retried, or a turn goes on for a while (with a Stop button), deleted when the turn ends."""

# An MCP server's question to whoever asked for the call
# (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md)
QUESTION_HEADER = ":question: A question for you"
QUESTION_HEADER_DONE = {
    "accept": ":speech_balloon: Question answered",
    "decline": ":no_entry_sign: Question declined",
    "cancel": ":heavy_multiplication_x: Question cancelled",
    "expired": ":hourglass: Question expired",
}
"""The finished card's header, by outcome: an `Action` value, or "expired"."""
QUESTION_MESSAGE = ">{message}"
QUESTION_LINK_NOTE = "_It asks you to open a link: *Open link…* shows it to you alone._"
QUESTION_ONLY_REQUESTER = "_Only <@{user}> can answer._"
QUESTION_DONE = {
    "accept": "Answered by <@{user}> · {when}",
    "decline": "Declined by <@{user}> · {when}",
    "cancel": "Cancelled by <@{user}> · {when}",
    "expired": "Expired unanswered · {when}",
}
QUESTION_DONE_NOBODY = {
    "accept": "Answered · {when}",
    "decline": "Declined · {when}",
    "cancel": "Cancelled · {when}",
    "expired": "Expired unanswered · {when}",
}
"""The finished card's line when nobody is named (the bot cancelled it, say, when the turn stopped)."""
QUESTION_FALLBACK = "{server} asks a question while running {tool}"
QUESTION_DONE_FALLBACK = "{outcome}: {server}'s question while running {tool}"
BUTTON_ANSWER = "Answer…"
BUTTON_OPEN_LINK = "Open link…"
BUTTON_DECLINE = "Decline"
BUTTON_CANCEL_QUESTION = "Cancel"
BUTTON_LINK = "Open the link"
QUESTION_LINK_TOO_LONG = "(the link is too long for a button: copy it from the line above)"
QUESTION_MODAL_SUBMIT = "Send"
QUESTION_MODAL_TITLE = "Question"
"""The title of the answer form once it only says why it was refused."""
QUESTION_YES = "Yes"
QUESTION_NO = "No"
QUESTION_CHOOSE = "Choose…"
QUESTION_CHOOSE_SOME = "Choose any…"
QUESTION_CHOOSE_UP_TO = "Choose up to {count}…"

QUESTION_NOT_YOURS = "Only <@{user}> can answer this question: they asked for the call."
"""Told (ephemeral) to anyone but the requester who presses a question's button."""
QUESTION_CLOSED = {
    "answered": "That question was answered already.",
    "expired": "That question expired unanswered; the server was told `cancel`.",
    "stopped": "That question was closed when its turn was stopped.",
}
"""Told (ephemeral) to who presses a button of a question no longer open, by its status."""
QUESTION_UNKNOWN = "That question is not known here (it may be from an old message)."
QUESTION_NOT_A_FORM = "That question has no form to fill in."
"""A forged *Answer…* on a link question."""
QUESTION_NOT_A_LINK = "That question has no link to open."
"""A forged *Open link…* on a form."""
QUESTION_FAILED = "Something went wrong with that question; nothing was sent. Try again."
