"""Background loops over PostgreSQL: unfinished work, retention, and the due-sweeper base they share."""
