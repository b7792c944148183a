"""Loopback ports picked for the stack's services: distinct, free, and claimed machine-wide
(workers/stack/ports.py) so that another process picking at the same time never gets one
before its service binds it, and a claims file held whole never stalls a pick."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from durable_agents.workers.stack import free_port, reserve_ports
from durable_agents.workers.stack import ports as ports_module
from durable_agents.workers.stack.ports import port_is_free


def test_ports_are_distinct_and_free() -> None:
    ports = reserve_ports(12)
    assert len(set(ports)) == 12
    assert free_port() not in ports


def test_ports_claimed_by_a_live_process_are_skipped_by_another() -> None:
    """Another process (another stack, another test worker) picking at the same time must
    not get a port handed out here before its service binds it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_PORTS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    held = [int(p) for p in holder.stdout.readline().split()]
    assert len(held) == 200
    try:
        assert all(port_is_free(p) for p in held)  # claimed, not bound
        assert not [p for p in held if ports_module._claim(p)]
        # Every pick here lands on ports the holder did not claim.
        assert not set(reserve_ports(100)) & set(held)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # The holder's exit releases its claims.
    assert all(ports_module._claim(p) for p in held)


def test_ports_are_still_picked_when_another_process_holds_every_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims = tmp_path / "ports.lock"
    claims.touch()
    # A claims file of this test's own, opened afresh here (this process holds claims in
    # the machine's file, which would keep the holder from taking all of it).
    monkeypatch.setattr(ports_module, "CLAIMS_FILE", claims)
    monkeypatch.setattr(ports_module, "_claims_fd", None)
    monkeypatch.setattr(ports_module, "_claims_pid", 0)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_EVERY_CLAIM, str(claims)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "held"
        picked: list[int] = []
        # In a thread of its own: a pick that never ends fails the test, not hangs it.
        picking = threading.Thread(target=lambda: picked.extend(reserve_ports(3)), daemon=True)
        picking.start()
        picking.join(timeout=20)
        ports = picked
        assert len(set(ports)) == 3 and all(port_is_free(p) for p in ports)
        assert not [p for p in ports if ports_module._claim(p)]  # none could be claimed
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


HOLD_EVERY_CLAIM = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 65536, 0)
print("held", flush=True)
sys.stdin.read()
"""


HOLD_PORTS = """
import sys
from durable_agents.workers.stack.ports import reserve_ports
print(*reserve_ports(200), flush=True)
sys.stdin.read()
"""
