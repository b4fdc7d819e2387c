"""Trust for a while: grants made with an approval, checked live per call (docs/decisions/0022)."""
