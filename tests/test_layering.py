"""The layout's arrow rules, all of them: every module of ours belongs to one room, and a room
imports only from the rooms this table lets it. A new wrong-way import fails here, naming the
module, the import and the rule, whatever folder it is added to.

Rooms, bottom up:
- vocabulary: the leaf terms (artifact refs, item kinds, statuses, previews, token counts).
- storage: AgentState and the artifact store. Knows nothing of Temporal or workflows.
- contracts: what the loop, its activities and its clients agree on: the payloads
  (workflows/contracts.py, client_contracts.py, state_contracts.py, gate_contracts.py,
  task_settings.py, check_contracts.py), the
  task queues, timeouts and retry policies (workflows/policies.py), and reading a run's
  start input back (workflows/run_input.py).
- domain: Temporal-free libraries (activities/providers, tools, context, policies, checks) and the
  agent definitions users write (activities/agents.py).
- trajectory: OpenTelemetry by reference (activities/trajectory).
- edges: the `@activity.defn` classes and what translates to Temporal (activities/*.py).
  Only the worker processes, which register them, import them.
- loop: the deterministic workflows (workflows/*.py): contracts and the activities they name,
  never storage.
- shared: what every process opens or reads (workers/settings, dev_env, resources,
  temporal_client, task_options, agent_loading).
- stack, peers, client, device, device_dispatch, process, gateway, demo, cli: the roles
  under workers/ (device_dispatch: the cloud side of device calls, behind the gateway's
  device routes).
- api: the public Python API (workers/api.py), served as `durable_agents`'s names.

A layer is imported as `durable_agents.<layer>` only: its folder's own name (`import storage`,
`from workers.x import y`) would load each module a second time, beside the first, in our
code, the tests and bench/ alike (each layer's __init__ also refuses it when run).

Repositories (storage's classes built on a database session) are built in storage/ only:
everywhere else AgentState is opened with `agent_state(sessions, tenant[, write=True |
autocommit=True])`, so the tenant and the unit of work are bound once. That holds for our
modules, bench/ and tests/support/; a test file itself may build a repository, since a test
reads and writes rows at the level it checks (a repository's own test, a row planted below
the facade).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.imports import PACKAGES, PUBLIC, ROOT, imports, modules, target_of
from tests.support.repository_builds import builds, builds_in, session_bound_classes

# What the roles under workers/ build on. The edges (the activities) are registered by the
# worker processes; nothing else calls into them.
BELOW_WORKERS = {"vocabulary", "storage", "contracts", "domain", "trajectory", "loop"}
WORKER_BASE = BELOW_WORKERS | {"shared"}

# room -> the rooms it may import from (besides itself).
ALLOWED: dict[str, set[str]] = {
    "vocabulary": set(),
    "storage": {"vocabulary"},
    "contracts": {"vocabulary"},
    "domain": {"vocabulary", "storage", "contracts"},
    "trajectory": {"vocabulary", "storage", "contracts", "domain"},
    "edges": {"vocabulary", "storage", "contracts", "domain", "trajectory"},
    "loop": {"vocabulary", "contracts", "domain", "edges", "trajectory"},
    "shared": BELOW_WORKERS,
    "stack": WORKER_BASE,
    "peers": WORKER_BASE,
    "client": WORKER_BASE,
    "device": WORKER_BASE | {"client"},
    "device_dispatch": WORKER_BASE,
    "process": WORKER_BASE | {"edges", "device", "client"},
    "gateway": WORKER_BASE | {"client", "process", "device_dispatch"},
    "demo": WORKER_BASE | {"client", "process", "stack", "gateway", "device"},
    "cli": WORKER_BASE | {"client", "process", "stack", "gateway", "device", "demo", "peers"},
    "api": WORKER_BASE | {"client", "process", "peers"},
    "public": {"api", "peers", "contracts"},
}

# Rooms that must not import Temporal at all (the edges translate for them).
TEMPORAL_FREE = {"vocabulary", "storage", "domain"}

CONTRACTS = {
    "contracts",
    "client_contracts",
    "state_contracts",
    "gate_contracts",
    "strict_inputs",
    "policies",
    "run_input",
    "task_settings",
    "check_contracts",
}
DOMAIN = {"providers", "tools", "context", "policies", "agents", "checks"}
SHARED = {
    "settings",
    "dev_env",
    "resources",
    "temporal_client",
    "task_options",
    "agent_loading",
}
ROLES = {
    "stack",
    "peers",
    "client",
    "device",
    "device_dispatch",
    "process",
    "gateway",
    "demo",
    "cli",
}

# Session-bound classes built outside storage/ on purpose: they bind no tenant.
NOT_TENANT_BOUND = {
    "ApiKeyRepository": "a key is how a request's tenant is found: there is none to bind yet",
    "OutboxRepository": "one trajectory outbox for every tenant: each event names its own, "
    "and the forwarder drains them all",
}


def room_of(name: str) -> str:
    parts = name.split(".")
    assert parts[0] == PUBLIC, name
    if len(parts) == 1:
        return "public"
    layer, rest = parts[1], parts[2:]
    if layer == "vocabulary":
        return "vocabulary"
    if layer == "storage":
        return "storage"
    if layer == "workflows":
        return "contracts" if rest and rest[0] in CONTRACTS else "loop"
    if layer == "activities":
        if rest and rest[0] in DOMAIN:
            return "domain"
        return "trajectory" if rest and rest[0] == "trajectory" else "edges"
    if layer == "workers":
        if rest and rest[0] in ROLES:
            return rest[0]
        if rest and rest[0] in SHARED:
            return "shared"
        if rest == ["api"]:
            return "api"
        if not rest:
            return "shared"  # the package's docstring
    raise AssertionError(f"{name} is in no room: add it to one in tests/test_layering.py")


def import_graph() -> dict[str, list[tuple[str, str]]]:
    return {name: list(imports(path)) for name, path in modules().items()}


def by_folder_name(name: str, imported: list[tuple[str, str]]) -> list[str]:
    """The imports that reach a layer by its folder's name (`storage`), each with the spelling
    that reaches it as installed (`durable_agents.storage`)."""
    found = []
    for module, what in imported:
        if module.partition(".")[0] in PACKAGES:
            spelled = f"from {module} import {what}" if what else f"import {module}"
            found.append(f"{name}: `{spelled}` by the folder's name, not durable_agents.{module}")
    return found


def wrong_way_imports(graph: dict[str, list[tuple[str, str]]]) -> list[str]:
    found = []
    for name, imported in sorted(graph.items()):
        room = room_of(name)
        found += by_folder_name(f"{name} ({room})", imported)
        for module, what in imported:
            target = target_of(module, what, graph)
            if target is None:
                continue
            other = room_of(target)
            if other != room and other not in ALLOWED[room]:
                found.append(f"{name} ({room}) imports {target} ({other})")
    return found


def test_every_module_is_in_a_room_and_imports_only_the_rooms_it_may() -> None:
    assert wrong_way_imports(import_graph()) == []


def test_a_wrong_way_import_added_anywhere_is_named() -> None:
    graph = import_graph()
    graph["durable_agents.storage.items"].append(("durable_agents.workflows.agent", "X"))
    graph["durable_agents.workers.client.tasks"].append(("durable_agents.workers.cli", "main"))
    graph["durable_agents.workers.client.tasks"].append(("durable_agents.activities", "tool_run"))
    graph["durable_agents.activities.tools.files"].append(("durable_agents.activities", "gc"))
    graph["durable_agents.workers.cli.main"].append(("storage", ""))
    graph["durable_agents.workers.api"].append(("workers.client.tasks", "Task"))
    assert wrong_way_imports(graph) == [
        "durable_agents.activities.tools.files (domain) imports durable_agents.activities.gc "
        "(edges)",
        "durable_agents.storage.items (storage) imports durable_agents.workflows.agent (loop)",
        "durable_agents.workers.api (api): `from workers.client.tasks import Task` by the "
        "folder's name, not durable_agents.workers.client.tasks",
        "durable_agents.workers.cli.main (cli): `import storage` by the folder's name, not "
        "durable_agents.storage",
        "durable_agents.workers.client.tasks (client) imports durable_agents.workers.cli.main "
        "(cli)",
        "durable_agents.workers.client.tasks (client) imports "
        "durable_agents.activities.tool_run (edges)",
    ]


def test_no_test_or_bench_script_imports_a_layer_by_its_folders_name() -> None:
    scripts = sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])
    assert len(scripts) > 200, len(scripts)
    found = [
        bad
        for path in scripts
        for bad in by_folder_name(path.relative_to(ROOT).as_posix(), list(imports(path)))
    ]
    assert found == []


def test_the_temporal_free_rooms_import_no_temporal() -> None:
    found = [
        f"{name} imports {module}"
        for name, path in sorted(modules().items())
        if room_of(name) in TEMPORAL_FREE
        for module, _ in imports(path)
        if module == "temporalio" or module.startswith("temporalio.")
    ]
    assert found == []


def test_activities_take_their_configuration_as_values_not_the_workers_settings() -> None:
    assert not any("workers" in room for room in ALLOWED["edges"] | ALLOWED["domain"])


def facade_scripts() -> dict[str, Path]:
    """Where repositories are built only behind the facade: our modules outside storage/,
    bench/ and tests/support/ (by module name, or path for scripts)."""
    found = {n: p for n, p in modules().items() if room_of(n) != "storage"}
    for path in [*(ROOT / "bench").rglob("*.py"), *(ROOT / "tests" / "support").rglob("*.py")]:
        found[path.relative_to(ROOT).as_posix()] = path
    return found


def hand_built(where: str, built: list[tuple[int, str]]) -> list[str]:
    return [
        f"{where}:{line}: {cls}(...) built outside storage/ (open agent_state(...) instead)"
        for line, cls in sorted(built)
        if cls not in NOT_TENANT_BOUND
    ]


def test_repositories_are_built_in_storage_only_and_reached_through_agent_state() -> None:
    classes = session_bound_classes()
    assert {"SessionRepository", "TenantControls", "DeviceCallRepository", "AgentState"} <= (
        classes
    )
    found = [
        bad
        for where, path in sorted(facade_scripts().items())
        for bad in hand_built(where, list(builds_in(path, classes)))
    ]
    assert found == []


def test_a_repository_built_outside_storage_is_named() -> None:
    classes = session_bound_classes()
    planted = ast.parse(
        "from durable_agents.storage.items import ItemRepository as Items\n"
        "from durable_agents.storage import devices\n"
        "async def go(db, st):\n"
        "    await Items(db, 't').page(st)\n"
        "    devices.DeviceRepository(db, 't')\n"
        "    ApiKeyRepository(db)\n"  # not tenant-bound: allowed
        "    TenantControls(db, 't')\n"
        "    st.items.page(1)\n"
    )
    where = "durable_agents.workers.gateway.routes_sessions"
    assert hand_built(where, list(builds(planted, classes))) == [
        f"{where}:4: ItemRepository(...) built outside storage/ (open agent_state(...) instead)",
        f"{where}:5: DeviceRepository(...) built outside storage/ (open agent_state(...) instead)",
        f"{where}:7: TenantControls(...) built outside storage/ (open agent_state(...) instead)",
    ]


def test_every_allowed_hand_built_repository_is_still_built_there() -> None:
    classes = session_bound_classes()
    built = {
        (where, cls)
        for where, path in facade_scripts().items()
        for _, cls in builds_in(path, classes)
    }
    assert NOT_TENANT_BOUND.keys() <= classes
    stale = [c for c in NOT_TENANT_BOUND if not any(cls == c for _, cls in built)]
    assert stale == [], "no longer built there: remove it from tests/test_layering.py"
