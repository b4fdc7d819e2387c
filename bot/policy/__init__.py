"""What needs review: admin rules, conditions and the workspace configuration they live in."""
