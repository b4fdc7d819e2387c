-- Trust for a while (docs/decisions/0022): an admin's trust setting lets a card offer
-- "Approve and trust"; the click makes a trust grant, under which later calls of the same tool in
-- the same conversation, by the same requester, with the same matched arguments, run without a
-- card until it expires or is revoked.
-- depends: 0008.slack-installations-by-team

-- The admin's setting, per workspace (channel_id = '') or channel: the most a grant may last,
-- and the arguments whose values a grant binds ('{}': every argument). max_s = 0 in a channel
-- switches a workspace-wide setting off there.
CREATE TABLE trust_settings (
    platform        text NOT NULL,
    workspace_id    text NOT NULL,
    channel_id      text NOT NULL DEFAULT '',
    tool_name       text NOT NULL,
    max_s           integer NOT NULL CHECK (max_s >= 0),
    matching        text[] NOT NULL DEFAULT '{}',
    updated_by      text NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, workspace_id, channel_id, tool_name)
);

-- One approver's "Approve and trust" on one card. Made in the transaction that approved the card
-- (so at most one per approval); ended by time (expires_at) or by a revoke (revoked_at).
CREATE TABLE trust_grants (
    id              text PRIMARY KEY,
    approval_id     text NOT NULL UNIQUE,
    platform        text NOT NULL,
    workspace_id    text NOT NULL,
    channel_id      text NOT NULL,
    thread_id       text NOT NULL,
    tool_name       text NOT NULL,
    source          text,
    requester_id    text NOT NULL,
    requester_name  text NOT NULL,
    matching        text[] NOT NULL DEFAULT '{}',
    matched         jsonb NOT NULL,
    matched_digest  text NOT NULL,
    granted_by_id   text NOT NULL,
    granted_by_name text NOT NULL,
    granted_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    revoked_by_id   text,
    revoked_by_name text,
    CHECK (expires_at > granted_at),
    CHECK ((revoked_at IS NULL) = (revoked_by_id IS NULL))
);
-- Looked up only for a call that would otherwise need a card.
CREATE INDEX trust_grants_lookup ON trust_grants (thread_id, tool_name, requester_id) WHERE revoked_at IS NULL;
-- `/countersign trust list`: the live grants of a workspace.
CREATE INDEX trust_grants_workspace ON trust_grants (platform, workspace_id, expires_at) WHERE revoked_at IS NULL;

-- The trust a card offers (seconds), fixed when the card opens like its quorum; NULL: none.
ALTER TABLE approvals ADD COLUMN trust_offer_s integer CHECK (trust_offer_s IS NULL OR trust_offer_s > 0);

-- The grant a tool run ran under, when it ran without a card.
ALTER TABLE tool_runs ADD COLUMN trust_grant_id text;
