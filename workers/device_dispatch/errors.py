"""Why a device's request on its calls is refused: fixed words, no content. The gateway
answers each with its own status (workers/gateway/errors.py)."""

from __future__ import annotations


class DeviceCallError(Exception):
    """A device's request the dispatch refuses on purpose."""


class NoSuchCall(DeviceCallError):
    def __init__(self) -> None:
        # Another device's call and a missing one look the same.
        super().__init__("no such call for this device")


class NotLeased(DeviceCallError):
    def __init__(self) -> None:
        super().__init__("this device holds no current lease on that call; poll for it again")


class NotRegistered(DeviceCallError):
    def __init__(self) -> None:
        super().__init__("register the device first (POST /v1/device)")


class AlreadyCommitted(DeviceCallError):
    def __init__(self) -> None:
        super().__init__("this call's result is committed already")


class ResultRefused(DeviceCallError):
    """The uploaded result did not match what the device claimed: nothing was committed
    and the call is offered again."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{why}; the call is offered again")


class InvalidDeviceRequest(DeviceCallError):
    """A registration or completion that cannot be taken as sent."""


class PollEnded(DeviceCallError):
    """The poll was told to stop waiting (its key was revoked or expired meanwhile)."""

    def __init__(self) -> None:
        super().__init__("the poll ended before a call came")
