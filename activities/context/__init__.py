"""Context assembly: what a model step sees, read from AgentState and cut to its budget, and
the tool call ids it carries. Temporal-free (tests/test_layering.py)."""
