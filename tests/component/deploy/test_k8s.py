"""The Kubernetes manifests (deploy/k8s): each overlay, as `kubectl kustomize` renders it, is
hardened, probed, sized, disruption-budgeted and scaled the way docs/deploy-kubernetes.md
says, and names only settings and streams that exist in the code.

kubectl comes from $MEMORIA_KUBECTL, the PATH or .tools/bin (where the lint target puts it);
without one the rendering tests are skipped. The checks themselves are pure functions, and
the last tests feed them broken manifests to show they do fail.
"""

from __future__ import annotations

import base64
import copy
import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from memoria_cli.run import SERVICES as RUN_SERVICES
from memoria_contracts.streams import Group, Stream
from memoria_decision.app import DECISION_SLOTS
from memoria_runtime.bus.consumer import DEFAULT_SLOTS
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import Settings, env_names

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("dev", "prod", "cluster")
KUBECTL_TIMEOUT_S = 120

Manifest = dict[str, Any]

# service name -> the module it runs: what `memoria run` starts
MEMORIA_SERVICES = {name: module for name, module, _color in RUN_SERVICES}
GATEWAY_PORT = 8000
OPS_PORT = 9464
DATA_DIR = "/var/lib/memoria"
MEMORY_STARTUP_BUDGET_S = 120
STEP_GRACE_MIN_S = 60
# Not a Memoria setting, but allowed in the ConfigMap: the broker's host:port for KEDA.
KEDA_ADDRESS_KEY = "KEDA_REDIS_ADDRESS"
DATA_STORE = re.compile(r"redis|valkey|mongo|milvus|etcd|minio", re.IGNORECASE)


# -- rendering --------------------------------------------------------------------------------


def find_kubectl() -> str | None:
    configured = os.environ.get("MEMORIA_KUBECTL")
    if configured:
        return configured
    on_path = shutil.which("kubectl")
    if on_path:
        return on_path
    local = ROOT / ".tools" / "bin" / "kubectl"
    return str(local) if local.is_file() and os.access(local, os.X_OK) else None


