"""Deterministic workflow code: the agent loop and the payload contracts it exchanges."""
