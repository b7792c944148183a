"""Processes: cloud worker, device worker, the embedded dev stack and the agentctl CLI."""
