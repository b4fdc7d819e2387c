-- Subagents (docs/decisions/0008): where a review comes from, which agent a conversation runs, and the
-- `agent` setting (per workspace or channel).
-- depends: 0002.admin-configuration

-- The subagent whose review gate raised the interrupt; NULL for the top-level agent.
ALTER TABLE reviews ADD COLUMN source text;
ALTER TABLE approvals ADD COLUMN source text;

-- The agent whose graph owns the conversation's checkpoint (`react` or `subagents`). It changes
-- only while the conversation is at rest, so a pending interrupt is always resumed by the graph
-- that raised it. NULL: no turn has run yet.
ALTER TABLE conversations ADD COLUMN agent text CHECK (agent IS NULL OR agent IN ('react', 'subagents'));

ALTER TABLE settings DROP CONSTRAINT settings_key_check;
ALTER TABLE settings ADD CONSTRAINT settings_key_check
    CHECK (key IN ('quorum', 'self_approval', 'expiry_s', 'cards', 'scope', 'agent'));

-- Reviews are looked up per thread and status when a thread is settled or resumed.
CREATE INDEX reviews_thread_status ON reviews (thread_id, status);
