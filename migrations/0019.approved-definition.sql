-- What the approver saw is what runs (docs/decisions/0046-mcp-pins-wiring.md): an approval of an
-- MCP tool's call records the pinned digest of the tool's definition its card was made under,
-- and the tool-run ledger runs the call only while the tool has that definition. A call refused
-- so is marked, and its card says it did not run because the definition changed.
-- `definition_digest` is NULL for the bot's own tools (and for approvals stored before it: an
-- MCP call among them never runs). Trust grants need no column: a grant's `matched_digest`
-- binds the definition too (`bot.approvals.trust.key_digest`).
-- depends: 0018.read-only-hint

ALTER TABLE approvals
    ADD COLUMN definition_digest text,
    ADD COLUMN definition_changed boolean NOT NULL DEFAULT false;
