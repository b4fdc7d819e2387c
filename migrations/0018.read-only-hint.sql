-- The `read_only_auto` setting (docs/decisions/0045-server-wide-mcp-rules.md): stored for an MCP
-- server's `<server>__*` when an admin lets that server's read-only hint run a call without
-- review (`/countersign read-only-hint <server> auto`).
-- depends: 0017.mcp-pins

ALTER TABLE settings DROP CONSTRAINT settings_key_check;
ALTER TABLE settings ADD CONSTRAINT settings_key_check
    CHECK (key IN ('quorum', 'self_approval', 'expiry_s', 'cards', 'scope', 'agent', 'read_only_auto'));
