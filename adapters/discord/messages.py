"""Every sentence only the Discord adapter shows a person: its own words and markdown.

A sentence Slack says in the same words lives in `adapters.words` instead
(docs/decisions/0060-words-in-one-place.md).
"""

from __future__ import annotations

from adapters.words.display import ProgressWords
from bot.base.errors import ModelErrorKind

CARD_TITLE_PENDING = "✋ Approval needed"
CARD_TITLE = {
    "approved": "✅ Approved",
    "edited": "✏️ Approved with edits",
    "rejected": "🚫 Rejected",
    "expired": "⌛ Expired",
    "stopped": "⏹️ Stopped",
}
CARD_OUTCOME_WORD = {
    "approved": "Approved",
    "edited": "Edited and approved",
    "rejected": "Rejected",
    "expired": "Expired",
    "stopped": "Stopped",
}
FIELD_TOOL = "Tool"
FIELD_SUBAGENT_TOOL = "{subagent} wants to call"
"""The tool field's name on a card for a call a subagent wants (docs/agents.md)."""
FIELD_REQUESTER = "Requested by"
FIELD_WHY = "Why"
FIELD_PROPOSED_ARGS = "Proposed by the agent"
"""The field with the agent's arguments on a card whose arguments were edited."""
EDITED_ARGS_TITLE = "**Edited arguments, waiting for approvals**"
FINAL_ARGS_TITLE = "**Arguments used**"
CARD_SHORTENED_SEE_ALL = "Long values are shortened: **All arguments** shows every key and value in full."
CARD_SHORTENED = "Long values are shortened."
CARD_NO_ARGUMENTS = "*No arguments.*"
CARD_KEYS_NOT_LISTED = "*Too many arguments to list here.*"
TOO_LONG_TO_REVIEW = (
    "⛔ **Too long to review in Discord:** these arguments take {size} characters, and All arguments "
    "holds {limit}. Approve is not offered, as nobody could see everything it would run: Reject the call, "
    "or Edit it if it fits."
)
"""On a card whose arguments Discord cannot show in full."""
TOO_MANY_KEYS = (
    "⛔ **Too many arguments to review in Discord:** this call has {size}, and a card lists about {limit}. "
    "Approve is not offered, as nobody could see everything it would run: Reject the call, or Edit it if it fits."
)
REFUSED_TOO_LONG = (
    "This call cannot be approved in Discord: its arguments take {size} characters, more than the {limit} "
    "All arguments holds, so nobody could see everything it would run. Nothing was changed; reject it, or "
    "edit it if it fits."
)
REFUSED_TOO_MANY_KEYS = (
    "This call cannot be approved in Discord: it has {size} arguments, more than the about {limit} a card "
    "lists, so nobody could see everything it would run. Nothing was changed; reject it, or edit it if it fits."
)
FIELD_TRUST = "🔓 Trust"
CARD_TRUST_FREE = (
    "**Approve and trust** binds only {bound}: later calls with the same {bound} and **any** {free} run "
    "without a card until the trust ends."
)
"""On a card that offers a trust binding some arguments only: the arguments it leaves free."""
CARD_TRUSTED_FREE = "The trust binds only {bound}; {free} stay free."
ARGS_PAGE_TITLE = "All arguments of {tool} · page {page} of {pages}"
ARGS_CHANGED = "The arguments changed since this page was drawn; here they are as they are now."
ARGS_TOO_LONG = "These arguments are too long to show in Discord. Nothing was changed."
FIELD_DECIDED = "Decision"
FIELD_OUTCOME_UNKNOWN = "⚠️ Outcome unknown"
OUTCOME_UNKNOWN = (
    "The call started, then the bot stopped, the call was stopped, or no readable answer came. It was not run again;"
    " it may or may not have taken effect."
)
FIELD_NOT_RUN = "⛔ Not run"
NOT_RUN = "The bot could not carry on after this decision and gave up, so the call did not run."
"""The field on the card of an approved call whose pause the bot gave up resuming before it ran."""
FIELD_REASON = "Reason"
FIELD_ESCALATED = "↗️ Escalated"
CARD_ESCALATED = "to {target} <t:{ts}:f>"
"""The field on every copy of a card that escalated (`/countersign escalate`)."""
ESCALATED_PING = "{mention} this card was escalated to you: it waits for a decision."
"""The message of an escalated copy posted in a conversation: it pings the role (or user)."""
CARD_POSITION = "{position} of {total}"
CARD_DECIDED = "{outcome} by <@{user}> <t:{ts}:f>"
CARD_DECIDED_NOBODY = "{outcome} <t:{ts}:f>"

