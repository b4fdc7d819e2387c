-- Pinned MCP tool definitions (docs/decisions/0043-pinned-mcp-definitions.md): the first time
-- the bot sees a server's tools it pins each tool's definition (name, description, input
-- schema, hints) by digest; a later change or a new tool is held, its calls refused on every
-- worker and replica, until an admin accepts it (`bot.tools.mcp.pins`).
-- depends: 0016.arguments-as-they-run

-- Servers whose first sight was recorded (even with no tools: a tool listed later is new). Its
-- row is also the lock that orders every change to the server's pins and holds.
CREATE TABLE mcp_pin_servers (
    server          text PRIMARY KEY,
    first_seen_at   timestamptz NOT NULL DEFAULT now()
);

-- The pinned definition of each tool: `definition` holds the pinned fields by their wire names
-- (`ToolDefinition.pinned`) as `json`, which keeps them as written, and `digest` is the SHA-256
-- of their canonical JSON. A pin stays when its tool is gone (a tool that reappears unchanged
-- is offered again). `pinned_by`: the admin who accepted it; NULL for a first sight.
CREATE TABLE mcp_pins (
    server          text NOT NULL REFERENCES mcp_pin_servers (server),
    tool            text NOT NULL,
    digest          text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    definition      json NOT NULL,
    pinned_at       timestamptz NOT NULL DEFAULT now(),
    pinned_by       text,
    PRIMARY KEY (server, tool)
);

-- A tool whose listed definition differs from its pin (or that has none): its calls are refused
-- until an admin accepts the definition held here, or the server lists the pinned one again.
CREATE TABLE mcp_pin_holds (
    server          text NOT NULL REFERENCES mcp_pin_servers (server),
    tool            text NOT NULL,
    digest          text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    definition      json NOT NULL,
    held_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server, tool)
);

-- The admins' message about a held definition, claimed once before it is sent (the key makes
-- it one message per change across workers and replicas). Kept after the hold ends, so that a
-- server flapping between two definitions is told about each only once.
CREATE TABLE mcp_pin_notices (
    server          text NOT NULL REFERENCES mcp_pin_servers (server),
    tool            text NOT NULL,
    digest          text NOT NULL,
    claimed_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server, tool, digest)
);

-- Pins are audited: a new audit kind, widened from whatever the constraint holds now (as in
-- 0011), so that other migrations adding kinds of their own keep them in any order.
DO $$
DECLARE
    kinds text[];
BEGIN
    SELECT array_agg(DISTINCT m[1]) INTO kinds
    FROM pg_constraint c, regexp_matches(pg_get_constraintdef(c.oid), '''([a-z_]+)''', 'g') AS m
    WHERE c.conrelid = 'audit_log'::regclass AND c.conname = 'audit_log_kind_check';
    IF kinds IS NULL THEN
        kinds := ARRAY['decision', 'refused', 'expiry', 'config', 'escalation'];
    END IF;
    IF NOT 'pin' = ANY (kinds) THEN
        kinds := kinds || 'pin'::text;
    END IF;
    ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_kind_check;
    EXECUTE format('ALTER TABLE audit_log ADD CONSTRAINT audit_log_kind_check CHECK (kind = ANY (%L::text[]))', kinds);
END;
$$;
