"""workers/deploy/k8s/, checked offline against the Kubernetes schemas and the code it runs.

No cluster runs here. What is checked, and how: every manifest is validated against the
Kubernetes 1.33 OpenAPI schemas in their strict form (unknown fields refused) by
kubernetes-validate, whose wheel ships the schemas (no download at run time); the
kustomization lists every manifest; no database or other stateful service is bundled and
every credential is a Secret reference; each Deployment has probes, requests and limits, a
non-root read-only security context, an HPA and a PodDisruptionBudget that select it; every
agentctl command parses with agentctl's own command tree, every variable is one our
settings or the Temporal SDK read; the gateway's probe path is a route of its app and the
worker's probe command, run here with sh, passes while a worker beats and fails after.
Whether a cluster admits them (admission policies, storage classes, quotas) is not checked.
"""

from __future__ import annotations

import asyncio
import copy
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from durable_agents.workers.process.health_file import heartbeat
from tests.support.deploy_env import (
    AGENT_IMAGE,
    MIGRATION_ONLY,
    ROOT,
    agentctl_error,
    gateway_health_path,
    secret_env,
    unknown_agent_env,
)

K8S = ROOT / "workers" / "deploy" / "k8s"
KUBERNETES = "1.33.0"
MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
STATEFUL = ("postgres", "temporal", "seaweed", "minio", "redis", "mysql", "cassandra")


def docs(path: Path) -> Iterator[dict[str, Any]]:
    yield from (d for d in yaml.safe_load_all(path.read_text()) if d)


ALL = [d for p in MANIFESTS for d in docs(p)]


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in ALL if d["kind"] == kind]


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"])
        for d in ALL
        if "template" in d.get("spec", {})
    ]


def containers() -> list[tuple[str, dict[str, Any]]]:
    return [(name, c) for name, spec in pod_specs() for c in spec["containers"]]


def env_names(container: dict[str, Any]) -> set[str]:
    names = {e["name"] for e in container.get("env", [])}
    for source in container.get("envFrom", []):
        (config,) = [
            d
            for d in of_kind("ConfigMap")
            if d["metadata"]["name"] == source["configMapRef"]["name"]
        ]
        names |= config["data"].keys()
    return names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifests_validate_against_the_kubernetes_schemas(path: Path) -> None:
    for doc in docs(path):
        assert kubernetes_validate.validate(doc, KUBERNETES, strict=True) == "1.33"


def test_the_validator_refuses_a_misspelt_field_and_a_wrong_type() -> None:
    (worker,) = [d for d in of_kind("Deployment") if "worker" in d["metadata"]["name"]]
    misspelt = copy.deepcopy(worker)
    misspelt["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    wrong = copy.deepcopy(worker)
    wrong["spec"]["replicas"] = "two"
    for bad in (misspelt, wrong):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(bad, KUBERNETES, strict=True)


def test_the_kustomization_applies_every_manifest_with_the_agent_image() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in MANIFESTS]
    assert [i["name"] for i in kustomization["images"]] == [AGENT_IMAGE]
    for name, container in containers():
        assert container["image"] == AGENT_IMAGE, name  # one image runs agentctl


def test_no_database_is_bundled_and_credentials_are_secret_references() -> None:
    assert not of_kind("Secret") and not of_kind("StatefulSet")
    for name, container in containers():
        assert not any(s in container["image"] for s in STATEFUL), name
        for env in container.get("env", []):
            if env["name"] in secret_env() | {"TEMPORAL_API_KEY"}:
                assert "value" not in env and "secretKeyRef" in env["valueFrom"], (name, env)
    for config in of_kind("ConfigMap"):
        assert not config["data"].keys() & secret_env(), "a credential in a ConfigMap"


