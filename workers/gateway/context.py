"""What every gateway route works with: the process's resources, Temporal client,
settings, rate limiters and open long requests (one of each per app)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated

from fastapi import Depends, Request
from temporalio.client import Client

from durable_agents.storage.session_events import EventHub
from durable_agents.workers.client.service import TaskService
from durable_agents.workers.gateway.events import fanout
from durable_agents.workers.gateway.fanout import SessionFanout
from durable_agents.workers.gateway.key_holds import OpenHolds
from durable_agents.workers.gateway.live_status import LiveStatusCache
from durable_agents.workers.gateway.rate_limit import RateLimiter, SharedRateLimiter
from durable_agents.workers.resources import Resources
from durable_agents.workers.settings import Settings


@dataclass(frozen=True)
class Gateway:
    resources: Resources
    client: Client
    settings: Settings
    # Requests per key, shared by every gateway process (AgentState).
    limiter: SharedRateLimiter
    # Session events (LISTEN/NOTIFY), shared by every stream this process serves.
    hub: EventHub
    # Failed authentications per client address.
    auth_failures: RateLimiter
    # Event streams and device long-polls open per key (capped; ended on revocation).
    holds: OpenHolds
    # The inbox's workflow queries, asked again only when a session changes.
    live: LiveStatusCache = field(default_factory=LiveStatusCache)

    @cached_property
    def service(self) -> TaskService:
        """Every verb, as at every other door."""
        return TaskService(
            self.client, self.resources.sessions, self.resources.store, self.settings
        )

    @cached_property
    def streams(self) -> SessionFanout:
        """One reader per session streamed by this process, fanned out to its followers."""
        return fanout(self.hub, self.resources.sessions, store=self.resources.store)


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[Gateway, Depends(gateway_of)]
