"""Activities: model calls, tool execution, context assembly and artifact commits."""

# This folder is one layer of `durable_agents`, reached through the symlink
# durable_agents/activities. Imported under its folder's name as well (the repository root on
# sys.path), every module would load twice, and an exception raised under one name would not
# be caught under the other: that spelling fails here, at once.
if __name__ != "durable_agents.activities":
    raise ImportError(
        f"{__name__!r} is not an import name of durable-agents: import "
        "durable_agents.activities (and its modules as durable_agents.activities.<module>)",
        name=__name__,
    )
