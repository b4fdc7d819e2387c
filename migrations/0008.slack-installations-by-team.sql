-- The adapter's own Web API calls find a workspace's bot token by team id alone (an Enterprise
-- Grid workspace's row is keyed by its enterprise id too; docs/decisions/0019), on every call.
-- depends: 0007.session-starts

CREATE INDEX slack_installations_team ON slack_installations (team_key);
