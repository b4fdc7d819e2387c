"""LangGraph agents: the ReAct graph with its review gate, and the model that drives it."""
