-- Admin configuration (docs/decisions/0006): per-workspace policy with per-channel overrides, approvers,
-- bot admins, quorum, self-approval, expiry, card routing, conversation scope.
-- depends: 0001.initial

-- A tool's mode in a workspace (channel_id = '') or one channel; overrides the built-in default.
CREATE TABLE tool_policies (
    platform        text NOT NULL,
    workspace_id    text NOT NULL,
    channel_id      text NOT NULL DEFAULT '',
    tool_name       text NOT NULL,
    mode            text NOT NULL CHECK (mode IN ('auto', 'review', 'deny')),
    condition       text CHECK (condition IS NULL OR mode = 'review'),
    updated_by      text NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, workspace_id, channel_id, tool_name)
);

-- Who may approve: users, Discord roles, Slack user groups; for every tool (tool_name = '')
-- or one tool.
CREATE TABLE approvers (
    platform        text NOT NULL,
    workspace_id    text NOT NULL,
    tool_name       text NOT NULL DEFAULT '',
    kind            text NOT NULL CHECK (kind IN ('user', 'role', 'group')),
    subject_id      text NOT NULL,
    added_by        text NOT NULL,
    added_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, workspace_id, tool_name, kind, subject_id)
);

-- Bot admins besides the platform's own workspace admins.
CREATE TABLE bot_admins (
    platform        text NOT NULL,
    workspace_id    text NOT NULL,
    user_id         text NOT NULL,
    added_by        text NOT NULL,
    added_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, workspace_id, user_id)
);

-- Scalar settings: quorum, self_approval, expiry_s (per workspace or tool), cards (routing),
-- scope (per workspace or channel). '' means "not narrowed".
CREATE TABLE settings (
    platform        text NOT NULL,
    workspace_id    text NOT NULL,
    channel_id      text NOT NULL DEFAULT '',
    tool_name       text NOT NULL DEFAULT '',
    key             text NOT NULL CHECK (key IN ('quorum', 'self_approval', 'expiry_s', 'cards', 'scope')),
    value           jsonb NOT NULL,
    updated_by      text NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, workspace_id, channel_id, tool_name, key)
);

-- Quorum: each distinct approver's vote for one version of the arguments (by digest).
CREATE TABLE approval_votes (
    approval_id     text NOT NULL REFERENCES approvals (id),
    voter_id        text NOT NULL,
    voter_name      text NOT NULL,
    args_digest     text NOT NULL,
    voted_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (approval_id, voter_id, args_digest)
);

ALTER TABLE approvals
    ADD COLUMN quorum integer NOT NULL DEFAULT 1 CHECK (quorum >= 1),
    ADD COLUMN current_args jsonb,
    ADD COLUMN current_digest text,
    ADD COLUMN approved_digest text,
    ADD COLUMN expires_at timestamptz;
CREATE INDEX approvals_expiring ON approvals (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;

-- A card can be posted more than once (approvers' DMs); every copy is updated.
CREATE TABLE approval_cards (
    approval_id     text NOT NULL REFERENCES approvals (id),
    card_ref        text NOT NULL,
    conversation    text NOT NULL,
    PRIMARY KEY (approval_id, card_ref)
);
