-- Stop (docs/decisions/0021): the requester or an admin stops the running turn of a conversation.
-- depends: 0008.slack-installations-by-team

-- A pending approval of a stopped turn closes as `stopped`: a final status, decided (by the
-- person who stopped the turn, with `decided_at`) like the others.
ALTER TABLE approvals DROP CONSTRAINT approvals_status_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_status_check
    CHECK (status IN ('pending', 'approved', 'edited', 'rejected', 'expired', 'stopped'));

-- The conversation's current turn: the one the last human message started (a new message
-- gives a new id, in the statement that marks its run), who asked, and a stop requested for
-- it. A stop names the turn it was meant for, so it never applies to a later one; it is in
-- PostgreSQL so that the replica running the turn finds it, also after a restart.
ALTER TABLE conversations
    ADD COLUMN turn_id             text,
    ADD COLUMN turn_requester_id   text,
    ADD COLUMN turn_requester_name text,
    ADD COLUMN stop_requested_at   timestamptz,
    ADD COLUMN stopped_by_id       text,
    ADD COLUMN stopped_by_name     text;
-- A Stop button names its turn only (Discord's custom_id holds 100 characters).
CREATE UNIQUE INDEX conversations_turn ON conversations (turn_id) WHERE turn_id IS NOT NULL;
