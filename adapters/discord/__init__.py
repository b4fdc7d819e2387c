"""The Discord adapter (discord.py; embeds with persistent `DynamicItem` buttons)."""
