"""docker-compose.yml, its config files under deploy/compose/ and .env.example, checked
without Docker: what the compose file promises (health-gated start order, durable broker,
replicas that scale, settings that exist, ports kept on this host) holds by construction."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from memoria_cli.run import SERVICES as RUN_SERVICES
from memoria_runtime.settings import Settings, env_names

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
PROMETHEUS = ROOT / "deploy" / "compose" / "prometheus.yml"
OTEL_COLLECTOR = ROOT / "deploy" / "compose" / "otel-collector.yaml"

# service name -> the module it runs: what `memoria run` starts
MEMORIA_SERVICES = {name: module for name, module, _color in RUN_SERVICES}
GATEWAY_PORT = 8000
REQUIRED_SECRETS = ("MEMORIA_AUTH_SECRET", "MEMORIA_BUS_SECRET")
OPS_PORT = 9464
# Read by docker compose itself (interpolation), never handed to a Memoria process.
COMPOSE_ONLY = {"MEMORIA_BIND", "MEMORIA_VERSION"}
BIND = "${MEMORIA_BIND:-127.0.0.1}"
PUBLISHING = {"gateway", "jaeger", "prometheus"}

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}, ${NAME:+alt}
_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}")
_BARE_VARIABLE = re.compile(r"(?<!\$)\$(?=[A-Za-z_])")
_ENV_EXAMPLE_LINE = re.compile(r"^#?\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")


# -- helpers -------------------------------------------------------------------------------------


def _compose_text() -> str:
    return COMPOSE.read_text()


def _compose() -> dict[str, Any]:
    """The compose file with YAML anchors and merge keys (x-memoria) resolved."""
    document = yaml.safe_load(_compose_text())
    assert isinstance(document, dict)
    return document


def _services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    assert isinstance(services, dict)
    return services


def _environment(service: Mapping[str, Any]) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):  # ["NAME=value", "NAME"]
        pairs = (item.partition("=") for item in raw)
        return {name: value for name, _, value in pairs}
    return {str(name): "" if value is None else str(value) for name, value in raw.items()}


def _depends_on(service: Mapping[str, Any]) -> dict[str, str]:
    """Dependency -> condition (short syntax means service_started)."""
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return {name: "service_started" for name in raw}
    return {name: spec.get("condition", "service_started") for name, spec in raw.items()}


def _interpolate(text: str, environ: Mapping[str, str]) -> str:
    """Compose's ${...} interpolation, enough for the forms used here."""

    def replace(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"] or ""
        value = environ.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return arg if value is None else value
        if op in (":?", "?"):
            missing = not value if op == ":?" else value is None
            if missing:
                raise LookupError(f"{name}: {arg}")
            return value or ""
        if op == ":+":
            return arg if value else ""
        return value or ""

    return _VARIABLE.sub(replace, text)


def _referenced_variables() -> set[str]:
    return {match["name"] for match in _VARIABLE.finditer(_compose_text())}


def _env_example_names() -> set[str]:
    names: set[str] = set()
    for line in ENV_EXAMPLE.read_text().splitlines():
        match = _ENV_EXAMPLE_LINE.match(line.strip())
        if match:
            names.add(match["name"])
    return names


def _port_entries(service: Mapping[str, Any]) -> Iterator[str | dict[str, Any]]:
    yield from service.get("ports") or []


# -- the Memoria services ----------------------------------------------------------------------


def test_no_obsolete_version_key() -> None:
    assert "version" not in _compose(), "the Compose Specification has no top-level version"


def test_every_memoria_service_is_defined_and_runs_its_module() -> None:
    services = _services()
    for name, module in MEMORIA_SERVICES.items():
        assert name in services, f"{name} is missing"
        service = services[name]
        assert service["command"] == ["python", "-m", module]
        assert service["image"] == "memoria:${MEMORIA_VERSION:-latest}"
        build = service.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        assert context == ".", f"{name} must be built from this repository"


def test_memoria_services_have_init_restart_and_a_probe_healthcheck() -> None:
    services = _services()
    for name in MEMORIA_SERVICES:
        service = services[name]
        assert service.get("init") is True, f"{name}: init: true forwards signals, reaps"
        assert service.get("restart") == "unless-stopped", name
        healthcheck = service.get("healthcheck") or {}
        assert not healthcheck.get("disable"), name
        test = healthcheck.get("test")
        assert isinstance(test, list), f"{name} needs a healthcheck"
        assert test[:4] == ["CMD", "python", "-m", "memoria_runtime.probe"], name


def test_gateway_health_is_probed_on_its_main_port() -> None:
    test = _services()["gateway"]["healthcheck"]["test"]
    assert test[-1] == f"http://127.0.0.1:{GATEWAY_PORT}/readyz"


def test_every_memoria_service_waits_for_a_healthy_redis() -> None:
    services = _services()
    for name in MEMORIA_SERVICES:
        assert _depends_on(services[name]).get("redis") == "service_healthy", name


def test_memory_waits_for_healthy_stores() -> None:
    depends = _depends_on(_services()["memory"])
    for store in ("redis", "mongodb", "milvus"):
        assert depends.get(store) == "service_healthy", store


def test_the_other_services_wait_for_a_healthy_memory_service() -> None:
    services = _services()
    for name in MEMORIA_SERVICES.keys() - {"memory"}:
        assert _depends_on(services[name]).get("memory") == "service_healthy", name


def test_every_dependency_has_a_healthcheck() -> None:
    services = _services()
    for name, service in services.items():
        for target, condition in _depends_on(service).items():
            assert target in services, f"{name} depends on unknown service {target}"
            healthcheck = services[target].get("healthcheck") or {}
            assert healthcheck.get("test") and not healthcheck.get("disable"), (
                f"{name} depends on {target} ({condition}), which has no healthcheck"
            )


def test_milvus_waits_for_healthy_etcd_and_minio() -> None:
    depends = _depends_on(_services()["milvus"])
    assert depends == {"etcd": "service_healthy", "minio": "service_healthy"}


# -- broker --------------------------------------------------------------------------------------


def test_redis_keeps_an_append_only_file_on_a_volume() -> None:
    redis = _services()["redis"]
    command = redis["command"]
    assert isinstance(command, list)
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--appendfsync") + 1] == "everysec"
    assert any(str(volume).endswith(":/data") for volume in redis.get("volumes", []))
    assert "redis-cli" in " ".join(redis["healthcheck"]["test"])


# -- settings ----------------------------------------------------------------------------------


def test_no_service_sets_a_consumer_name() -> None:
    """The default consumer name (host name + pid) is unique per replica; a fixed one would
    turn `--scale action-worker=3` into one consumer shared by three processes."""
    for name, service in _services().items():
        assert "MEMORIA_CONSUMER_NAME" not in _environment(service), name
    for line in _compose_text().splitlines():
        code = line.split("#", 1)[0]
        assert "MEMORIA_CONSUMER_NAME" not in code, f"MEMORIA_CONSUMER_NAME set: {line.strip()}"


def test_dev_login_is_off_by_default() -> None:
    services = _services()
    for name in MEMORIA_SERVICES:
        value = _environment(services[name])["MEMORIA_DEV_LOGIN"]
        assert _interpolate(value, {}) == "false", name


@pytest.mark.parametrize("secret", REQUIRED_SECRETS)
def test_shared_secrets_are_required(secret: str) -> None:
    """Token and bus secrets must be the same in every replica: compose refuses to start
    without them rather than letting each container generate its own."""
    services = _services()
    for name in MEMORIA_SERVICES:
        value = _environment(services[name])[secret]
        match = _VARIABLE.fullmatch(value)
        assert match and match["name"] == secret and match["op"] == ":?", name
        with pytest.raises(LookupError):
            _interpolate(value, {})


def test_every_environment_name_is_a_setting() -> None:
    known = set(env_names())
    for name in MEMORIA_SERVICES:
        environment = _environment(_services()[name])
        assert environment, f"{name} has no environment"
        unknown = set(environment) - known
        assert not unknown, f"{name} sets names Settings does not read: {sorted(unknown)}"


def test_every_referenced_memoria_variable_is_a_setting_or_compose_only() -> None:
    known = set(env_names())
    assert not COMPOSE_ONLY & known, "a compose-only variable now names a setting"
    referenced = {name for name in _referenced_variables() if name.startswith("MEMORIA_")}
    unknown = referenced - known - COMPOSE_ONLY
    assert not unknown, f"not settings: {sorted(unknown)}"
    for name, service in _services().items():
        assert not COMPOSE_ONLY & set(_environment(service)), name


def test_no_bare_dollar_variables() -> None:
    """Only ${NAME} forms, which the checks above can see (and $$ escapes)."""
    for line in _compose_text().splitlines():
        assert not _BARE_VARIABLE.search(line.replace("$$", "")), line.strip()


def test_default_environment_is_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in set(env_names()):
        monkeypatch.delenv(name, raising=False)
    secret = "s" * 43
    for name in MEMORIA_SERVICES:
        for key, raw in _environment(_services()[name]).items():
            given = dict.fromkeys(REQUIRED_SECRETS, secret)
            monkeypatch.setenv(key, _interpolate(raw, given))
        settings = Settings.load(_env_file=None)
        assert settings.bus.redis_url == "redis://redis:6379/0"
        assert settings.storage.docstore_url == "mongodb://mongodb:27017/memoria"
        assert settings.storage.milvus_uri == "http://milvus:19530"
        assert settings.storage.vector_isolation == "partition_key"
        assert settings.telemetry.otel_exporter == "otlp"
        assert settings.telemetry.otel_endpoint == "http://otel-collector:4318"
        assert settings.telemetry.metrics_port == OPS_PORT
        assert settings.auth.dev_login is False
        assert settings.auth.auth_secret is not None
        assert settings.auth.auth_secret.get_secret_value() == secret
        assert settings.bus.bus_secret is not None
        assert settings.bus.bus_secret.get_secret_value() == secret
        assert settings.bus.consumer_name is None
        assert not settings.llm.gemini_api_key
        assert not settings.llm.openai_base_url


# -- .env.example --------------------------------------------------------------------------------


def test_every_variable_is_in_env_example() -> None:
    missing = _referenced_variables() - _env_example_names()
    assert not missing, f"add to .env.example: {sorted(missing)}"


def test_env_example_has_no_live_secret() -> None:
    """A copied .env.example changes nothing: an empty MEMORIA_AUTH_SECRET would be a
    secret of length zero for `memoria run`, which reads .env too."""
    text = ENV_EXAMPLE.read_text()
    assert "secrets.token_urlsafe(32)" in text, "say how to generate the secret"
    for line in text.splitlines():
        live = line.strip() and not line.lstrip().startswith("#")
        assert not live, f"uncommented line in .env.example: {line}"


# -- ports and volumes ---------------------------------------------------------------------------


def test_published_ports_are_bound_to_memoria_bind() -> None:
    publishing = set()
    for name, service in _services().items():
        for entry in _port_entries(service):
            publishing.add(name)
            if isinstance(entry, dict):
                assert entry.get("host_ip") == BIND, f"{name}: {entry}"
            else:
                assert str(entry).startswith(f"{BIND}:"), f"{name} publishes {entry} on all hosts"
    assert publishing == PUBLISHING


def test_gateway_publishes_its_port() -> None:
    ports = list(_port_entries(_services()["gateway"]))
    assert ports == [f"{BIND}:{GATEWAY_PORT}:{GATEWAY_PORT}"]


def test_data_lives_in_named_volumes_and_config_files_exist() -> None:
    declared = set(_compose().get("volumes") or {})
    for name, service in _services().items():
        for volume in service.get("volumes") or []:
            assert isinstance(volume, str), f"{name}: use the short syntax"
            source = volume.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert source.startswith("./deploy/compose/"), f"{name} mounts {source}"
                assert (ROOT / source).is_file(), f"{name} mounts missing {source}"
                assert volume.endswith(":ro"), f"{name}: mount config read-only"
            else:
                assert source in declared, f"{name} uses undeclared volume {source}"
    for store in ("redis", "mongodb", "etcd", "minio", "milvus", "prometheus"):
        assert _services()[store].get("volumes"), f"{store} keeps its data in no volume"


def test_third_party_images_are_pinned() -> None:
    for name, service in _services().items():
        if name in MEMORIA_SERVICES:
            continue
        image = service["image"]
        _, _, tag = image.rpartition(":")
        assert tag and "/" not in tag and tag != "latest", f"{name}: pin {image}"


# -- traces and metrics ------------------------------------------------------------------------


def _scrape_targets() -> dict[str, list[tuple[str, int, str]]]:
    """Service -> (job, port, how found) for every target in prometheus.yml."""
    config = yaml.safe_load(PROMETHEUS.read_text())
    targets: dict[str, list[tuple[str, int, str]]] = {}
    for job in config["scrape_configs"]:
        assert job.get("metrics_path", "/metrics") == "/metrics", job["job_name"]
        for sd in job.get("dns_sd_configs") or []:
            kind = sd.get("type", "SRV")
            for host in sd["names"]:
                targets.setdefault(host, []).append((job["job_name"], int(sd["port"]), kind))
        for static in job.get("static_configs") or []:
            for target in static["targets"]:
                host, _, port = target.rpartition(":")
                targets.setdefault(host, []).append((job["job_name"], int(port), "static"))
    return targets


def test_prometheus_scrapes_every_memoria_service() -> None:
    targets = _scrape_targets()
    for name in MEMORIA_SERVICES:
        expected = GATEWAY_PORT if name == "gateway" else OPS_PORT
        found = targets.get(name, [])
        assert found, f"Prometheus does not scrape {name}"
        assert len(found) == 1, f"{name} is scraped twice: {found}"
        _, port, kind = found[0]
        assert port == expected, f"{name} serves /metrics on {expected}, not {port}"
        # Every replica of a scaled service: one A record each on the compose network.
        assert kind == "A", f"{name}: use dns_sd_configs type A to find every replica"


def test_ops_port_in_compose_matches_prometheus() -> None:
    for name in MEMORIA_SERVICES:
        assert _environment(_services()[name])["MEMORIA_METRICS_PORT"] == str(OPS_PORT)


def test_collector_takes_otlp_http_and_sends_traces_to_jaeger() -> None:
    services = _services()
    for name in MEMORIA_SERVICES:
        environment = _environment(services[name])
        assert environment["MEMORIA_OTEL_EXPORTER"] == "otlp"
        assert environment["MEMORIA_OTEL_ENDPOINT"] == "http://otel-collector:4318"
    collector = services["otel-collector"]
    assert collector["image"].startswith("otel/opentelemetry-collector-contrib:")
    assert any(
        volume.startswith("./deploy/compose/otel-collector.yaml:/etc/otelcol-contrib/config.yaml")
        for volume in collector["volumes"]
    )
    config = yaml.safe_load(OTEL_COLLECTOR.read_text())
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "0.0.0.0:4318"
    pipeline = config["service"]["pipelines"]["traces"]
    assert pipeline["receivers"] == ["otlp"]
    endpoints = {config["exporters"][name]["endpoint"] for name in pipeline["exporters"]}
    assert "jaeger:4317" in endpoints
    assert all(name in config["processors"] for name in pipeline["processors"])
    assert services["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"


# -- the cluster profile ---------------------------------------------------------------------


def _cluster_nodes() -> dict[str, dict[str, Any]]:
    return {
        name: service for name, service in _services().items() if name.startswith("valkey-node-")
    }


def test_the_cluster_profile_runs_three_primaries_and_three_replicas() -> None:
    nodes = _cluster_nodes()
    assert len(nodes) == 6
    for name, node in nodes.items():
        assert node["profiles"] == ["cluster"], name
        assert node["hostname"] == name  # what it announces to the others
        command = " ".join(node["command"])
        for flag in ("--cluster-enabled yes", "--appendonly yes", "--maxmemory-policy noeviction"):
            assert flag in command, (name, flag)
        assert any(str(volume).endswith(":/data") for volume in node["volumes"]), name
    init = _services()["valkey-cluster"]
    assert init["profiles"] == ["cluster"]
    assert set(_depends_on(init)) == set(nodes)
    created = " ".join(init["command"])
    assert "--cluster-replicas 1" in created
    assert all(f"{name}:6379" in created for name in nodes)


def test_memoria_waits_for_the_cluster_only_on_its_profile() -> None:
    for name in MEMORIA_SERVICES:
        wanted = _services()[name]["depends_on"]["valkey-cluster"]
        assert wanted["condition"] == "service_completed_successfully", name
        assert wanted["required"] is False, name  # the default profile has no cluster


def test_the_example_cluster_url_names_every_node() -> None:
    text = ENV_EXAMPLE.read_text()
    (url,) = re.findall(r"MEMORIA_REDIS_URL=(redis://valkey-node-\S+)", text)
    named = set(re.findall(r"(valkey-node-\d+):6379", url))
    assert named == set(_cluster_nodes())
