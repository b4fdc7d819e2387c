"""Countersign's core: agents, approvals, storage and the use cases; no platform SDK here."""
