"""docker-compose.yml and workers/Dockerfile, checked against the code they run.

No Docker engine runs here, so nothing is pulled, built or started. What is checked, and
how: the compose file, with ${VAR:-default} expanded as compose would with no variables
set, is parsed by the compose_spec crate's Compose Specification parser (compose-spec on
PyPI: unknown keys, bad conditions, durations and ports are refused); every agentctl
command in it (and the Dockerfile's CMD) is parsed by agentctl's own command tree
(typer/click: real subcommand, real flags, valid values) without running it; the
namespace job's `temporal` commands parse with the Temporal CLI installed here; the
schema job's temporal-sql-tool steps (a tool not installed here) are only read as text;
every variable set for our image is one workers/settings.py or the Temporal SDK's env config
reads (the SDK's loader is asked, not a list); every variable set for another image is one
that image documents (listed below with its source) or one the service's own script reads;
the images' versions are tests/test_compose_images.py's; the dependency order
(schema job -> server -> namespace job -> agents; migration -> agents) and the addresses,
ports, users and passwords that must agree across services do. Whether the images start
and run is not checked here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from compose_spec import PyCompose
from pydantic import SecretStr
from sqlalchemy.engine import make_url
from temporalio.envconfig import ClientConfig

from durable_agents.activities.providers.factory import build_provider
from durable_agents.workers.settings import AgentSettings, ModelSettings, S3Settings, Settings
from tests.support.deploy_env import (
    GROUPS,
    MIGRATION_ONLY,
    PREFIXES,
    ROOT,
    agentctl_error,
    env_name,
    gateway_health_path,
    unknown_agent_env,
)

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
# Fields whose code default is fine for a laptop but must be chosen for a deployment; the
# other required ones are found from their defaults (dev credentials, loopback addresses).
MUST_CHOOSE = {
    S3Settings: ("bucket",),
    ModelSettings: ("provider",),
    AgentSettings: ("workspace", "task_queue"),
}
DOCKERFILE = ROOT / "workers" / "Dockerfile"
_VAR = re.compile(r"\$\$|\$\{(\w+)(?::?-([^}]*))?\}")
# What each other image reads from its environment, from its own documentation or code.
IMAGE_ENV = {
    # docker-library/postgres's docker-entrypoint.sh
    "postgres": {
        "POSTGRES_USER",
        "POSTGRES_PASSWORD",
        "POSTGRES_DB",
        "POSTGRES_INITDB_ARGS",
        "POSTGRES_HOST_AUTH_METHOD",
    },
    # temporalio/temporal: docker/config_template_embedded.yaml, docker/scripts/sh/entrypoint.sh
    "temporalio/server": {
        "DB",
        "DB_PORT",
        "POSTGRES_SEEDS",
        "POSTGRES_USER",
        "POSTGRES_PWD",
        "BIND_ON_IP",
        "DYNAMIC_CONFIG_FILE_PATH",
    },
    # temporal-sql-tool's flags (tools/sql/main.go, EnvVar) and the temporal CLI's env config
    "temporalio/admin-tools": {
        "SQL_PLUGIN",
        "SQL_HOST",
        "SQL_PORT",
        "SQL_USER",
        "SQL_PASSWORD",
        "TEMPORAL_ADDRESS",
        "TEMPORAL_NAMESPACE",
    },
    "temporalio/ui": {"TEMPORAL_ADDRESS", "TEMPORAL_CORS_ORIGINS"},
    "jaegertracing/all-in-one": {"COLLECTOR_OTLP_ENABLED"},
}


def expand(value: object) -> str:
    """Compose interpolation as if no variable were set: ${VAR:-default} -> default."""
    return _VAR.sub(lambda m: "$" if m[0] == "$$" else (m[2] or ""), str(value))


def env_of(service: str) -> dict[str, str]:
    env = SERVICES[service].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: expand(value) for key, value in env.items()}


def required_env() -> set[str]:
    names = {"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"}
    for group in GROUPS:
        assert set(MUST_CHOOSE.get(group, ())) <= group.model_fields.keys(), group.__name__
        for field, info in group.model_fields.items():
            default = info.get_default(call_default_factory=True)
            dev_default = isinstance(default, SecretStr) or "127.0.0.1" in str(default)
            if dev_default or field in MUST_CHOOSE.get(group, ()):
                names.add(env_name(group, field))
    return names


def listens_on(service: str) -> set[int]:
    """Container-side ports: published (`host:container`, long syntax) or only exposed."""
    svc = SERVICES[service]
    published = [
        p["target"] if isinstance(p, dict) else p.rsplit(":", 1)[-1] for p in svc.get("ports", [])
    ]
    return {int(str(p).split("/")[0]) for p in [*published, *svc.get("expose", [])]}


def argv(service: str) -> list[str]:
    command = SERVICES[service]["command"]
    return shlex.split(command) if isinstance(command, str) else [expand(c) for c in command]


def image_repo(service: str) -> str:
    return str(SERVICES[service]["image"]).rsplit(":", 1)[0]


def depends(service: str) -> dict[str, str]:
    deps = SERVICES[service].get("depends_on", {})
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


AGENT_SERVICES = [name for name, svc in SERVICES.items() if "build" in svc]  # run agentctl
WORKERS = [name for name in AGENT_SERVICES if argv(name)[1:2] == ["worker"]]
SERVERS = [name for name in AGENT_SERVICES if argv(name)[1:2] in (["worker"], ["gateway"])]


def test_the_file_is_a_valid_compose_specification_and_the_parser_refuses_a_bad_one() -> None:
    text = expand((ROOT / "docker-compose.yml").read_text())
    # PyYAML resolves the << merge keys compose accepts and the parser does not.
    PyCompose.from_json(json.dumps(yaml.safe_load(text)))
    misspelt = json.loads(json.dumps(COMPOSE))
    misspelt["services"]["temporal"]["depend_on"] = misspelt["services"]["temporal"].pop(
        "depends_on"
    )
    bad_condition = json.loads(json.dumps(COMPOSE))
    bad_condition["services"]["temporal"]["depends_on"]["temporal-schema"]["condition"] = "done"
    for bad in (misspelt, bad_condition):
        with pytest.raises(ValueError):
            PyCompose.from_json(json.dumps(bad))


def test_every_dependency_is_a_service_and_healthy_waits_have_a_healthcheck() -> None:
    for name in SERVICES:
        for dep, condition in depends(name).items():
            assert dep in SERVICES, f"{name} depends on unknown service {dep}"
            if condition == "service_healthy":
                assert "healthcheck" in SERVICES[dep], f"{name} waits for {dep} to be healthy"


def test_temporal_server_starts_after_its_schema_job_set_up_both_databases() -> None:
    server = [n for n in SERVICES if image_repo(n) == "temporalio/server"]
    assert server == ["temporal"]
    (schema,) = [d for d, c in depends("temporal").items() if c == "service_completed_successfully"]
    assert image_repo(schema) == "temporalio/admin-tools"
    assert SERVICES[schema]["restart"] == "no"
    script = " ".join(argv(schema))
    for step in ("create-database", "setup-schema -v 0.0", "update-schema -d"):
        assert f"temporal-sql-tool --db $db {step}" in script, step
    assert "for db in temporal temporal_visibility" in script
    for kind in ("temporal", "visibility"):
        assert f"/etc/temporal/schema/postgresql/v12/{kind}/versioned" in script.replace(
            "$schema", "/etc/temporal/schema/postgresql/v12"
        )
    # The job, the server and the database agree on where it is and who logs in.
    job, srv, db = env_of(schema), env_of("temporal"), env_of(srv_db := "temporal-db")
    assert job["SQL_PLUGIN"] == srv["DB"] == "postgres12"
    assert job["SQL_HOST"] == srv["POSTGRES_SEEDS"] == srv_db
    assert int(job["SQL_PORT"]) == int(srv["DB_PORT"]) and int(job["SQL_PORT"]) in listens_on(
        srv_db
    )
    assert job["SQL_USER"] == srv["POSTGRES_USER"] == db["POSTGRES_USER"]
    assert job["SQL_PASSWORD"] == srv["POSTGRES_PWD"] == db["POSTGRES_PASSWORD"]
    assert depends(schema) == {srv_db: "service_healthy"}


def test_namespace_job_makes_the_namespace_the_agents_use_before_they_start() -> None:
    (job,) = [
        n for n in SERVICES if image_repo(n) == "temporalio/admin-tools" and n != "temporal-schema"
    ]
    assert depends(job) == {"temporal": "service_healthy"}
    env, script = env_of(job), " ".join(argv(job))
    assert "temporal operator namespace create" in script and "$TEMPORAL_NAMESPACE" in script
    assert env["TEMPORAL_ADDRESS"].split(":")[0] == "temporal"
    for service in AGENT_SERVICES:
        assert env_of(service)["TEMPORAL_NAMESPACE"] == env["TEMPORAL_NAMESPACE"], service
    for service in SERVERS:
        deps = depends(service)
        assert deps[job] == deps["migrate"] == "service_completed_successfully", service


def test_namespace_job_commands_parse_with_the_temporal_cli() -> None:
    """Each `temporal` line of the job's script, its variables filled in from its env, is
    parsed by the Temporal CLI this project installs (`--help`: flags and values are checked,
    nothing is run). The image's CLI may be another version of the same commands."""
    cli = Path(sys.executable).with_name("temporal")
    (job,) = [n for n, s in SERVICES.items() if "$TEMPORAL_NAMESPACE" in str(s.get("command"))]
    env, script = env_of(job), " ".join(argv(job))
    lines = re.findall(r"temporal (operator [^|;&>]+)", script)
    assert len(lines) == 3, lines
    for line in lines:
        filled = re.sub(r"\$(\w+)", lambda m: env[m[1]], line)
        done = subprocess.run(
            [str(cli), *shlex.split(filled), "--help"], capture_output=True, timeout=60, check=False
        )
        assert done.returncode == 0, (filled, done.stderr.decode()[-300:])