def test_only_the_migration_job_holds_the_schema_owner() -> None:
    (job,) = of_kind("Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["agentctl", "migrate"]
    for name, container in containers():
        holds = MIGRATION_ONLY in {e["name"] for e in container.get("env", [])}
        assert holds == (name == job["metadata"]["name"]), name


def test_every_command_and_variable_is_one_agentctl_reads() -> None:
    required = {"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "DATABASE_URL", "S3_BUCKET"}
    required |= {"S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "MODEL_PROVIDER", "AGENT_TASK_QUEUE"}
    for name, container in containers():
        assert agentctl_error(container["command"]) is None, agentctl_error(container["command"])
        assert not unknown_agent_env(env_names(container)), (
            name,
            unknown_agent_env(env_names(container)),
        )
        assert required <= env_names(container), (name, required - env_names(container))


def test_deployments_are_probed_bounded_non_root_scaled_and_disruption_budgeted() -> None:
    hpas = {h["spec"]["scaleTargetRef"]["name"]: h for h in of_kind("HorizontalPodAutoscaler")}
    pdbs = of_kind("PodDisruptionBudget")
    assert {d["metadata"]["name"] for d in of_kind("Deployment")} == {
        "durable-agents-worker",
        "durable-agents-gateway",
    }
    for deployment in of_kind("Deployment"):
        name, spec = deployment["metadata"]["name"], deployment["spec"]
        pod = spec["template"]["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] > 0
        assert pod["automountServiceAccountToken"] is False
        for c in pod["containers"]:
            assert {"startupProbe", "livenessProbe", "readinessProbe"} <= c.keys(), name
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= c["resources"][bound].keys(), (name, bound)
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"]
            assert sc["capabilities"]["drop"] == ["ALL"]
        hpa = hpas[name]["spec"]
        assert hpa["scaleTargetRef"]["kind"] == "Deployment" and hpa["minReplicas"] >= 2
        (pdb,) = [p for p in pdbs if p["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        # A node drain can always evict one pod: the budget is below the HPA's floor.
        assert pdb["spec"]["minAvailable"] < hpa["minReplicas"], name


def test_pods_run_as_the_images_own_user_with_its_home_cache_writable() -> None:
    dockerfile = (ROOT / "workers" / "Dockerfile").read_text()
    ((uid, user),) = re.findall(r"useradd --create-home --uid (\d+) .* (\w+) \\$", dockerfile, re.M)
    for name, pod in pod_specs():
        assert pod["securityContext"]["runAsUser"] == int(uid), name
    for name, container in containers():
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/tmp", f"/home/{user}/.cache"} <= mounts, name  # the root fs is read-only


def test_gateway_probes_its_health_route_on_the_port_it_listens_on() -> None:
    (gateway,) = [c for n, c in containers() if c["command"][1] == "gateway"]
    port = int(gateway["command"][gateway["command"].index("--port") + 1])
    (named,) = gateway["ports"]
    assert named["containerPort"] == port
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        check = gateway[probe]["httpGet"]
        assert check["port"] == named["name"] and check["path"] == gateway_health_path()
    (service,) = of_kind("Service")
    assert service["spec"]["ports"][0]["targetPort"] == named["name"]


def _worker() -> dict[str, Any]:
    (worker,) = [c for n, c in containers() if c["command"][1] == "worker"]
    return worker


def test_workers_run_several_processes_and_mount_the_shared_workspace() -> None:
    worker = _worker()
    assert "--processes" in worker["command"]
    (config,) = of_kind("ConfigMap")
    (pod,) = [spec for name, spec in pod_specs() if spec["containers"][0] is worker]
    mounts = {m["mountPath"]: m["name"] for m in worker["volumeMounts"]}
    (volume,) = [
        v for v in pod["volumes"] if v["name"] == mounts[config["data"]["AGENT_WORKSPACE"]]
    ]
    (claim,) = of_kind("PersistentVolumeClaim")
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # pods on any node share it


async def test_worker_probe_passes_while_the_worker_beats_and_fails_once_it_stops(
    tmp_path: Path,
) -> None:
    worker = _worker()
    (health,) = [e["value"] for e in worker["env"] if e["name"] == "AGENT_HEALTH_FILE"]
    assert any(m["mountPath"] == str(Path(health).parent) for m in worker["volumeMounts"])
    local = tmp_path / Path(health).name
    commands = [
        [arg.replace(health, str(local)) for arg in worker[p]["exec"]["command"]]
        for p in ("startupProbe", "livenessProbe", "readinessProbe")
    ]

    def probes() -> set[int]:
        return {subprocess.run(c, check=False).returncode for c in commands}

    assert probes() == {1}  # no worker yet
    async with heartbeat(local, every=0.05):
        await asyncio.sleep(0.2)
        assert await asyncio.to_thread(probes) == {0}
    assert probes() == {1}  # stopped: the file is gone
    local.touch()
    stale = local.stat().st_mtime - 120
    os.utime(local, (stale, stale))
    assert probes() == {1}  # left behind by a worker whose loop stopped beating
