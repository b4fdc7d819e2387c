"""PostgreSQL: the embedded server, migrations, pools, savers and our repositories."""