@pytest.mark.parametrize("service", AGENT_SERVICES)
def test_agent_services_point_at_services_on_the_ports_they_listen_on(service: str) -> None:
    env = env_of(service)
    for key in ("TEMPORAL_ADDRESS", "DATABASE_URL", "S3_ENDPOINT_URL"):
        url = urlsplit(env[key] if "://" in env[key] else f"//{env[key]}")
        assert url.hostname in SERVICES, f"{key}: {url.hostname} is not a service"
        assert url.port in listens_on(url.hostname), f"{key}: {url.hostname}:{url.port}"
    db = make_url(env["DATABASE_URL"])
    db_env = env_of(str(db.host))
    app = ("AGENTSTATE_APP_ROLE", "AGENTSTATE_APP_PASSWORD", "POSTGRES_DB")
    assert (db.username, db.password, db.database) == tuple(db_env[k] for k in app)
    if MIGRATION_ONLY in env:
        owner = make_url(env[MIGRATION_ONLY])
        assert (owner.host, owner.port) == (db.host, db.port)
        roles = ("AGENTSTATE_OWNER_ROLE", "AGENTSTATE_OWNER_PASSWORD", "POSTGRES_DB")
        assert (owner.username, owner.password, owner.database) == tuple(db_env[k] for k in roles)


