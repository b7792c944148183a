"""Deterministic workflow code: the agent loop and the payload contracts it exchanges."""

# This folder is one layer of `durable_agents`, reached through the symlink
# durable_agents/workflows. Imported under its folder's name as well (the repository root on
# sys.path), every module would load twice, and an exception raised under one name would not
# be caught under the other: that spelling fails here, at once.
if __name__ != "durable_agents.workflows":
    raise ImportError(
        f"{__name__!r} is not an import name of durable-agents: import "
        "durable_agents.workflows (and its modules as durable_agents.workflows.<module>)",
        name=__name__,
    )
