"""Turns: running the graph for one conversation, settling it, pausing and delivering what comes out."""
