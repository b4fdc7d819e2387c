"""Escalation: who else gets an undecided card, and the sweep that sends it on time."""
