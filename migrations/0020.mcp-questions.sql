-- MCP elicitation (docs/decisions/0054-mcp-elicitation.md): a server's question in the middle of
-- a call is put to the requester, and the call goes on with their answer as a new `tools/call`.
-- depends: 0019.approved-definition

-- Each round after the first of an MCP call is a `tools/call` of its own that the server may act
-- on: claimed here once (a row), never sent twice. `asked` is the server's `InputRequiredResult`
-- of the round (MCP's JSON), recorded as soon as it comes, so that a re-run of the tool node
-- (a resume, a restart) reads it instead of sending the round again. Round 0 is the call's own
-- claim in `tool_runs`; its row here is written only with what it asked.
CREATE TABLE tool_run_rounds (
    thread_id       text NOT NULL,
    tool_call_id    text NOT NULL,
    round           integer NOT NULL CHECK (round >= 0),
    asked           jsonb,
    claimed_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, tool_call_id, round)
);

-- One question of a server (one key of a round's `input_requests`), put to the requester only.
-- Answered once: `status` leaves `open` by one conditional update (answered, expired, or
-- stopped, the last two answering `cancel`). `answer` holds the action and, for an accepted
-- form, the content sent to the server; the audit log keeps the action and field names only.
CREATE TABLE mcp_questions (
    id              text PRIMARY KEY,
    thread_id       text NOT NULL,
    workspace_id    text NOT NULL,
    interrupt_id    text NOT NULL,
    tool_call_id    text NOT NULL,
    round           integer NOT NULL,
    key             text NOT NULL,
    tool_name       text NOT NULL,
    server          text NOT NULL,
    requester_id    text NOT NULL,
    requester_name  text NOT NULL,
    request         jsonb NOT NULL,
    status          text NOT NULL DEFAULT 'open'
                    CHECK (status IN ('open', 'answered', 'expired', 'stopped')),
    answer          jsonb,
    answered_by_id  text,
    ref             text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    answered_at     timestamptz,
    expires_at      timestamptz,
    UNIQUE (thread_id, interrupt_id, key)
);
CREATE INDEX mcp_questions_open ON mcp_questions (expires_at) WHERE status = 'open';
CREATE INDEX mcp_questions_thread ON mcp_questions (thread_id);

-- Questions are audited: a new audit kind, widened from whatever the constraint holds now (as in
-- 0011 and 0017), so that other migrations adding kinds of their own keep them in any order.
DO $$
DECLARE
    kinds text[];
BEGIN
    SELECT array_agg(DISTINCT m[1]) INTO kinds
    FROM pg_constraint c, regexp_matches(pg_get_constraintdef(c.oid), '''([a-z_]+)''', 'g') AS m
    WHERE c.conrelid = 'audit_log'::regclass AND c.conname = 'audit_log_kind_check';
    IF kinds IS NULL THEN
        kinds := ARRAY['decision', 'refused', 'expiry', 'config', 'escalation', 'pin'];
    END IF;
    IF NOT 'question' = ANY (kinds) THEN
        kinds := kinds || 'question'::text;
    END IF;
    ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_kind_check;
    EXECUTE format('ALTER TABLE audit_log ADD CONSTRAINT audit_log_kind_check CHECK (kind = ANY (%L::text[]))', kinds);
END;
$$;
