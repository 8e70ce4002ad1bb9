# Memoria — the two commands: `make install` then `make run`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

UV_VERSION ?= 0.13.9
TOOLS_DIR := .tools
# Prefer a uv already on PATH; otherwise bootstrap a pinned one into .tools (no root needed).
UV ?= $(shell command -v uv 2>/dev/null || echo $(TOOLS_DIR)/bin/uv)
VENV := .venv
PY := $(VENV)/bin/python
export UV_PYTHON_DOWNLOADS := never

.PHONY: help install run test test-unit test-component test-integration test-cluster test-browser test-containers chaos chaos-network soak lint lint-deploy images fmt bench docs clean

help: ## Show the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(TOOLS_DIR)/bin/uv:
	@python3 -m venv $(TOOLS_DIR) || { echo "python3 -m venv failed: on Debian/Ubuntu run 'apt install python3-venv'"; exit 1; }
	@$(TOOLS_DIR)/bin/pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

install: $(if $(filter $(TOOLS_DIR)/bin/uv,$(UV)),$(TOOLS_DIR)/bin/uv) ## Create .venv with every service, the embedded broker and dev tools
	$(UV) sync --frozen --all-packages
	@echo "Installed. Start Memoria with: make run"

run: ## Start the broker and the four services; open http://127.0.0.1:8000/
	$(VENV)/bin/memoria run

test: ## Run every test (unit, contract, integration); container suites skip without Docker
	$(PY) -m pytest -q

test-unit: ## tests/unit: fast, no process started (its conftest fails a test that starts one)
	$(PY) -m pytest -q tests/unit

test-component: ## tests/component and tests/contract: real Valkey, milvus-lite, SQLite, local servers; no services
	$(PY) -m pytest -q -m "not integration and not containers" tests/component tests/contract

test-integration: ## Tests that start the broker and the services as processes
	$(PY) -m pytest -q -m integration

test-cluster: ## The stack on a Valkey Cluster of 3 primaries + 3 replicas (6 valkey-server processes), primaries killed mid-run (make test runs a short one)
	MEMORIA_CLUSTER_CYCLES=$${MEMORIA_CLUSTER_CYCLES:-36} $(PY) -m pytest -q -m cluster tests/cluster

test-browser: ## The web chat in Debian's chromium (skipped without one: sudo apt install chromium)
	$(PY) -m pytest -q -m browser tests/browser

test-containers: ## testcontainers suites (need a Docker engine)
	$(PY) -m pytest -q -m containers

chaos: ## The fault suite and the API's schema run, long (200 chaos cycles, 100 examples an operation; make test runs short ones)
	MEMORIA_CHAOS_CYCLES=$${MEMORIA_CHAOS_CYCLES:-200} $(PY) -m pytest -q -m chaos tests/chaos
	MEMORIA_SCHEMA_EXAMPLES=$${MEMORIA_SCHEMA_EXAMPLES:-100} $(PY) -m pytest -q tests/abuse/test_schema.py -o timeout=3600

chaos-network: ## Network faults, long run: latency, resets, partitions, 1000 cycles each (MEMORIA_CHAOS_CYCLES)
	MEMORIA_CHAOS_CYCLES=$${MEMORIA_CHAOS_CYCLES:-1000} $(PY) -m pytest -q -rP tests/chaos/test_network.py

soak: ## An hour of steady load with RSS, streams, pending and p50/p95 every 5 min (MEMORIA_SOAK_MINUTES)
	$(PY) bench/soak.py --minutes $${MEMORIA_SOAK_MINUTES:-60}

lint: lint-deploy ## ruff (lint + format check), mypy, and the deployment files (offline)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

$(TOOLS_DIR)/bin/kubectl:
	$(PY) tools/fetch_kubectl.py $@

lint-deploy: $(TOOLS_DIR)/bin/kubectl ## docker-compose.yml (schema + docker-compose config), Dockerfile (hadolint), k8s overlays (kustomize, k8s + KEDA schemas)
	$(PY) tools/check_deploy.py --kubectl $(TOOLS_DIR)/bin/kubectl

IMAGE ?= memoria:latest
images: ## Build the one image all four services run (needs a Docker engine)
	@command -v docker >/dev/null || { echo "make images needs docker (https://docs.docker.com/engine/install/)"; exit 1; }
	docker build -t $(IMAGE) .

fmt: ## Apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# cycle_overhead.py runs last: its "guard: … holds" lines end the output, and a broken guard
# (exit status 1) stops no other benchmark.
bench: ## Every benchmark of docs/benchmarks.md, each on its own fresh servers (~15 min on 2 cores); ends with the cycle-overhead regression guards, failing if one breaks
	$(PY) bench/bus_floor.py
	$(PY) bench/throughput.py
	$(PY) bench/prompt_tokens.py
	$(PY) bench/load.py
	$(PY) bench/memory_search.py
	$(PY) bench/embedding_contention.py
	$(PY) bench/thread_stats.py
	$(PY) bench/replay_scan.py
	$(PY) bench/sqlite_writes.py
	$(PY) bench/cycle_overhead.py

docs: ## Regenerate docs/asyncapi/*.yaml, the settings table of docs/configuration.md and the cluster overlay's KEDA triggers
	$(VENV)/bin/memoria docs

clean: ## Remove the environment and caches (keeps your data directory)
	rm -rf $(VENV) $(TOOLS_DIR) .mypy_cache .pytest_cache .ruff_cache
