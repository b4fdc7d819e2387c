"""What the model sees of a long conversation, and `/countersign context [reset]`."""