@functools.cache
def render(overlay: str) -> tuple[Manifest, ...]:
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip(
            "no kubectl to render deploy/k8s: set MEMORIA_KUBECTL, put kubectl on the PATH "
            "or in .tools/bin (the deploy lint target downloads it there)"
        )
    result = subprocess.run(
        [kubectl, "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"kubectl kustomize overlays/{overlay} failed:\n{result.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def docs(overlay: str) -> tuple[Manifest, ...]:
    return render(overlay)


# -- helpers ----------------------------------------------------------------------------------


def of_kind(docs: tuple[Manifest, ...] | list[Manifest], kind: str) -> list[Manifest]:
    return [doc for doc in docs if doc.get("kind") == kind]


def named(docs: tuple[Manifest, ...] | list[Manifest], kind: str, name: str) -> Manifest:
    found = [doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def workloads(docs: tuple[Manifest, ...] | list[Manifest]) -> list[Manifest]:
    return [doc for doc in docs if doc.get("kind") in ("Deployment", "StatefulSet")]


def pod_spec(workload: Manifest) -> Manifest:
    spec: Manifest = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: Manifest) -> list[Manifest]:
    spec = pod_spec(workload)
    found: list[Manifest] = [*spec.get("initContainers", []), *spec["containers"]]
    return found


def memoria_deployments(docs: tuple[Manifest, ...] | list[Manifest]) -> list[Manifest]:
    return [d for d in of_kind(docs, "Deployment") if d["metadata"]["name"] in MEMORIA_SERVICES]


def config_data(docs: tuple[Manifest, ...] | list[Manifest]) -> dict[str, str]:
    """The data of the ConfigMap the Memoria containers load (it has a hash suffix)."""
    (config,) = [
        doc for doc in of_kind(docs, "ConfigMap") if doc["metadata"]["name"].startswith("memoria")
    ]
    data: dict[str, str] = config.get("data", {})
    return data


def selects(selector: Manifest, labels: dict[str, str]) -> bool:
    match: dict[str, str] = selector.get("matchLabels", {})
    assert not selector.get("matchExpressions"), "keep selectors to matchLabels"
    return bool(match) and all(labels.get(key) == value for key, value in match.items())


def secret_value(secret: Manifest, key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


def services_selecting(
    docs: tuple[Manifest, ...] | list[Manifest], labels: dict[str, str]
) -> list[Manifest]:
    return [
        service
        for service in of_kind(docs, "Service")
        if selects({"matchLabels": service["spec"].get("selector", {})}, labels)
    ]


def probe_port(probe: Manifest, container: Manifest) -> int:
    """The container port a probe asks (named ports resolved)."""
    handler = probe.get("httpGet") or probe.get("tcpSocket") or {}
    port = handler.get("port")
    if isinstance(port, int):
        return port
    for declared in container.get("ports", []):
        if declared.get("name") == port:
            number: int = declared["containerPort"]
            return number
    raise AssertionError(f"probe port {port!r} is not a port of {container['name']}")


def container_problems(workload: Manifest) -> list[str]:
    """What is missing from a workload's hardening, probes and resources."""
    problems: list[str] = []
    name = workload["metadata"]["name"]
    spec = pod_spec(workload)
    pod_security: Manifest = spec.get("securityContext", {})
    if spec.get("automountServiceAccountToken") is not False:
        problems.append(f"{name}: automountServiceAccountToken is not false")
    for container in containers(workload):
        where = f"{name}/{container['name']}"
        for probe in ("livenessProbe", "readinessProbe"):
            if probe not in container:
                problems.append(f"{where}: no {probe}")
        resources: Manifest = container.get("resources", {})
        for bound in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                if resource not in resources.get(bound, {}):
                    problems.append(f"{where}: no {bound}.{resource}")
        security: Manifest = {**pod_security, **container.get("securityContext", {})}
        if security.get("runAsNonRoot") is not True:
            problems.append(f"{where}: runAsNonRoot is not true")
        if security.get("runAsUser") == 0:
            problems.append(f"{where}: runs as uid 0")
        if security.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{where}: readOnlyRootFilesystem is not true")
        if security.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        if "ALL" not in security.get("capabilities", {}).get("drop", []):
            problems.append(f"{where}: capabilities do not drop ALL")
        if security.get("capabilities", {}).get("add"):
            problems.append(f"{where}: adds capabilities")
        if security.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{where}: seccompProfile is not RuntimeDefault")
    return problems


STREAM_TRIGGERS = ("redis-streams", "redis-cluster-streams")


def redis_streams_triggers(scaled_object: Manifest) -> list[Manifest]:
    return [t for t in scaled_object["spec"]["triggers"] if t["type"] in STREAM_TRIGGERS]


def partitions_of(docs: tuple[Manifest, ...] | list[Manifest]) -> Partitions:
    data = config_data(docs)
    return Partitions(
        int(data.get("MEMORIA_BUS_PARTITIONS", "1")),
        tagged=data.get("MEMORIA_REDIS_CLUSTER", "false") == "true",
    )


def summed(scaled_object: Manifest, names: list[str]) -> None:
    """Several triggers of one measure are summed by the ScaledObject's formula (KEDA takes
    the largest of separate triggers)."""
    if len(names) == 1:
        return
    formula = scaled_object["spec"]["advanced"]["scalingModifiers"]["formula"]
    assert " + ".join(names) in formula, (names, formula)


# -- every overlay ----------------------------------------------------------------------------


def test_every_overlay_renders_the_four_services(docs: tuple[Manifest, ...]) -> None:
    deployments = {d["metadata"]["name"]: d for d in memoria_deployments(docs)}
    assert set(deployments) == set(MEMORIA_SERVICES)
    for name, module in MEMORIA_SERVICES.items():
        (container,) = pod_spec(deployments[name])["containers"]
        assert container["command"] == ["python", "-m", module]
        assert container["image"].rsplit("/", 1)[-1].startswith("memoria:")
    namespaced = [doc for doc in docs if doc["kind"] != "Namespace"]
    assert all(doc["metadata"].get("namespace") == "memoria" for doc in namespaced)
    for doc in docs:
        assert doc["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "memoria", (
            f"{doc['kind']} {doc['metadata']['name']}"
        )


def test_every_container_is_probed_sized_and_hardened(docs: tuple[Manifest, ...]) -> None:
    problems = [problem for workload in workloads(docs) for problem in container_problems(workload)]
    assert problems == []


def test_memoria_pods_write_only_to_empty_dirs(docs: tuple[Manifest, ...]) -> None:
    assert config_data(docs)["MEMORIA_DATA_DIR"] == DATA_DIR
    for deployment in memoria_deployments(docs):
        spec = pod_spec(deployment)
        assert spec["serviceAccountName"] == "memoria"
        assert spec["securityContext"]["runAsUser"] == 10001
        assert spec.get("enableServiceLinks") is False
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        (container,) = spec["containers"]
        mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
        assert set(mounts) == {"/tmp", DATA_DIR}
        assert all("emptyDir" in volumes[volume] for volume in mounts.values())


def test_probes_ask_the_service_ports(docs: tuple[Manifest, ...]) -> None:
    for deployment in memoria_deployments(docs):
        name = deployment["metadata"]["name"]
        (container,) = pod_spec(deployment)["containers"]
        port = GATEWAY_PORT if name == "gateway" else OPS_PORT
        assert "startupProbe" in container, name
        for probe, path in (
            ("startupProbe", "/livez"),
            ("livenessProbe", "/livez"),
            ("readinessProbe", "/readyz"),
        ):
            assert container[probe]["httpGet"]["path"] == path, (name, probe)
            assert probe_port(container[probe], container) == port, (name, probe)


def test_the_memory_service_has_time_to_load_its_model(docs: tuple[Manifest, ...]) -> None:
    (container,) = pod_spec(named(docs, "Deployment", "memory"))["containers"]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= MEMORY_STARTUP_BUDGET_S


def test_a_worker_has_time_to_finish_its_step(docs: tuple[Manifest, ...]) -> None:
    grace = pod_spec(named(docs, "Deployment", "action-worker"))["terminationGracePeriodSeconds"]
    assert grace >= STEP_GRACE_MIN_S


def test_pods_are_scraped_on_their_ops_port(docs: tuple[Manifest, ...]) -> None:
    for deployment in memoria_deployments(docs):
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(OPS_PORT)
        assert annotations["prometheus.io/path"] == "/metrics"
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        metrics = [
            service
            for service in services_selecting(docs, labels)
            for port in service["spec"]["ports"]
            if (port["name"], port["port"]) == ("metrics", OPS_PORT)
        ]
        assert metrics, f"no metrics Service for {deployment['metadata']['name']}"
    gateway = named(docs, "Service", "gateway")
    assert [(p["name"], p["port"]) for p in gateway["spec"]["ports"]] == [("http", GATEWAY_PORT)]


def test_every_memoria_deployment_has_a_disruption_budget(docs: tuple[Manifest, ...]) -> None:
    budgets = of_kind(docs, "PodDisruptionBudget")
    for deployment in memoria_deployments(docs):
        name = deployment["metadata"]["name"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert [b for b in budgets if selects(b["spec"]["selector"], labels)], name


def test_the_gateway_is_spread_and_autoscaled_on_cpu(docs: tuple[Manifest, ...]) -> None:
    spec = pod_spec(named(docs, "Deployment", "gateway"))
    spread = spec.get("topologySpreadConstraints")
    assert spread or spec.get("affinity", {}).get("podAntiAffinity")
    hpas = of_kind(docs, "HorizontalPodAutoscaler")
    (hpa,) = [h for h in hpas if h["spec"]["scaleTargetRef"]["name"] == "gateway"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment"
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    # KEDA owns the worker's and decision's HPAs: a second one would fight it.
    for keda_scaled in ("action-worker", "decision"):
        assert not [h for h in hpas if h["spec"]["scaleTargetRef"]["name"] == keda_scaled]
        assert "replicas" not in named(docs, "Deployment", keda_scaled)["spec"]


def test_keda_scales_the_worker_on_the_action_stream_lag(docs: tuple[Manifest, ...]) -> None:
    scaled = named(docs, "ScaledObject", "action-worker")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    target = scaled["spec"]["scaleTargetRef"]
    assert target.get("kind", "Deployment") == "Deployment"
    assert target["name"] == "action-worker"
    named(docs, "Deployment", "action-worker")
    # Never zero: decision offers only the actions live workers advertise.
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    triggers = redis_streams_triggers(scaled)
    assert triggers
    for trigger in triggers:
        assert trigger["metadata"]["consumerGroup"] == Group.ACTION_WORKER.value
    # Every partition of the stream, its lag summed.
    partitions = partitions_of(docs)
    lag = [t for t in triggers if "lagCount" in t["metadata"]]
    assert [t["metadata"]["stream"] for t in lag] == partitions.keys(Stream.ACTIONS.value)
    summed(scaled, [t["name"] for t in lag])
    for trigger in lag:
        # One replica per what one worker runs at once.
        assert int(trigger["metadata"]["lagCount"]) == DEFAULT_SLOTS
        # KEDA 2.16 refuses lagCount without a non-zero activationLagCount.
        assert int(trigger["metadata"]["activationLagCount"]) >= 1
    if partitions.count > 1:
        modifiers = scaled["spec"]["advanced"]["scalingModifiers"]
        assert int(modifiers["target"]) == DEFAULT_SLOTS


def test_keda_scales_decision_on_the_decisions_waiting_and_running(
    docs: tuple[Manifest, ...],
) -> None:
    scaled = named(docs, "ScaledObject", "decision")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "decision"
    named(docs, "Deployment", "decision")
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    triggers = [t["metadata"] for t in redis_streams_triggers(scaled)]
    assert {t["consumerGroup"] for t in triggers} == {Group.DECISION.value}
    partitions = partitions_of(docs)
    # Both streams decision reads, each by what waits unread and what runs, every partition.
    for stream in (Stream.CHAT_IN, Stream.ACTIONS_DONE):
        for key in partitions.keys(stream.value):
            (lag,) = [t for t in triggers if t["stream"] == key and "lagCount" in t]
            (pending,) = [t for t in triggers if t["stream"] == key and "pendingEntriesCount" in t]
            assert int(lag["lagCount"]) == DECISION_SLOTS
            assert int(lag["activationLagCount"]) >= 1
            # Below what a replica runs at once: busy replicas are not scaled in.
            assert 1 <= int(pending["pendingEntriesCount"]) < DECISION_SLOTS
    assert len(triggers) == 4 * partitions.count
    for measure in ("lag", "pending"):
        names = [t["name"] for t in redis_streams_triggers(scaled) if t["name"].endswith(measure)]
        summed(scaled, names[: partitions.count])


def test_keda_reaches_the_broker_the_pods_use(docs: tuple[Manifest, ...]) -> None:
    data = config_data(docs)
    url = urlsplit(data["MEMORIA_REDIS_URL"])
    scaled_objects = of_kind(docs, "ScaledObject")
    assert {s["metadata"]["name"] for s in scaled_objects} == {"action-worker", "decision"}
    for scaled in scaled_objects:
        target = named(docs, "Deployment", scaled["spec"]["scaleTargetRef"]["name"])
        source = scaled["spec"]["scaleTargetRef"]["envSourceContainerName"]
        (container,) = [c for c in containers(target) if c["name"] == source]
        config_names = {ref["configMapRef"]["name"] for ref in container["envFrom"]}
        (config,) = [c for c in of_kind(docs, "ConfigMap") if c["metadata"]["name"] in config_names]
        assert config["data"] == data
        for trigger in redis_streams_triggers(scaled):
            metadata = trigger["metadata"]
            assert "address" not in metadata and "host" not in metadata
            if trigger["type"] == "redis-cluster-streams":  # every node, as the pods name them
                assert metadata["addresses"] == url.netloc
                assert data["MEMORIA_REDIS_CLUSTER"] == "true"
            else:
                assert data[metadata["addressFromEnv"]] == url.netloc
                assert metadata.get("databaseIndex", "0") == (url.path.strip("/") or "0")
            if "authenticationRef" in trigger:
                auth = named(docs, "TriggerAuthentication", trigger["authenticationRef"]["name"])
                secrets = {s["metadata"]["name"] for s in of_kind(docs, "Secret")} or {
                    "memoria-secrets"
                }
                for ref in auth["spec"]["secretTargetRef"]:
                    assert ref["name"] in secrets


def test_settings_are_real_and_dev_login_is_off(docs: tuple[Manifest, ...]) -> None:
    names = env_names()
    data = config_data(docs)
    assert data["MEMORIA_DEV_LOGIN"] == "false"
    unknown = [key for key in data if key not in names and key != KEDA_ADDRESS_KEY]
    assert unknown == []
    Settings.load(
        _env_file=None, **{names[key]: value for key, value in data.items() if key in names}
    )
    for key in ("MEMORIA_REDIS_URL", "MEMORIA_DOCSTORE_URL", "MEMORIA_MILVUS_URI"):
        parts = urlsplit(data[key])
        assert parts.username is None and parts.password is None, f"credentials in {key}"
    assert data["MEMORIA_VECTOR_ISOLATION"] == "partition_key"
    assert data["MEMORIA_GATEWAY_HOST"] == "0.0.0.0"
    assert data["MEMORIA_METRICS_PORT"] == str(OPS_PORT)
    for deployment in memoria_deployments(docs):
        for container in containers(deployment):
            for variable in container.get("env", []):
                assert variable["name"] in names, variable["name"]
                assert variable["name"] != "MEMORIA_DEV_LOGIN"
                assert "value" not in variable or not variable["name"].endswith(
                    ("_SECRET", "_KEY", "_TOKEN")
                ), f"{variable['name']} given in clear"


def test_the_consumer_name_is_left_to_each_replica(docs: tuple[Manifest, ...]) -> None:
    assert "MEMORIA_CONSUMER_NAME" not in yaml.safe_dump_all(docs)


def test_secrets_come_from_memoria_secrets(docs: tuple[Manifest, ...]) -> None:
    # dev generates it (hash-suffixed name), prod expects it under its plain name
    secrets = {s["metadata"]["name"] for s in of_kind(docs, "Secret")} or {"memoria-secrets"}
    refs: dict[str, list[Manifest]] = {}
    for deployment in memoria_deployments(docs):
        for container in containers(deployment):
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] in secrets
                    assert ref["key"] == variable["name"]
                    refs.setdefault(variable["name"], []).append(ref)
    (auth,) = refs["MEMORIA_AUTH_SECRET"]  # the gateway signs tokens, and only it
    assert not auth.get("optional")
    bus = refs["MEMORIA_BUS_SECRET"]  # every service signs and checks bus entries
    assert len(bus) == len(MEMORIA_SERVICES) and not any(ref.get("optional") for ref in bus)
    assert refs["GEMINI_API_KEY"]
    required = {"MEMORIA_AUTH_SECRET", "MEMORIA_BUS_SECRET"}
    others = [ref for name, found in refs.items() if name not in required for ref in found]
    assert all(ref.get("optional") is True for ref in others)
    # A rotation is an edit of the Secret and a rollout restart, no manifest to change.
    for rotating in ("MEMORIA_BUS_SECRET_NEXT", "MEMORIA_BUS_SECRET_PREVIOUS"):
        assert len(refs[rotating]) == len(MEMORIA_SERVICES)
    for rotating in ("MEMORIA_AUTH_SECRET_NEXT", "MEMORIA_AUTH_SECRET_PREVIOUS"):
        assert len(refs[rotating]) == 1  # the gateway's


# -- per overlay ------------------------------------------------------------------------------


def test_dev_brings_its_data_stores_and_a_dev_only_secret() -> None:
    docs = render("dev")
    stateful = {s["metadata"]["name"]: s for s in of_kind(docs, "StatefulSet")}
    assert set(stateful) == {"redis", "mongodb", "milvus"}
    for name, workload in stateful.items():
        assert workload["spec"]["replicas"] == 1
        assert workload["spec"]["volumeClaimTemplates"], name
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert services_selecting(docs, labels), name
    (redis,) = containers(stateful["redis"])
    args = redis["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    (milvus,) = containers(stateful["milvus"])
    assert milvus["command"] == ["milvus", "run", "standalone"]
    milvus_env = {variable["name"]: variable["value"] for variable in milvus["env"]}
    assert milvus_env["ETCD_USE_EMBED"] == "true"
    assert milvus_env["COMMON_STORAGETYPE"] == "local"
    assert milvus_env["ETCD_DATA_DIR"].startswith("/var/lib/milvus")
    data = config_data(docs)
    assert urlsplit(data["MEMORIA_REDIS_URL"]).hostname == "redis"
    assert urlsplit(data["MEMORIA_DOCSTORE_URL"]).hostname == "mongodb"
    assert urlsplit(data["MEMORIA_MILVUS_URI"]).hostname == "milvus"
    (secret,) = of_kind(docs, "Secret")
    assert secret["metadata"]["name"].startswith("memoria-secrets")
    assert set(secret["data"]) == {"MEMORIA_AUTH_SECRET", "MEMORIA_BUS_SECRET"}
    assert "dev-only" in secret_value(secret, "MEMORIA_AUTH_SECRET")
    assert "dev-only" in secret_value(secret, "MEMORIA_BUS_SECRET")
    for deployment in memoria_deployments(docs):
        assert deployment["spec"].get("replicas", 1) == 1
    (hpa,) = of_kind(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["minReplicas"] == 1
    for scaled in of_kind(docs, "ScaledObject"):
        assert scaled["spec"]["minReplicaCount"] == 1


def test_prod_has_no_data_stores_no_secret_values_and_more_replicas() -> None:
    docs = render("prod")
    assert of_kind(docs, "StatefulSet") == []
    images = [c["image"] for w in workloads(docs) for c in containers(w)]
    assert not [image for image in images if DATA_STORE.search(image)]
    assert [s for s in of_kind(docs, "Secret") if s.get("data") or s.get("stringData")] == []
    assert all(image.startswith("ghcr.io/example/memoria:") for image in images)
    assert not [image for image in images if image.endswith(":latest")]
    data = config_data(docs)
    assert data["MEMORIA_OTEL_EXPORTER"] == "otlp"
    assert data["MEMORIA_OTEL_ENDPOINT"]
    assert named(docs, "Deployment", "memory")["spec"]["replicas"] >= 2
    (hpa,) = of_kind(docs, "HorizontalPodAutoscaler")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 10)
    worker = named(docs, "ScaledObject", "action-worker")
    assert (worker["spec"]["minReplicaCount"], worker["spec"]["maxReplicaCount"]) == (2, 20)
    decision = named(docs, "ScaledObject", "decision")
    assert (decision["spec"]["minReplicaCount"], decision["spec"]["maxReplicaCount"]) == (2, 10)
    for budget in of_kind(docs, "PodDisruptionBudget"):
        assert budget["spec"]["minAvailable"] == 1
        assert "maxUnavailable" not in budget["spec"]


def test_config_files_name_only_real_settings() -> None:
    """The ConfigMap sources themselves, so this holds even where kubectl is missing."""
    names = env_names()
    sources = sorted(K8S.rglob("*.env"))
    assert sources
    for source in sources:
        keys = [
            line.split("=", 1)[0].strip()
            for line in source.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        assert keys, source
        assert [k for k in keys if k not in names and k != KEDA_ADDRESS_KEY] == [], source
        assert "MEMORIA_CONSUMER_NAME" not in keys


# -- the checks fail on what they exist to catch ----------------------------------------------


def broken_variants() -> Iterator[tuple[str, Manifest]]:
    good: Manifest = {
        "kind": "Deployment",
        "metadata": {"name": "w"},
        "spec": {
            "template": {
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "c",
                            "livenessProbe": {},
                            "readinessProbe": {},
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Mi"},
                                "limits": {"cpu": "1", "memory": "1Mi"},
                            },
                            "securityContext": {
                                "readOnlyRootFilesystem": True,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                }
            }
        },
    }
    yield "good", good
    pod = ("spec", "template", "spec")
    box = (*pod, "containers", "0", "securityContext")
    edits: list[tuple[str, tuple[str, ...], str, Any]] = [
        ("no liveness", (*pod, "containers", "0"), "livenessProbe", None),
        ("no limits", (*pod, "containers", "0", "resources"), "limits", None),
        ("root", (*pod, "securityContext"), "runAsNonRoot", False),
        ("writable", box, "readOnlyRootFilesystem", None),
        ("escalation", box, "allowPrivilegeEscalation", True),
        ("caps", box, "capabilities", {"drop": []}),
        ("added caps", box, "capabilities", {"drop": ["ALL"], "add": ["NET_ADMIN"]}),
        ("token", pod, "automountServiceAccountToken", True),
        ("seccomp", (*pod, "securityContext"), "seccompProfile", {"type": "Unconfined"}),
    ]
    for label, path, key, value in edits:
        doc = copy.deepcopy(good)
        node: Any = doc
        for step in path:
            node = node[int(step)] if isinstance(node, list) else node[step]
        if value is None:
            del node[key]
        else:
            node[key] = value
        yield label, doc


@pytest.mark.parametrize(("label", "workload"), list(broken_variants()))
def test_the_hardening_check_fails_on_each_gap(label: str, workload: Manifest) -> None:
    problems = container_problems(workload)
    assert (problems == []) == (label == "good"), problems


def test_the_budget_check_needs_a_matching_selector() -> None:
    labels = {"app.kubernetes.io/name": "gateway", "app.kubernetes.io/part-of": "memoria"}
    assert selects({"matchLabels": {"app.kubernetes.io/name": "gateway"}}, labels)
    assert not selects({"matchLabels": {"app.kubernetes.io/name": "decision"}}, labels)
    assert not selects({}, labels)


def test_find_kubectl_prefers_the_configured_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORIA_KUBECTL", "/opt/kubectl")
    assert find_kubectl() == "/opt/kubectl"
