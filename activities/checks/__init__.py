"""A task's own check: how its success is verified before its final answer is accepted."""
