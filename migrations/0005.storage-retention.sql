-- Bounded storage (docs/decisions/0012): old checkpoints are pruned, idle conversations and old
-- audit rows are deleted when an operator sets a retention (docs/decisions/0012).
-- depends: 0004.unfinished-work

-- A run wrote checkpoints since the conversation was last pruned. Set when a run starts
-- (`ConversationStore.mark_running`), cleared by the upkeep once it pruned the conversation
-- under its lock. Conversations from before this migration are pruned once.
ALTER TABLE conversations ADD COLUMN prune_due boolean NOT NULL DEFAULT true;
ALTER TABLE conversations ALTER COLUMN prune_due SET DEFAULT false;
CREATE INDEX conversations_prune_due ON conversations (thread_id) WHERE prune_due AND running_since IS NULL;

-- Retention finds conversations idle the longest first. `last_active_at` is the last message or
-- decision (a run the bot starts by itself, such as an expiry's, does not count).
CREATE INDEX conversations_idle ON conversations (last_active_at);

-- A conversation's approvals are deleted with it; the tool-run gate also looks approvals up by
-- (thread_id, tool_call_id), decided or not.
CREATE INDEX approvals_thread_call ON approvals (thread_id, tool_call_id);

-- Audit retention deletes the oldest rows first.
CREATE INDEX audit_log_age ON audit_log (at);

-- The audit log stays append-only, except for retention: a transaction that sets
-- `countersign.audit_retention` to 'on' (locally, `set_config(..., true)`) may delete rows.
-- UPDATE is always refused.
CREATE OR REPLACE FUNCTION audit_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('countersign.audit_retention', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only';
END;
$$;
