"""The composition root: the `countersign` command wires the core to its adapters."""
