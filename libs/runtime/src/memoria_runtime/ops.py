"""The ops port of a service process (``MEMORIA_METRICS_PORT``): ``/metrics`` for Prometheus,
``/livez`` and ``/readyz`` (``/healthz`` = ``/readyz``) for orchestrators' probes.

It runs on a thread of its own, so it still answers - with "stalled" - when the event loop
does not, which is the point of a liveness probe.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

from memoria_runtime.health import Health, Verdict
from memoria_runtime.metrics import REGISTRY

log = logging.getLogger("memoria.ops")

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds
        pass


def _verdict_response(verdict: Verdict, start_response: StartResponse) -> list[bytes]:
    body = json.dumps({"status": verdict.status, **verdict.detail}).encode()
    start_response(
        "200 OK" if verdict.ok else "503 Service Unavailable",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def ops_app(health: Health) -> WsgiApp:
    metrics_app = make_wsgi_app(REGISTRY)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/livez":
            return _verdict_response(health.live(), start_response)
        if path in ("/readyz", "/healthz"):
            return _verdict_response(health.ready(), start_response)
        if path == "/metrics":
            result: Iterable[bytes] = metrics_app(environ, start_response)
            return result
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics, /livez or /readyz\n"]

    return app


def serve(port: int, health: Health, host: str = "0.0.0.0") -> Callable[[], None] | None:
    """Serve the ops endpoints on ``port``; returns how to stop them.

    A port that cannot be bound is logged, not raised: the service is worth more running
    without its ops port than not running at all (probes will say so)."""
    try:
        server = make_server(
            host, port, ops_app(health), server_class=_ThreadingServer, handler_class=_QuietHandler
        )
    except OSError as exc:
        log.error("cannot serve the ops port %d: %s", port, exc)
        return None
    thread = threading.Thread(target=server.serve_forever, name="memoria-ops", daemon=True)
    thread.start()
    log.info("ops on http://%s:%d (/metrics, /livez, /readyz)", host, port)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return stop