BUTTON_APPROVE = "Approve"
BUTTON_EDIT = "Edit"
BUTTON_EDIT_AGAIN = "Edit again"
BUTTON_REJECT = "Reject"
BUTTON_SHOW_ARGS = "All arguments"
BUTTON_PREVIOUS = "Previous"
BUTTON_NEXT = "Next"
BUTTON_STOP = "Stop"
"""The button on the status line that stops the running turn (docs/decisions/0021)."""
BUTTON_APPROVE_ALL = "Approve all {count}"
BUTTON_REJECT_ALL = "Reject all {count}"
REJECT_ALL_TITLE = "Reject all calls"
REJECT_ALL_LABEL = "Reason (optional)"
REJECT_ALL_DESCRIPTION = "Each waiting call you may decide is rejected; the agent reads your reason."
BATCH_APPROVED = "✅ Approved: {calls}."
BATCH_REJECTED = "🚫 Rejected: {calls}."

EDIT_TITLE = "Edit tool call"
EDIT_LABEL = "Arguments (JSON object)"
EDIT_DESCRIPTION = "Submitting approves the call with these arguments; the tool stays the same."
REJECT_TITLE = "Reject tool call"
REJECT_LABEL = "Reason (optional)"

EDIT_NOT_JSON = "That is not valid JSON: {problem}. Nothing was changed; press **Edit again** to retry."
EDIT_NOT_OBJECT = (
    'The arguments must be a JSON object, like `{"name": "value"}`. Nothing was changed; press **Edit again** to retry.'
)
EDIT_REFUSED = "Your edit was not applied: {problem} Nothing was changed; press **Edit again** to retry."
"""`problem` is a sentence, with its final period (`adapters.words.decisions.as_sentence`)."""
EDIT_TOO_LONG = (
    "The arguments of this call are too long to edit here ({length} characters; Discord allows "
    "{limit}). Nothing was changed; decide the call as it is with the card's other buttons."
)
DECIDED = "Recorded: {outcome}."

REFUSED_NOT_PERMITTED = (
    "You can't decide this approval: only the person who asked, members with the Manage "
    "Server permission and the bot admins can (in a DM, only the person who asked)."
)
REFUSED_OTHER_WORKSPACE = "You can't decide this approval: it belongs to another server."
REFUSED_OTHER_DM = "You can't open this approval: it was asked in someone else's DM with me. Nothing was shown."
UNKNOWN_BUTTON = "That button is not one I can act on (it may be from an older card). Nothing was changed."
UNKNOWN_FORM = "That form is not one I can act on (it may be from an older version). Nothing was changed."
COMMAND_UNKNOWN = "that is not a `/countersign` command I know (Discord may show an old list: reload it and try again)"
OPTION_UNREADABLE = "the {kind} option could not be read (it may name something I cannot see)"
OPTION_NOT_A_CHOICE = "`{option}` must be one of {choices}"
_RELOAD = "Discord may show an old version: reload it and try again"
OPTION_UNKNOWN = "`{option}` is not an option of this command (" + _RELOAD + ")"
OPTION_WRONG_TYPE = "`{option}` must be {kind} (" + _RELOAD + ")"
OPTION_KINDS = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "user": "a person",
    "channel": "a channel",
    "role": "a role",
    "mentionable": "a person or a role",
    "attachment": "a file",
}
"""The command and option sentences above are problems: `adapters.words.admin.error_text` words the
whole refusal."""

