"""Reviews and approvals: the lifecycle, decisions, cards, batches, expiry, trust and escalation."""
