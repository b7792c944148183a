"""The gateway: the authenticated HTTP front door to tasks (`agentctl gateway`): REST
and Server-Sent Events."""

from workers.gateway.app import create_app
from workers.gateway.auth import require

__all__ = ["create_app", "require"]
