-- Slack distribution (docs/decisions/0019): one bot installation per workspace,
-- and the OAuth `state` values handed out by `/slack/install`, consumed once by the redirect.
-- depends: 0005.storage-retention

-- slack_sdk's `Bot` (slack_sdk.oauth.installation_store.models.bot), one row per workspace.
-- An org-wide install (Enterprise Grid) has no team id: its key is '' there.
-- `bot_token` is a secret: never selected into a log line.
CREATE TABLE slack_installations (
    enterprise_key text NOT NULL,
    team_key text NOT NULL,
    enterprise_id text,
    enterprise_name text,
    team_id text,
    team_name text,
    app_id text,
    bot_id text NOT NULL,
    bot_user_id text NOT NULL,
    bot_token text NOT NULL,
    bot_scopes text NOT NULL DEFAULT '',
    bot_refresh_token text,
    bot_token_expires_at timestamptz,
    is_enterprise_install boolean NOT NULL DEFAULT false,
    installer_user_id text,
    installed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (enterprise_key, team_key)
);

-- Bolt's OAuth state: issued by `/slack/install`, consumed (deleted) by `/slack/oauth_redirect`.
CREATE TABLE slack_oauth_states (
    state text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX slack_oauth_states_expiry ON slack_oauth_states (expires_at);
