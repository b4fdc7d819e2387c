-- One outcome per message (docs/decisions/0038-one-outcome-per-message.md): every accepted
-- message ends in one answer or one notice, and a decided call the bot gives up on says so.
-- depends: 0014.trust-offer-matching

-- The message whose turn the conversation's run belongs to (its inbox key; NULL for turns
-- from before this migration), so that giving the message up gives its run up too.
ALTER TABLE conversations ADD COLUMN turn_message text;

-- The run's failure is being told (or was): what is left of the run is never run again, only
-- its mark cleared (`TurnRunner.settle`). Set before the notice goes out, so that a database
-- that drops right after the notice cannot lead to a second notice or a late answer.
ALTER TABLE conversations ADD COLUMN run_given_up boolean NOT NULL DEFAULT false;

-- A decided call of a pause whose resume the bot gave up on after its attempts, before the
-- call started: it did not run (its card says so). A call that had started is
-- `outcome_unknown` instead (migration 0004).
ALTER TABLE approvals ADD COLUMN not_run boolean NOT NULL DEFAULT false;
