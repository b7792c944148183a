"""Errors raised by the embedded dev stack."""

from __future__ import annotations

# pyproject.toml's extra with the stack's PostgreSQL, Temporal and SeaweedFS binaries.
DEVSTACK_EXTRA = "durable-agents[devstack]"


class StackError(RuntimeError):
    """A dev-stack service could not be started or stopped."""


class DevStackNotInstalled(StackError):
    """The devstack extra is missing: the runtime install holds no dev stack."""

    def __init__(self) -> None:
        super().__init__(f"the embedded dev stack is not installed: pip install '{DEVSTACK_EXTRA}'")


class PortInUseError(StackError):
    """A port a service must listen on is already taken."""

    def __init__(self, service: str, port: int, host: str = "127.0.0.1") -> None:
        super().__init__(
            f"{service}: port {port} on {host} is already in use "
            "(another stack running? pick another port or 0 for a free one)"
        )
        self.service = service
        self.port = port
