"""docker-compose.yml and workers/Dockerfile, checked against the code they run (no Docker)."""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer
import yaml
from pydantic import SecretStr
from sqlalchemy.engine import make_url
from temporalio.envconfig import ClientConfig

from activities.providers.factory import build_provider
from workers.cli import app
from workers.settings import (
    AgentSettings,
    DatabaseSettings,
    ModelSettings,
    S3Settings,
    Settings,
    TelemetrySettings,
)

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
GROUPS = (DatabaseSettings, S3Settings, ModelSettings, AgentSettings, TelemetrySettings)
PREFIXES = tuple(g.model_config["env_prefix"] for g in GROUPS)
# Fields whose code default is fine for a laptop but must be chosen for a deployment; the
# other required ones are found from their defaults (dev credentials, loopback addresses).
MUST_CHOOSE = {
    S3Settings: ("bucket",),
    ModelSettings: ("provider",),
    AgentSettings: ("workspace", "task_queue"),
}
# The schema owner's URL: only the migrate job may hold it, never a worker.
MIGRATION_ONLY = "DATABASE_MIGRATION_URL"
DOCKERFILE = ROOT / "workers" / "Dockerfile"
_VAR = re.compile(r"\$\$|\$\{(\w+)(?::?-([^}]*))?\}")


def expand(value: object) -> str:
    """Compose interpolation as if no variable were set: ${VAR:-default} -> default."""
    return _VAR.sub(lambda m: "$" if m[0] == "$$" else (m[2] or ""), str(value))


def env_of(service: str) -> dict[str, str]:
    env = SERVICES[service].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: expand(value) for key, value in env.items()}


def env_name(group: type, field: str) -> str:
    return group.model_config["env_prefix"] + field.upper()


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
    return shlex.split(command) if isinstance(command, str) else list(command)


AGENT_SERVICES = [name for name, svc in SERVICES.items() if "build" in svc]  # run agentctl
WORKERS = [name for name in AGENT_SERVICES if argv(name)[1:2] == ["worker"]]


def test_every_dependency_is_a_service_and_healthy_waits_have_a_healthcheck() -> None:
    for name, svc in SERVICES.items():
        deps = svc.get("depends_on", {})
        for dep, spec in deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps):
            assert dep in SERVICES, f"{name} depends on unknown service {dep}"
            if spec.get("condition") == "service_healthy":
                assert "healthcheck" in SERVICES[dep], f"{name} waits for {dep} to be healthy"
    for worker in WORKERS:
        migrate = SERVICES[worker]["depends_on"]["migrate"]
        assert migrate["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("service", AGENT_SERVICES)
def test_agent_services_point_at_services_on_the_ports_they_listen_on(service: str) -> None:
    env = env_of(service)
    for key in ("TEMPORAL_ADDRESS", "DATABASE_URL", "S3_ENDPOINT_URL"):
        url = urlsplit(env[key] if "://" in env[key] else f"//{env[key]}")
        assert url.hostname in SERVICES, f"{key}: {url.hostname} is not a service"
        assert url.port in listens_on(url.hostname), f"{key}: {url.hostname}:{url.port}"
    db, db_env = make_url(env["DATABASE_URL"]), env_of(urlsplit(env["DATABASE_URL"]).hostname)
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


@pytest.mark.parametrize("worker", WORKERS)
def test_worker_env_sets_every_required_setting_and_no_unknown_ones(worker: str) -> None:
    env = env_of(worker)
    assert required_env() - {MIGRATION_ONLY} <= env.keys()
    known = {env_name(g, f) for g in GROUPS for f in g.model_fields}
    unknown = {k for k in env if k.startswith(PREFIXES)} - known
    assert not unknown, f"not settings of workers/settings.py: {unknown}"


@pytest.mark.parametrize("worker", WORKERS)
def test_worker_env_validates_into_settings(worker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_of(worker)
    for key in [k for k in os.environ if k.startswith((*PREFIXES, "TEMPORAL_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert make_url(settings.database.url.get_secret_value()).drivername == "postgresql+asyncpg"
    assert settings.s3.bucket == env["S3_BUCKET"]
    assert str(settings.agent.workspace) in {v.split(":")[1] for v in SERVICES[worker]["volumes"]}
    assert build_provider(settings.model).name == env["MODEL_PROVIDER"]
    temporal = ClientConfig.load_client_connect_config(disable_file=True)
    assert temporal["target_host"] == env["TEMPORAL_ADDRESS"]
    assert temporal["namespace"] == env["TEMPORAL_NAMESPACE"]


def test_s3_identity_holds_the_workers_keys() -> None:
    s3 = SERVICES["s3"]
    (mount,) = s3["configs"]
    assert f"-s3.config={mount['target']}" in argv("s3")
    identities = json.loads(expand(COMPOSE["configs"][mount["source"]]["content"]))
    writers = [i for i in identities["identities"] if "Write" in i["actions"]]
    keys = {(c["accessKey"], c["secretKey"]) for i in writers for c in i["credentials"]}
    for env in map(env_of, AGENT_SERVICES):
        assert (env["S3_ACCESS_KEY_ID"], env["S3_SECRET_ACCESS_KEY"]) in keys


def test_services_run_real_agentctl_subcommands_of_the_image() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    (cmd,) = re.findall(r"^CMD (\[.*\])$", DOCKERFILE.read_text(), re.M)
    for program, sub, *_ in [json.loads(cmd), *(argv(n) for n in AGENT_SERVICES)]:
        assert (program, sub in commands) == ("agentctl", True), sub


def test_image_is_built_from_a_dockerfile_that_installs_every_package() -> None:
    for build in (SERVICES[name]["build"] for name in AGENT_SERVICES):
        dockerfile = ROOT / build["context"] / build["dockerfile"]
        assert dockerfile.is_file() and dockerfile == DOCKERFILE, dockerfile
    copied = set(re.findall(r"^COPY (\S+) ", DOCKERFILE.read_text(), re.M))
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {p.rstrip("*") for p in find["packages"]["find"]["include"]}
    assert packages | {"pyproject.toml"} <= copied
    assert all((ROOT / src).exists() for src in copied)


def test_cloud_workers_are_replicated_and_hold_no_host_resources() -> None:
    assert "cloud-worker" in WORKERS
    for worker in WORKERS:
        svc = SERVICES[worker]
        assert svc["deploy"]["replicas"] >= 2
        assert "container_name" not in svc and "ports" not in svc
