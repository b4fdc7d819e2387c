"""Admin configuration from the chat: the `/countersign` commands (DESIGN.md "Admin commands")."""
