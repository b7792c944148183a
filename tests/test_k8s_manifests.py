"""workers/deploy/k8s/, checked offline against the Kubernetes schemas and the code it runs.

No cluster runs here. What is checked, and how: every manifest is validated against the
Kubernetes 1.33 OpenAPI schemas in their strict form (unknown fields refused) by
kubernetes-validate, whose wheel ships the schemas (no download at run time); the
kustomization lists every manifest; no database or other stateful service is bundled and
every credential is a Secret reference; each Deployment has probes, requests and limits, a
non-root read-only security context, an HPA and a PodDisruptionBudget that select it, and
an init container that waits for the migration with its main container's env sources; every
agentctl command parses with agentctl's own command tree, every variable is one our
settings or the Temporal SDK read; the gateway's probe path is a route of its app and the
worker's probe command, run here with sh, passes while a worker beats and fails after. The
kustomize build (`kubectl kustomize`, when kubectl is installed: it builds offline) holds
every manifest, the migration Job included, each container on the release's pinned image.
The kubectl commands of docs/DEPLOY.md name the files, objects, containers, Secrets and keys
the manifests hold. Whether a cluster admits them (admission policies, storage classes,
quotas) is not checked.
"""

from __future__ import annotations

import asyncio
import copy
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from durable_agents.workers.cli.gc import parse_duration
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
KUSTOMIZATION = yaml.safe_load((K8S / "kustomization.yaml").read_text())
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
DEPLOY_DOC = ROOT / "docs" / "DEPLOY.md"
# What each pod waits for before it serves: the migration Job's schema (workers/cli/migrate.py).
WAIT_FOR_MIGRATION = ["agentctl", "migrate", "--check", "--wait"]


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
    """Every container of every pod, init containers included."""
    return [
        (name, c)
        for name, spec in pod_specs()
        for c in [*spec.get("initContainers", []), *spec["containers"]]
    ]


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
    assert sorted(KUSTOMIZATION["resources"]) == [p.name for p in MANIFESTS]
    (image,) = KUSTOMIZATION["images"]
    assert image["name"] == AGENT_IMAGE
    assert image["newTag"] == VERSION  # this release's image, never `latest`
    for name, container in containers():
        assert container["image"] == AGENT_IMAGE, name  # one image runs agentctl


def kustomize_build() -> list[dict[str, Any]]:
    """The documents `kubectl apply -k` sends, built offline by kubectl's kustomize."""
    if kubectl := shutil.which("kubectl"):
        argv = [kubectl, "kustomize", str(K8S)]
    elif kustomize := shutil.which("kustomize"):
        argv = [kustomize, "build", str(K8S)]
    else:
        pytest.skip("neither kubectl nor kustomize is installed to build the kustomization")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-500:]
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_the_kustomize_build_holds_the_job_and_runs_every_container_on_the_pinned_image() -> None:
    built = kustomize_build()
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in built)
    assert kinds == sorted((d["kind"], d["metadata"]["name"]) for d in ALL)
    assert ("Job", "durable-agents-migrate") in kinds
    (image,) = KUSTOMIZATION["images"]
    pinned = f"{image.get('newName', AGENT_IMAGE)}:{image['newTag']}"
    for doc in built:
        assert kubernetes_validate.validate(doc, KUBERNETES, strict=True) == "1.33"
        if "template" not in doc.get("spec", {}):
            continue
        pod = doc["spec"]["template"]["spec"]
        inits = pod.get("initContainers", [])
        for container in [*inits, *pod["containers"]]:
            assert container["image"] == pinned, (doc["metadata"]["name"], container["name"])
        if doc["kind"] == "Deployment":  # the migration's waiter gets the image too
            assert [c["command"][:4] for c in inits] == [WAIT_FOR_MIGRATION], doc["metadata"]


