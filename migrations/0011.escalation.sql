-- Escalation (docs/decisions/0023): `/countersign escalate <tool> after <duration> to
-- <target>` posts a card still undecided after the duration to another audience, which may then
-- decide it.
-- depends: 0008.slack-installations-by-team

-- One escalation per tool and workspace; `after_s` counts from the moment a review opens.
CREATE TABLE escalations (
    platform        text NOT NULL,
    workspace_id    text NOT NULL,
    tool_name       text NOT NULL,
    after_s         integer NOT NULL CHECK (after_s > 0),
    target_kind     text NOT NULL CHECK (target_kind IN ('user', 'role', 'group', 'channel')),
    target_id       text NOT NULL,
    updated_by      text NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, workspace_id, tool_name)
);

-- An approval's escalation, fixed from the configuration when its review opens (like quorum and
-- expires_at): when it is due, to whom, and where it stands (`bot.approvals.lifecycle`):
-- `waiting` until due, `claimed` while one sweeper posts its copies (until `escalation_lease`;
-- a sweeper that died is replaced after it), `escalated` once posted. `escalated_at` is the
-- moment it was first claimed. NULL `escalation`: none configured.
ALTER TABLE approvals
    ADD COLUMN escalate_at      timestamptz,
    ADD COLUMN escalate_kind    text CHECK (escalate_kind IS NULL OR escalate_kind IN ('user', 'role', 'group', 'channel')),
    ADD COLUMN escalate_to      text,
    ADD COLUMN escalation       text CHECK (escalation IS NULL OR escalation IN ('waiting', 'claimed', 'escalated')),
    ADD COLUMN escalation_lease timestamptz,
    ADD COLUMN escalated_at     timestamptz,
    ADD CONSTRAINT approvals_escalation_complete
        CHECK ((escalation IS NULL) = (escalate_at IS NULL AND escalate_kind IS NULL AND escalate_to IS NULL));
CREATE INDEX approvals_escalating ON approvals (escalate_at)
    WHERE status = 'pending' AND escalation IN ('waiting', 'claimed');

-- The escalation itself is audited (when, to whom): a new audit kind. The allowed kinds are
-- widened from whatever the constraint holds now, so that other migrations adding kinds of
-- their own keep them whichever order they are applied in.
DO $$
DECLARE
    kinds text[];
BEGIN
    SELECT array_agg(DISTINCT m[1]) INTO kinds
    FROM pg_constraint c, regexp_matches(pg_get_constraintdef(c.oid), '''([a-z_]+)''', 'g') AS m
    WHERE c.conrelid = 'audit_log'::regclass AND c.conname = 'audit_log_kind_check';
    IF kinds IS NULL THEN
        kinds := ARRAY['decision', 'refused', 'expiry', 'config'];
    END IF;
    IF NOT 'escalation' = ANY (kinds) THEN
        kinds := kinds || 'escalation'::text;
    END IF;
    ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_kind_check;
    EXECUTE format('ALTER TABLE audit_log ADD CONSTRAINT audit_log_kind_check CHECK (kind = ANY (%L::text[]))', kinds);
END;
$$;
