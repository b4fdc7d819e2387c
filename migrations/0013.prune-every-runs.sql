-- Runs since the conversation's checkpoints were last pruned (docs/decisions/0012, "Every few
-- runs"): a run makes the conversation due for pruning only every PRUNE_EVERY_RUNS runs
-- (`bot.storage.conversation_store`), so one prune deletes several runs' checkpoints at once.
-- Existing rows start at 0; those already due stay due.
-- depends: 0012.conversation-settled

ALTER TABLE conversations ADD COLUMN runs_since_prune integer NOT NULL DEFAULT 0;
