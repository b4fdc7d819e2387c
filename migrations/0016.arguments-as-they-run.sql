-- A call's arguments are stored as `json`, which keeps the text as written, so an object's keys
-- keep the order in which the call will run (docs/decisions/0034-arguments-approvers-can-see.md).
-- `jsonb` orders them by length, then bytes: a request's headers or JSON body came back in
-- another order than the one they are sent in, and cards, the Edit form, the resume of an edited
-- call (which then ran in that order), the audit log and trust grants all read it back so.
-- Rows written before keep jsonb's order: the order they were written in is gone.
-- depends: 0015.one-outcome

ALTER TABLE approvals
    ALTER COLUMN proposed_args TYPE json USING proposed_args::json,
    ALTER COLUMN current_args TYPE json USING current_args::json,
    ALTER COLUMN final_args TYPE json USING final_args::json;

-- A table rewrite fires no row trigger: the audit log stays append-only.
ALTER TABLE audit_log
    ALTER COLUMN proposed_args TYPE json USING proposed_args::json,
    ALTER COLUMN final_args TYPE json USING final_args::json;

ALTER TABLE trust_grants ALTER COLUMN matched TYPE json USING matched::json;
