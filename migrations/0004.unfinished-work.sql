-- Work a fault interrupted is finished by whichever replica is alive (docs/decisions/0009): messages
-- accepted but not handled, runs whose outcome was not delivered, decisions not yet resumed.
-- Each such item has `attempts` and `retry_at`: the upkeep takes it over once `retry_at` has
-- passed and its conversation's lock is free, with a growing delay between attempts.
-- depends: 0003.subagents

-- processed_events becomes the inbox. A message is `accepted` when its platform id is claimed
-- and `handled` once it was answered, refused, or its sender told of an error; a message still
-- accepted after its handler stopped is handled again (the upkeep); `abandoned` after too many
-- attempts. Rows from before this migration were handled.
ALTER TABLE processed_events RENAME TO inbox;
ALTER TABLE inbox RENAME CONSTRAINT processed_events_pkey TO inbox_pkey;
ALTER INDEX processed_events_age RENAME TO inbox_age;
ALTER TABLE inbox
    ADD COLUMN thread_id text,
    ADD COLUMN message   jsonb,
    ADD COLUMN status    text NOT NULL DEFAULT 'handled'
                         CHECK (status IN ('accepted', 'handled', 'abandoned')),
    ADD COLUMN attempts  integer NOT NULL DEFAULT 0,
    ADD COLUMN retry_at  timestamptz;
CREATE INDEX inbox_unhandled ON inbox (retry_at) WHERE status = 'accepted';
CREATE INDEX inbox_unhandled_thread ON inbox (thread_id, received_at) WHERE status = 'accepted';

-- A run of the conversation's graph whose outcome (answer, cards, or a told failure) is not
-- delivered yet: set when the run starts, cleared when its outcome is out. `run_from` is the
-- newest top-level checkpoint when it started: a run that wrote none made no progress.
ALTER TABLE conversations
    ADD COLUMN running_since timestamptz,
    ADD COLUMN run_from      text,
    ADD COLUMN attempts      integer NOT NULL DEFAULT 0,
    ADD COLUMN retry_at      timestamptz;
CREATE INDEX conversations_unfinished ON conversations (retry_at) WHERE running_since IS NOT NULL;

-- A review claimed for resuming is resumed by the decision's follow-up; if it is still
-- resuming at `retry_at`, the follow-up failed or its replica died.
ALTER TABLE reviews
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN retry_at timestamptz;
CREATE INDEX reviews_resuming ON reviews (retry_at) WHERE status = 'resuming';

-- The result of a tool call that ran to its end: a tool node re-run after a crash answers with
-- it instead of "outcome unknown" (the checkpoint holding it may not have been written).
ALTER TABLE tool_runs ADD COLUMN finished_at timestamptz, ADD COLUMN result jsonb;

-- An approved call that was running when the bot stopped: it is never run again, and nobody
-- knows whether it took effect; its card says so.
ALTER TABLE approvals ADD COLUMN outcome_unknown boolean NOT NULL DEFAULT false;
