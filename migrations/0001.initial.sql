-- Countersign's own tables (LangGraph's checkpoint tables are created by AsyncPostgresSaver.setup).
-- Applied by yoyo-migrations; never edit an applied migration, add a new file.

-- A conversation the bot has taken part in (one LangGraph thread_id each).
CREATE TABLE conversations (
    thread_id       text PRIMARY KEY,
    platform        text NOT NULL,
    workspace_id    text NOT NULL,
    channel_id      text NOT NULL,
    thread          text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_active_at  timestamptz NOT NULL DEFAULT now()
);

-- One pause of a graph: the interrupt that waits for decisions on one or more tool calls.
CREATE TABLE reviews (
    id              uuid PRIMARY KEY,
    thread_id       text NOT NULL REFERENCES conversations (thread_id),
    interrupt_id    text NOT NULL,
    requester_id    text NOT NULL,
    requester_name  text NOT NULL,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'resuming', 'done')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    UNIQUE (thread_id, interrupt_id)
);
CREATE INDEX reviews_open ON reviews (thread_id) WHERE status <> 'done';

-- One row per pending tool call: the card, and the decision once made.
CREATE TABLE approvals (
    id              text PRIMARY KEY,
    review_id       uuid NOT NULL REFERENCES reviews (id),
    position        integer NOT NULL,
    thread_id       text NOT NULL,
    workspace_id    text NOT NULL,
    tool_call_id    text,
    tool_name       text NOT NULL,
    description     text NOT NULL DEFAULT '',
    proposed_args   jsonb NOT NULL,
    requester_id    text NOT NULL,
    requester_name  text NOT NULL,
    card_ref        text,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'approved', 'edited', 'rejected', 'expired')),
    decided_by_id   text,
    decided_by_name text,
    decided_at      timestamptz,
    final_args      jsonb,
    reason          text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (review_id, position),
    CHECK ((status = 'pending') = (decided_at IS NULL))
);
CREATE INDEX approvals_pending ON approvals (thread_id) WHERE status = 'pending';

-- Append-only record of every decision, refused attempt, expiry and configuration change.
CREATE TABLE audit_log (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT now(),
    kind            text NOT NULL CHECK (kind IN ('decision', 'refused', 'expiry', 'config')),
    workspace_id    text NOT NULL,
    thread_id       text,
    approval_id     text,
    tool_name       text,
    actor_id        text,
    actor_name      text,
    outcome         text NOT NULL,
    proposed_args   jsonb,
    final_args      jsonb,
    reason          text,
    detail          jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_log_recent ON audit_log (workspace_id, at DESC);

CREATE FUNCTION audit_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END;
$$;
CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_is_append_only();

-- Platform events already handled (Slack retries the same event_id; replicas share this).
CREATE TABLE processed_events (
    event_key       text PRIMARY KEY,
    received_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX processed_events_age ON processed_events (received_at);

-- Tool calls that have started: a call id is claimed once, so no tool runs twice.
CREATE TABLE tool_runs (
    thread_id       text NOT NULL,
    tool_call_id    text NOT NULL,
    tool_name       text NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, tool_call_id)
);
