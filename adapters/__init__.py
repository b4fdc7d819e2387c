"""Platform adapters: each turns one platform's events into core calls and renders back."""
