"""The rules a task and its tools are held to: task options and text limits, approval
policies (linear-time regexes), budgets, quotas and prices. Temporal-free
(tests/test_layering.py)."""
