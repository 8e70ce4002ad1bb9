"""Generated docs stay in sync with the code: a setting or a subscription added without
running `make docs` fails here."""

from __future__ import annotations

from pathlib import Path

import yaml

from memoria_cli.docs import SETTINGS_PAGE, asyncapi_documents, render_settings_page
from memoria_cli.keda_partitions import CLUSTER_OVERLAY, CONFIG_ENV, PATCH_FILE, keda_patch
from memoria_contracts.streams import READERS, Stream
from memoria_runtime.partitions import Partitions
from memoria_runtime.settings import env_names

ROOT = Path(__file__).resolve().parents[3]


def test_settings_table_is_current() -> None:
    page = (ROOT / SETTINGS_PAGE).read_text()
    assert render_settings_page(page) == page, f"run `make docs` to refresh {SETTINGS_PAGE}"


def test_every_setting_is_in_the_configuration_page() -> None:
    page = (ROOT / SETTINGS_PAGE).read_text()
    for name in set(env_names().values()):
        assert f"MEMORIA_{name.upper()}" in page or name in {"redis_url", "gemini_api_key"}


def test_committed_asyncapi_documents_are_current() -> None:
    for name, document in asyncapi_documents().items():
        path = ROOT / "docs" / "asyncapi" / f"{name}.yaml"
        assert path.exists(), f"{path} is missing: run `make docs`"
        assert path.read_text() == document, f"{path} is stale: run `make docs`"


def test_asyncapi_documents_describe_the_streams_each_service_uses() -> None:
    documents = {name: yaml.safe_load(doc) for name, doc in asyncapi_documents().items()}
    channels = {
        name: {c["address"] for c in doc["channels"].values()} for name, doc in documents.items()
    }
    assert {"memoria:chat.in", "memoria:actions.done", "memoria:actions"} <= channels["decision"]
    assert {"memoria:actions", "memoria:actions.done"} <= channels["action-worker"]
    assert {"memoria:chat.out", "memoria:memory.rpc"} <= channels["memory"]
    # The memory service's own group on the cycle's streams (cycle traces).
    assert {"memoria:chat.in", "memoria:actions", "memoria:actions.done"} <= channels["memory"]
    assert {"memoria:chat.out", "memoria:chat.in"} <= channels["gateway"]


def test_the_stream_topology_names_every_group_a_service_reads() -> None:
    """Streams are created with the groups of READERS (bus/topology.py): a group a service
    reads that READERS leaves out would miss what was appended before it first started."""
    read: set[tuple[str, str]] = set()
    for document in asyncapi_documents().values():
        for key, channel in yaml.safe_load(document)["channels"].items():
            address = channel["address"]
            role = key.removeprefix(f"{address}:")
            if role not in {"publish", "gateway-fanout"}:
                read.add((address, role))
    declared = {
        (stream.value, group.value) for stream, groups in READERS.items() for group in groups
    }
    assert read == declared


def test_the_cluster_overlays_keda_triggers_are_current() -> None:
    overlay = ROOT / CLUSTER_OVERLAY
    committed = (overlay / PATCH_FILE).read_text()
    wanted = keda_patch((overlay / CONFIG_ENV).read_text())
    assert committed == wanted, f"run `make docs` to refresh {CLUSTER_OVERLAY / PATCH_FILE}"


def test_the_keda_triggers_follow_the_partition_count() -> None:
    env = "MEMORIA_BUS_PARTITIONS=3\nMEMORIA_REDIS_URL=redis://a:6379,b:7000/0\n"
    documents = list(yaml.safe_load_all(keda_patch(env)))
    worker = next(d for d in documents if d["metadata"]["name"] == "action-worker")
    streams = {t["metadata"]["stream"] for t in worker["spec"]["triggers"]}
    assert streams == set(Partitions(3, tagged=True).keys(Stream.ACTIONS.value))
    assert {t["metadata"]["addresses"] for t in worker["spec"]["triggers"]} == {"a:6379,b:7000"}
    formula = worker["spec"]["advanced"]["scalingModifiers"]["formula"]
    assert formula == (
        "max(actions_0_lag + actions_1_lag + actions_2_lag, "
        "(actions_0_pending + actions_1_pending + actions_2_pending) * 16 / 12)"
    )
