"""Processes: cloud worker, device worker, the embedded dev stack and the agentctl CLI."""

# This folder is one layer of `durable_agents`, reached through the symlink
# durable_agents/workers. Imported under its folder's name as well (the repository root on
# sys.path), every module would load twice, and an exception raised under one name would not
# be caught under the other: that spelling fails here, at once.
if __name__ != "durable_agents.workers":
    raise ImportError(
        f"{__name__!r} is not an import name of durable-agents: import "
        "durable_agents.workers (and its modules as durable_agents.workers.<module>)",
        name=__name__,
    )
