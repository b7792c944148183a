"""Memory, CPU and machine facts of local processes, read from /proc: what
bench/parked_approvals.py reports about the worker and the stack."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def proc_mem_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB, (0, 0) if it is gone."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def procs_mem_kib(pids: Sequence[int]) -> tuple[int, int]:
    """(VmRSS, VmHWM) summed over processes, in KiB."""
    readings = [proc_mem_kib(pid) for pid in pids]
    return sum(r for r, _ in readings), sum(h for _, h in readings)


def proc_pss_kib(pid: int) -> int:
    """Proportional set size of a process in KiB (shared pages split among sharers)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, str, float]]:
    """pid -> (ppid, comm, CPU seconds incl. reaped children) for every readable process."""
    table: dict[int, tuple[int, str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        # fields[0] is state (stat field 3): utime..cstime are stat fields 14-17.
        cpu = sum(int(x) for x in fields[11:15]) / CLK_TCK
        table[int(entry)] = (int(fields[1]), comm, cpu)
    return table


def postmaster_pid(state: Path) -> int | None:
    """pg_ctl daemonizes PostgreSQL, so it is no child of ours: find it by its pid file."""
    for pid_file in state.glob("postgres/**/postmaster.pid"):
        try:
            return int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
    return None


def process_groups(
    table: dict[int, tuple[int, str, float]], worker_pids: Sequence[int], state: Path
) -> dict[str, list[int]]:
    """The bench's processes by role: the workers, client (this process), and the stack's
    services (temporal, weed, postgres) by command name."""
    children = _children(table)

    def tree(root: int) -> list[int]:
        return _tree(table, children, root)

    workers = [pid for root in worker_pids for pid in tree(root)]
    groups: dict[str, list[int]] = {"worker": workers, "client": [os.getpid()]}
    services = [p for p in children.get(os.getpid(), []) if p not in worker_pids]
    postmaster = postmaster_pid(state)
    if postmaster is not None:
        services.append(postmaster)
    for root in services:
        for pid in tree(root):
            name = table[pid][1]
            name = "postgres" if name.startswith("postgres") else name
            groups.setdefault(name, []).append(pid)
    return groups


def process_tree(roots: Sequence[int]) -> list[int]:
    """`roots` and every process descended from them."""
    table = _proc_table()
    children = _children(table)
    return [pid for root in roots for pid in _tree(table, children, root)]


def _children(table: dict[int, tuple[int, str, float]]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    return children


def _tree(
    table: dict[int, tuple[int, str, float]], children: dict[int, list[int]], root: int
) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out


def system_busy_seconds() -> float:
    """CPU seconds spent busy (not idle/iowait) by the whole machine since boot."""
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = cpu[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


@dataclass
class CpuSnapshot:
    at: float
    busy: float
    by_group: dict[str, float]

    @classmethod
    def take(cls, worker_pids: Sequence[int], state: Path) -> CpuSnapshot:
        table = _proc_table()
        groups = process_groups(table, worker_pids, state)
        by_group = {name: sum(table[p][2] for p in pids) for name, pids in groups.items()}
        return cls(time.perf_counter(), system_busy_seconds(), by_group)


def cpu_used(a: CpuSnapshot, b: CpuSnapshot) -> dict[str, float]:
    """CPU seconds per process group from a to b, and the rest of the machine ("other")."""
    used = {k: b.by_group.get(k, 0.0) - a.by_group.get(k, 0.0) for k in b.by_group}
    used["other"] = max(0.0, (b.busy - a.busy) - sum(used.values()))
    return used


def per_session_ms(used: dict[str, float], n: int) -> str:
    """`used` (cpu_used) in milliseconds per session: the total, then by group."""
    total = sum(v for k, v in used.items() if k != "other")
    parts = [
        f"{k} {v * 1000 / n:.1f}"
        for k, v in sorted(used.items(), key=lambda kv: -kv[1])
        if k != "other" and v * 1000 / n >= 0.05
    ]
    return f"{total * 1000 / n:.1f} ms: " + ", ".join(parts)


def cpu_between(a: CpuSnapshot, b: CpuSnapshot) -> str:
    """CPU seconds per process group from a to b, and the rest of the machine ("other")."""
    wall = b.at - a.at
    used = cpu_used(a, b)
    parts = [f"{k} {v:.1f}s" for k, v in sorted(used.items(), key=lambda kv: -kv[1])]
    busy = (b.busy - a.busy) / (wall * (os.cpu_count() or 1)) if wall > 0 else 0.0
    return f"{wall:.0f}s wall, machine {busy:.0%} busy: " + ", ".join(parts)


def pss_by_group(worker_pids: Sequence[int], state: Path) -> dict[str, int]:
    """Summed PSS (KiB) per process group. PSS, not RSS: summing RSS would count the pages
    PostgreSQL's backends share (shared buffers) once per backend."""
    groups = process_groups(_proc_table(), worker_pids, state)
    return {name: sum(proc_pss_kib(p) for p in pids) for name, pids in groups.items()}


def machine_facts() -> list[tuple[str, str]]:
    load = os.getloadavg()
    mem_total = "?"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_total = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0))
    return [
        ("nproc (usable CPUs)", f"{cpus} (os.cpu_count {os.cpu_count()})"),
        ("load average at start", " ".join(f"{x:.2f}" for x in load)),
        ("memory", mem_total),
        ("python", platform.python_version()),
        ("kernel", platform.release()),
    ]


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"
