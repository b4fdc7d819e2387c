"""Stop: the requester or an admin stops a running turn (docs/decisions/0021)."""
