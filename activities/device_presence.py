"""The device_route activity: is a device heartbeating, by the database clock, and does it
reach the cloud through the gateways (a live device key).

Presence is a hint, not a guarantee: a device seen a second ago can be gone now, so a
caller still relies on the device call's schedule-to-start timeout (DeviceOffline) to
find out for sure. What this answers cheaply is "is it worth waiting for this device?".
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from durable_agents.activities.errors import non_retryable, storage_errors_are_final
from durable_agents.storage.agent_state import agent_state
from durable_agents.storage.devices import validate_device_id
from durable_agents.workflows.contracts import DevicePresenceInput, DeviceRoute


class DevicePresenceActivities:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    @activity.defn(name="device_route")
    async def device_route(self, inp: DevicePresenceInput) -> DeviceRoute:
        """Whether the device is online, and whether its calls go through the gateways."""
        _checked(inp)
        within = timedelta(seconds=max(inp.within_seconds, 0.0))
        async with (
            storage_errors_are_final(),
            agent_state(self._sessions, inp.tenant_id) as st,
        ):
            return DeviceRoute(
                online=await st.devices.is_online(inp.device_id, within),
                via_gateway=await st.devices.served_by_gateways(inp.device_id),
            )


def _checked(inp: DevicePresenceInput) -> None:
    try:
        validate_device_id(inp.device_id)
    except ValueError as err:
        # A malformed id stays malformed on every retry.
        raise non_retryable("InvalidDeviceId", str(err)) from err