def test_workers_log_in_as_the_app_role_and_only_the_migrate_job_as_the_owner() -> None:
    db = env_of("agentstate-db")
    assert len({db["POSTGRES_USER"], db["AGENTSTATE_OWNER_ROLE"], db["AGENTSTATE_APP_ROLE"]}) == 3
    (init,) = [c for c in SERVICES["agentstate-db"]["configs"] if c["source"] == "agentstate-roles"]
    assert init["target"].startswith("/docker-entrypoint-initdb.d/")
    script = ROOT / COMPOSE["configs"]["agentstate-roles"]["file"]
    assert script.resolve() == ROOT / "storage" / "roles.sql"
    assert make_url(env_of("migrate")[MIGRATION_ONLY]).username == db["AGENTSTATE_OWNER_ROLE"]
    for service in AGENT_SERVICES:
        env = env_of(service)
        assert make_url(env["DATABASE_URL"]).username == db["AGENTSTATE_APP_ROLE"], service
        if service != "migrate":
            assert MIGRATION_ONLY not in env, f"{service} holds the schema owner's credentials"


@pytest.mark.parametrize("service", SERVERS)
def test_agent_env_sets_every_required_setting(service: str) -> None:
    assert required_env() - {MIGRATION_ONLY} <= env_of(service).keys()


def test_every_variable_set_is_one_its_image_reads() -> None:
    roles_sql = (ROOT / "storage" / "roles.sql").read_text()
    read_by_roles_sql = set(re.findall(r"^\\getenv \w+ (\w+)$", roles_sql, re.M))
    for name in SERVICES:
        env = env_of(name).keys()
        if name in AGENT_SERVICES:
            assert not unknown_agent_env(env), f"{name}: {unknown_agent_env(env)}"
            continue
        script = " ".join(argv(name)) if "command" in SERVICES[name] else ""
        known = IMAGE_ENV.get(image_repo(name), set())
        if image_repo(name) == "postgres":
            known = known | read_by_roles_sql
        unread = {k for k in env if k not in known and f"${k}" not in script}
        assert not unread, f"{name} sets what {image_repo(name)} does not read: {unread}"


