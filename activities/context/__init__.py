"""Context assembly: what a model step sees, read from AgentState and cut to its budget; tool
call ids and the user's own messages. Temporal-free (tests/test_layering.py)."""
