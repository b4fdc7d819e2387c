"""Card sentences shared by the Slack and Discord adapters: the trust button, a trusted outcome, where a card went.

Mentions (`<@…>`, `<#…>`) and code spans (backticks) are written alike on both platforms; a
sentence whose markup differs stays in the platform's `messages` module
(docs/decisions/0060-words-in-one-place.md).
"""

from __future__ import annotations

BUTTON_TRUST = "Approve and trust for {duration}"
"""The card's trust button: Slack allows 75 characters of button text, Discord 80 of a label."""
CARD_OUTCOME_TRUSTED = "{outcome} and trusted for {duration}"
"""The outcome on a card whose approver chose "Approve and trust": "Approved and trusted for 30 minutes"."""
REJECT_INTRO = "The agent will be told the call was rejected, with your reason if you give one."
"""The Reject form's intro (Slack) or description (Discord)."""
CARDS_IN_DMS = "Approval needed for {tools}: the card was sent to the approvers by direct message."
"""To the requester when a card went to its approvers' DMs."""
