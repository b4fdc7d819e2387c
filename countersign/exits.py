"""The exit statuses of `countersign` that say why it stopped (docs/operations.md, "Start failures")."""

CONFIGURATION_EXIT = 2
"""A refusal: a bad setting, a token refused, a wrong database password or a missing database.
Starting again changes nothing, so a supervisor stops every worker when one exits with it."""

UNREACHABLE_EXIT = 75
"""An outage that outlasted `START_RETRY_S`: PostgreSQL, Slack or Discord could not be reached
(EX_TEMPFAIL of sysexits.h: "a temporary failure, try again later"). A supervisor restarts a
worker that exits with it, as a process manager may restart `countersign run`."""

START_FAILED_EXIT = 70
"""A start that failed for a reason that is neither a refusal nor an outage, most likely a bug
(EX_SOFTWARE of sysexits.h: "an internal software error"): one line names the error, and
`LOG_LEVEL=DEBUG` logs its traceback (`countersign.starting.StartFailedError`). A supervisor
restarts a worker that exits with it, with its backoff, as after a crash."""
