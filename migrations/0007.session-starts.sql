-- When a platform session last started, per rate-limit bucket (docs/decisions/0018): Discord
-- allows one IDENTIFY per bucket (`shard_id % max_concurrency`) every 5 seconds, over every
-- process and machine of the bot. `bot.storage.start_spacing` reads and writes a row under the
-- bucket's advisory lock; the time survives the process that wrote it.
-- depends: 0006.slack-installations

CREATE TABLE session_starts (
    bucket text PRIMARY KEY,
    started_at timestamptz NOT NULL
);
