"""Loopback port helpers.

Ports are picked at random below the kernel's ephemeral range: the Temporal dev server
binds several internal services on kernel-assigned ports, and so does every outgoing
connection, so a port picked from that range could be taken again before we bind it.

A port picked here is also claimed machine-wide until this process exits: a record lock on
its byte of one shared file. Another process picking ports (another stack, another test
worker) skips a claimed port even while it is still unbound, between "picked" and "bound"
or while its service is stopped for a restart.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import threading
from pathlib import Path

from durable_agents.workers.stack.errors import PortInUseError

LOOPBACK = "127.0.0.1"
_LOWEST = 20000
_DEFAULT_EPHEMERAL_START = 32768

# Ports already handed out in this process, so two stacks built at the same time never
# get the same one between "picked" and "bound".
_handed_out: set[int] = set()
_lock = threading.Lock()

CLAIMS_FILE = Path("/tmp/durable-agents-ports.lock")
# Opened once and never closed: closing any descriptor of the file would drop every
# record lock this process holds on it. None when it cannot be opened (claims are then
# per process only).
_claims_fd: int | None = None
_claims_pid = 0


def _claims() -> int | None:
    global _claims_fd, _claims_pid
    if _claims_pid != os.getpid():
        # A forked child holds none of its parent's locks; it keeps the inherited descriptor.
        _claims_pid = os.getpid()
        if _claims_fd is None:
            _claims_fd = _open_claims()
    return _claims_fd


def _open_claims() -> int | None:
    try:
        # Without O_CREAT first: another user's file in sticky /tmp refuses O_CREAT opens.
        return os.open(CLAIMS_FILE, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(CLAIMS_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        os.fchmod(fd, 0o666)  # past the umask: every role's processes share the claims
    except OSError:
        return None
    return fd


def _claim(port: int) -> bool:
    """Claim port machine-wide; False when another live process holds it."""
    fd = _claims()
    if fd is None:
        return True
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
    except OSError:
        return False
    return True


def _ephemeral_start() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_START


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when nothing listens on host:port (SO_REUSEADDR ignores TIME_WAIT leftovers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def ensure_port_free(port: int, service: str, host: str = LOOPBACK) -> None:
    """Raise PortInUseError naming the service when host:port is taken."""
    if not port_is_free(port, host):
        raise PortInUseError(service, port, host)


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def free_port() -> int:
    """A loopback port that is free now and claimed by no other live process."""
    return reserve_ports(1)[0]


def reserve_ports(count: int) -> list[int]:
    """count distinct free loopback ports, never repeated within this process and never
    claimed by another live process."""
    high = max(_ephemeral_start() - 1, _LOWEST + 1000)
    picked: list[int] = []
    with _lock:
        for _ in range(count * 200):
            if len(picked) == count:
                break
            port = random.randint(_LOWEST, high)
            if port in _handed_out or not port_is_free(port) or not _claim(port):
                continue
            _handed_out.add(port)
            picked.append(port)
        while len(picked) < count:
            # The low range is crowded (or every claim is held): fall back to what the
            # kernel hands out, claimed where it can be. A claims file another process holds
            # whole must not stall the pick.
            port = _kernel_port()
            if port not in _handed_out:
                _claim(port)
                _handed_out.add(port)
                picked.append(port)
    return picked


def resolve_port(port: int) -> int:
    """port itself, or a free one when port is 0."""
    return port if port else free_port()