@pytest.mark.parametrize("service", SERVERS)
def test_agent_env_validates_into_settings(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_of(service)
    for key in [k for k in os.environ if k.startswith((*PREFIXES, "TEMPORAL_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert make_url(settings.database.url.get_secret_value()).drivername == "postgresql+asyncpg"
    assert settings.s3.bucket == env["S3_BUCKET"]
    assert build_provider(settings.model).name == env["MODEL_PROVIDER"]
    temporal = ClientConfig.load_client_connect_config(disable_file=True)
    assert temporal["target_host"] == env["TEMPORAL_ADDRESS"]
    assert temporal["namespace"] == env["TEMPORAL_NAMESPACE"]
    if service in WORKERS:
        mounts = {v.split(":")[1] for v in SERVICES[service]["volumes"]}
        assert str(settings.agent.workspace) in mounts


def test_s3_identity_holds_the_workers_keys() -> None:
    s3 = SERVICES["s3"]
    (mount,) = s3["configs"]
    assert f"-s3.config={mount['target']}" in argv("s3")
    identities = json.loads(expand(COMPOSE["configs"][mount["source"]]["content"]))
    writers = [i for i in identities["identities"] if "Write" in i["actions"]]
    keys = {(c["accessKey"], c["secretKey"]) for i in writers for c in i["credentials"]}
    for env in map(env_of, AGENT_SERVICES):
        assert (env["S3_ACCESS_KEY_ID"], env["S3_SECRET_ACCESS_KEY"]) in keys


def test_services_run_real_agentctl_commands_and_flags() -> None:
    (cmd,) = re.findall(r"^CMD (\[.*\])$", DOCKERFILE.read_text(), re.M)
    # No entrypoint in the image or in compose: the command is exactly what runs.
    assert not re.search(r"^ENTRYPOINT", DOCKERFILE.read_text(), re.M)
    assert not [n for n in AGENT_SERVICES if "entrypoint" in SERVICES[n]]
    for command in [json.loads(cmd), *(argv(n) for n in AGENT_SERVICES)]:
        assert agentctl_error(command) is None, agentctl_error(command)
    for worker in WORKERS:
        assert "--processes" in argv(worker), worker


@pytest.mark.parametrize(
    "command",
    [
        ["agentctl", "wroker"],
        ["agentctl", "worker", "--procs", "2"],
        ["agentctl", "worker", "--processes", "0"],
        ["agentctl", "deploy", "chek"],
        ["agentctl", "gateway", "--port", "http"],
    ],
)
def test_the_command_check_refuses_what_agentctl_would(command: list[str]) -> None:
    assert agentctl_error(command) is not None


def test_gateway_is_probed_on_its_health_route_and_published_on_loopback() -> None:
    (gateway,) = [n for n in AGENT_SERVICES if argv(n)[1:2] == ["gateway"]]
    args = argv(gateway)
    port = int(args[args.index("--port") + 1])
    probe = " ".join(SERVICES[gateway]["healthcheck"]["test"])
    (path,) = re.findall(rf"http://127\.0\.0\.1:{port}(/\w+)", probe)
    assert port in listens_on(gateway) and args[args.index("--host") + 1] == "0.0.0.0"
    assert gateway_health_path() == path


def test_worker_health_check_reads_the_file_the_worker_touches() -> None:
    for worker in WORKERS:
        probe = " ".join(SERVICES[worker]["healthcheck"]["test"])
        assert f"find {env_of(worker)['AGENT_HEALTH_FILE']} -mmin -1" in probe, worker


def test_host_ports_are_bound_to_loopback_only() -> None:
    for name, svc in SERVICES.items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_image_is_built_from_a_dockerfile_that_installs_every_package() -> None:
    for build in (SERVICES[name]["build"] for name in AGENT_SERVICES):
        dockerfile = ROOT / build["context"] / build["dockerfile"]
        assert dockerfile.is_file() and dockerfile == DOCKERFILE, dockerfile
    copied = set(re.findall(r"^COPY (\S+) ", DOCKERFILE.read_text(), re.M))
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert find["packages"]["find"]["include"] == ["durable_agents", "durable_agents.*"]
    # The one package, and each folder a link in it installs from.
    links = [p for p in (ROOT / "durable_agents").iterdir() if p.is_symlink()]
    folders = {p.resolve().relative_to(ROOT).as_posix() for p in links}
    assert {"durable_agents", "pyproject.toml", *folders} <= copied
    assert all((ROOT / src).exists() for src in copied)


def test_cloud_workers_are_replicated_and_hold_no_host_resources() -> None:
    assert "cloud-worker" in WORKERS
    for worker in WORKERS:
        svc = SERVICES[worker]
        assert svc["deploy"]["replicas"] >= 2
        assert "container_name" not in svc and "ports" not in svc
