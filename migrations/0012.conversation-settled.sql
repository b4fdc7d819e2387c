-- Whether a conversation's graph state was last known to be at rest (docs/decisions/0014): true
-- once a run finished and its outcome went out, or once `settle` found nothing to repair; false
-- from the start of every run. A message in a conversation that is settled, has no unfinished
-- run and no open review does not read its checkpoint before its turn. Existing rows start
-- unsettled: their next message settles them the long way once.
-- depends: 0008.slack-installations-by-team

ALTER TABLE conversations ADD COLUMN settled boolean NOT NULL DEFAULT false;
