"""Approvals: what needs review, who may decide, decisions and their validation."""
