"""The Slack adapter (slack-bolt `AsyncApp`, Block Kit cards)."""
