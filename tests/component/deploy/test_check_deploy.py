"""tools/check_deploy.py catches what it exists to catch (the real files: `make lint-deploy`)."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools import check_deploy

SCALED_OBJECT: dict[str, Any] = {
    "apiVersion": "keda.sh/v1alpha1",
    "kind": "ScaledObject",
    "metadata": {"name": "action-worker"},
    "spec": {
        "scaleTargetRef": {"name": "action-worker"},
        "minReplicaCount": 1,
        "maxReplicaCount": 10,
        "triggers": [
            {
                "type": "redis-streams",
                "metadata": {"stream": "memoria:actions", "consumerGroup": "action-worker"},
            }
        ],
    },
}
CONFIG_MAP: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "memoria"},
    "data": {"MEMORIA_DEV_LOGIN": "false"},
}


def kubectl() -> Path:
    root = Path(check_deploy.ROOT)
    for candidate in (root / ".tools" / "bin" / "kubectl", shutil.which("kubectl")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    pytest.skip("no kubectl: `make lint-deploy` fetches one into .tools/bin")


def test_a_valid_scaled_object_passes() -> None:
    assert check_deploy.check_keda(SCALED_OBJECT) == []


def test_an_unknown_keda_field_is_reported_with_its_path() -> None:
    doc = copy.deepcopy(SCALED_OBJECT)
    doc["spec"]["maxReplicas"] = 10  # the HPA's spelling, not KEDA's
    doc["spec"]["triggers"][0]["metdata"] = {}
    assert sorted(check_deploy.check_keda(doc)) == [
        "spec.maxReplicas: not a field of ScaledObject",
        "spec.triggers[0].metdata: not a field of ScaledObject",
    ]


def test_a_wrong_keda_type_is_reported() -> None:
    doc = copy.deepcopy(SCALED_OBJECT)
    doc["spec"]["minReplicaCount"] = "one"
    problems = check_deploy.check_keda(doc)
    assert problems and problems[0].startswith("spec.minReplicaCount")


def test_an_unknown_kubernetes_field_fails_strict_validation() -> None:
    assert check_deploy.check_kubernetes(CONFIG_MAP, "1.29") == []
    doc = {**CONFIG_MAP, "datas": {}}
    (problem,) = check_deploy.check_kubernetes(doc, "1.29")
    assert "datas" in problem


def test_a_kind_without_a_schema_is_a_problem() -> None:
    doc = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    (problem,) = check_deploy.check_kubernetes(doc, "1.35")
    assert "no Kubernetes 1.35 schema" in problem


def test_an_invalid_compose_file_is_reported(tmp_path: Path) -> None:
    good = tmp_path / "good.yml"
    good.write_text(yaml.safe_dump({"services": {"redis": {"image": "redis:7.4"}}}))
    assert check_deploy.check_compose(good) == []
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump({"services": {"redis": {"image": "redis", "restart": 3}}}))
    (problem,) = check_deploy.check_compose(bad)
    assert "restart" in problem.what


def test_an_overlay_that_does_not_render_is_reported(tmp_path: Path) -> None:
    overlay = tmp_path / "broken"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    count, problems = check_deploy.check_overlay(kubectl(), overlay)
    assert count == 0 and "kubectl kustomize failed" in problems[0].what


def test_a_rendered_overlay_is_checked_object_by_object(tmp_path: Path) -> None:
    overlay = tmp_path / "tiny"
    overlay.mkdir()
    bad_scaled = copy.deepcopy(SCALED_OBJECT)
    bad_scaled["spec"]["pollingIntervall"] = 5
    (overlay / "objects.yaml").write_text(yaml.safe_dump_all([CONFIG_MAP, bad_scaled]))
    (overlay / "kustomization.yaml").write_text("resources: [objects.yaml]\n")
    count, problems = check_deploy.check_overlay(kubectl(), overlay)
    assert count == 2
    assert [str(p) for p in problems] == [
        "tiny: ScaledObject/action-worker: spec.pollingIntervall: not a field of ScaledObject"
    ]


def test_docker_compose_itself_refuses_a_reference_to_an_undefined_service(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env.example").write_text("# nothing\n")
    good = tmp_path / "docker-compose.yml"
    good.write_text(yaml.safe_dump({"services": {"redis": {"image": "redis:7.4"}}}))
    assert check_deploy.check_compose_config(good) == []
    # Valid for the schema, refused by Compose: a dependency on a service that is not there.
    good.write_text(
        yaml.safe_dump(
            {"services": {"app": {"image": "app:1", "depends_on": {"redis": {"condition": "x"}}}}}
        )
    )
    (problem,) = check_deploy.check_compose_config(good)
    assert "redis" in problem.what


def test_hadolint_reports_a_dockerfile_mistake(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM python:3.11-slim\nRUN cd /app && pip install x\n")
    (problem,) = check_deploy.check_dockerfile(dockerfile)
    assert "DL3003" in problem.what  # `cd` in RUN instead of WORKDIR