REVIEW_PENDING = (
    "<@{user}> a tool call in this conversation is waiting for approval, so I did not pass your "
    "message on. Please decide it first: {links}"
)
REVIEW_BUSY = (
    "<@{user}> a tool call in this conversation is still being worked on, so I did not pass your "
    "message on. Please send it again in a moment."
)
QUESTION_PENDING = (
    "<@{user}> a tool call in this conversation is waiting for {name} to answer a question from the MCP "
    "server {server}, so I did not pass your message on. Please send it again once the question is answered."
)
REVIEW_PENDING_LINK = "[{tool} ({position})]({url})"
MESSAGE_FAILED_DELETED = (
    "Something went wrong on my side and I could not answer a message that has since been deleted. "
    "The details are in the bot's log (conversation `{thread_id}`)."
)
"""`adapters.words.conversation.MESSAGE_FAILED` for a message its author deleted: the notice is public,
so not a word of it."""
MESSAGE_FAILED_LINKED = (
    "Something went wrong on my side and I could not answer [this message]({url}). Please send it "
    "again; the details are in the bot's log (conversation `{thread_id}`)."
)
"""`adapters.words.conversation.MESSAGE_FAILED` for a message the bot could not read back to see whether
it is still there, or one its author edited down to nothing but the bot's mention."""
CARDS_IN_CHANNEL = "Approval needed for {tools}: the card is in <#{channel}>."
EXPIRED_NOTICE = "<@{user}> your request to run `{tool}` expired without a decision, so it did not run."
ASK_IN_SERVERS = (
    "I can't run `{tool}` from a DM: in {servers} it needs someone other than you to approve it, "
    "and nobody else can in a DM. Ask there instead."
)
"""Told in a DM, before any card, when a server the person shares with the bot would have another decide the call."""
ASK_IN_A_SERVER = (
    "I can't run `{tool}` from a DM: I could not check the rules of the servers we share, and a DM "
    "may not allow more than they do. Try again in a moment, or ask in a server."
)
"""Told in a DM when the servers that could be stricter could not be checked (the call is refused to be safe)."""
SERVER_NAME = "**{name}**"
SERVERS_OR = "{some} or {last}"
RESUME_GIVEN_UP = (
    "<@{user}> I could not carry on after the decision on your request: I tried several times and gave up."
    "{not_run}{unknown} You can ask again."
)
"""To the requester, in the channel (pinging only them), once the bot gave up resuming a decided pause."""
RESUME_GIVEN_UP_NOBODY = (
    "I could not carry on after the decision on a request here: I tried several times and gave up."
    "{not_run}{unknown} You can ask again."
)
"""The same, when the requester is not known."""
STOPPED_NOTICE = "⏹️ Stopped by <@{user}>."
"""Said in the conversation in place of an answer when a turn was stopped (pings nobody)."""
FIELD_TALLY = "Approvals"
CARD_TALLY = "{count} of {quorum}{names}"
MISSING_INTENT = (
    "Discord refused the Message Content intent. Enable it in the Developer Portal: your "
    "application → Bot → Privileged Gateway Intents → Message Content Intent, then restart."
)

PROGRESS = ProgressWords(
    working_one="⏳ {names} is working…",
    working_many="⏳ {names} are working…",
    waiting_one="✋ {names} waits for approval",
    waiting_many="✋ {names} wait for approval",
    agent="⏳ Putting the answer together…",
    retrying={
        ModelErrorKind.BUSY: "⏳ The model is rate limited; trying again in {wait}…",
        ModelErrorKind.UNAVAILABLE: "⏳ The model did not answer; trying again in {wait}…",
    },
    busy="⏳ Working on it…",
    stopping="⏹️ Stopping (asked by {name})…",
)
"""The status line, edited in place while subagents work, a model call waits to be retried, or
a turn goes on for a while (with a Stop button), deleted when the turn ends."""

