"""The tool-run ledger: a call is claimed once, just before it runs, and only as approved."""
