"""Errors raised by the embedded dev stack."""

from __future__ import annotations


class StackError(RuntimeError):
    """A dev-stack service could not be started or stopped."""


class PortInUseError(StackError):
    """A port a service must listen on is already taken."""

    def __init__(self, service: str, port: int, host: str = "127.0.0.1") -> None:
        super().__init__(
            f"{service}: port {port} on {host} is already in use "
            "(another stack running? pick another port or 0 for a free one)"
        )
        self.service = service
        self.port = port