# An MCP server's question to whoever asked for the call
# (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md)
QUESTION_TITLE = "❓ A question for you"
QUESTION_TITLE_DONE = {
    "accept": "💬 Question answered",
    "decline": "🚫 Question declined",
    "cancel": "✖️ Question cancelled",
    "expired": "⌛ Question expired",
}
"""The finished card's title, by outcome: an `Action` value, or "expired"."""
FIELD_QUESTION_FIELDS = "It asks for"
QUESTION_FIELD_LINE = "• {label}{required}"
QUESTION_FIELD_REQUIRED = " (required)"
QUESTION_FIELD_MORE = "• … and {count} more"
QUESTION_PAGES = "The form has {pages} pages: after each, **Continue** opens the next."
QUESTION_LINK_NOTE = "It asks you to open a link: **Open link…** shows it to you alone."
QUESTION_ONLY_REQUESTER = "Only the person asked can answer."
FIELD_QUESTION_OUTCOME = "Outcome"
QUESTION_DONE = {
    "accept": "Answered by <@{user}> <t:{ts}:f>",
    "decline": "Declined by <@{user}> <t:{ts}:f>",
    "cancel": "Cancelled by <@{user}> <t:{ts}:f>",
    "expired": "Expired unanswered <t:{ts}:f>",
}
QUESTION_DONE_NOBODY = {
    "accept": "Answered <t:{ts}:f>",
    "decline": "Declined <t:{ts}:f>",
    "cancel": "Cancelled <t:{ts}:f>",
    "expired": "Expired unanswered <t:{ts}:f>",
}
"""The finished card's outcome when nobody is named (the bot cancelled it, say, when the turn stopped)."""
BUTTON_ANSWER = "Answer…"
BUTTON_OPEN_LINK = "Open link…"
BUTTON_DECLINE = "Decline"
BUTTON_CANCEL_QUESTION = "Cancel"
BUTTON_CONTINUE = "Continue ({page}/{pages})"
BUTTON_LINK = "Open the link"
QUESTION_CONTINUE = "Page {done} of {pages} is kept. Continue with the next page: the answer is sent after the last."
"""The ephemeral reply to a submitted page of a form that has more."""
QUESTION_MODAL_PAGE = "{title} ({page}/{pages})"
QUESTION_YES = "Yes"
QUESTION_NO = "No"
QUESTION_CHOOSE = "Choose…"
QUESTION_CHOOSE_SOME = "Choose any…"
QUESTION_TYPE_OPTION = "Type one of: {options}"
QUESTION_TYPE_OPTIONS = "Type any of, with commas: {options}"
QUESTION_PLACEHOLDER = {
    "email": "name@example.com",
    "uri": "https://…",
    "date": "YYYY-MM-DD, e.g. 2026-12-24",
    "date-time": "YYYY-MM-DDTHH:MM:SSZ (UTC), e.g. 2026-12-24T18:00:00Z",
}
"""A text field's placeholder, by its `format`."""
QUESTION_NUMBER = {"integer": "A whole number", "number": "A number"}
QUESTION_NUMBER_FROM = " from {low}"
QUESTION_NUMBER_TO = " up to {high}"

QUESTION_PING = "<@{user}>"
"""The card's message content: the requester's mention (a mention inside an embed notifies nobody)."""
BUTTON_ANSWER_AGAIN = "Fix the answer…"
QUESTION_ONLY_REQUESTER_CLICK = "Only <@{user}> can answer this question. Nothing was changed."
QUESTION_UNKNOWN = "I can't find this question any more. Nothing was changed."
QUESTION_CLOSED = {
    "answered": "This question was already answered. Nothing was changed.",
    "expired": "This question expired unanswered; the server was told *cancel*. Nothing was changed.",
    "stopped": "This question was closed by a stop; the server was told *cancel*. Nothing was changed.",
}
"""The reply to a click or a form on a question that is no longer open, by its status."""
QUESTION_PROBLEM = "Nothing was sent: {problem} Press **Fix the answer…** to correct it; what you entered is kept."
"""The reply to a page whose answer does not fit the server's question (a modal cannot show field errors)."""
QUESTION_NOT_A_FORM = "This question is not a form. Nothing was changed."
