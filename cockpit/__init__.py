"""lane-cockpit: a terminal cockpit for an LLM inference lane and the agents that feed it."""

__version__ = "0.1.0"