def _doc_kubectl_commands() -> list[list[str]]:
    """Each kubectl command of docs/DEPLOY.md: code block lines and inline code."""
    text = DEPLOY_DOC.read_text()
    lines = re.findall(r"^\s*(kubectl [^`\n]+)$", text, re.M)
    lines += re.findall(r"`(kubectl [^`]+)`", text)
    return [
        shlex.split(command, comments=True)
        for line in lines
        for command in line.split(" && ")
        if command.startswith("kubectl ")
    ]


def _secret_refs() -> set[tuple[str, str]]:
    return {
        (ref["name"], ref["key"])
        for _, container in containers()
        for env in container.get("env", [])
        if (ref := env.get("valueFrom", {}).get("secretKeyRef"))
    }


def test_deploy_doc_kubectl_commands_name_what_the_manifests_hold() -> None:
    objects = {(d["kind"].lower(), d["metadata"]["name"]): d for d in ALL}
    (job,) = of_kind("Job")
    created: set[tuple[str, str]] = set()
    commands = _doc_kubectl_commands()
    assert any(c[1:3] == ["apply", "-k"] for c in commands)
    for argv in commands:
        verb, args = argv[1], argv[2:]
        for flag in ("-k", "-f"):
            if flag in args:
                path = ROOT / args[args.index(flag) + 1]
                assert path.exists(), argv
                # A manifest applied alone misses the kustomization's image tag and labels.
                assert flag == "-k" and path.resolve() == K8S.resolve(), argv
        named = [a.split("/", 1) for a in args if re.fullmatch(r"(job|deployment)/[\w-]+", a)]
        if args[:1] in (["job"], ["deployment"]):
            named.append(args[:2])
        for kind, name in named:
            assert (kind, name) in objects, argv
            if "-c" in args:
                pod = objects[(kind, name)]["spec"]["template"]["spec"]
                names = {c["name"] for c in [*pod.get("initContainers", []), *pod["containers"]]}
                assert args[args.index("-c") + 1] in names, argv
        if verb == "wait":  # kubectl's own default is 30 s, less than a migration may take
            (timeout,) = [a.split("=", 1)[1] for a in args if a.startswith("--timeout=")]
            deadline = job["spec"]["activeDeadlineSeconds"]
            assert parse_duration(timeout).total_seconds() >= deadline, argv
        if args[:2] == ["secret", "generic"]:
            keys = [a.split("=", 2)[1] for a in args if a.startswith("--from-literal=")]
            created |= {(args[2], key) for key in keys}
    assert created == _secret_refs()


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


def _quantity(value: str | int) -> float:
    """A Kubernetes resource quantity (250m, 1, 384Mi, 1Gi) as a number."""
    match = re.fullmatch(r"([\d.]+)(m|Ki|Mi|Gi|)", str(value))
    assert match, f"not a quantity this test reads: {value}"
    number, unit = match.groups()
    return float(number) * {"m": 1e-3, "": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}[unit]


def test_deployment_pods_wait_for_the_migration_with_their_main_containers_env_sources() -> None:
    (job,) = of_kind("Job")
    for deployment in of_kind("Deployment"):
        name, pod = deployment["metadata"]["name"], deployment["spec"]["template"]["spec"]
        inits = pod.get("initContainers", [])
        assert len(inits) == 1, f"{name}: no init container waits for the migration"
        (init,), (main,) = inits, pod["containers"]
        assert init["command"][:4] == WAIT_FOR_MIGRATION, name
        # It outwaits the Job's deadline before it exits and the kubelet restarts it.
        wait = parse_duration(init["command"][4]).total_seconds()
        assert wait >= job["spec"]["activeDeadlineSeconds"], name
        assert init["image"] == main["image"] and init["envFrom"] == main["envFrom"], name
        # The same Secrets, keys and optionality, and nothing the main container lacks.
        refs = [e for e in main["env"] if "valueFrom" in e]
        assert [e for e in init["env"] if "valueFrom" in e] == refs, name
        assert {e["name"] for e in init["env"]} <= {e["name"] for e in main["env"]}, name
        assert init["securityContext"] == main["securityContext"], name
        for bound in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                small = _quantity(init["resources"][bound][resource])
                assert small <= _quantity(main["resources"][bound][resource]), (name, bound)


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
