"""Run the gateway with uvicorn."""

from __future__ import annotations

import logging
import signal
from types import FrameType

import uvicorn

from memoria_gateway import SERVICE_NAME
from memoria_gateway.app import create_app
from memoria_gateway.dev_login import exposed_dev_login, host_name, is_loopback
from memoria_runtime import ops
from memoria_runtime.files import keep_files_private
from memoria_runtime.health import Health
from memoria_runtime.logs import configure_logging
from memoria_runtime.personas import PersonaConfigError
from memoria_runtime.settings import GatewayProcessSettings
from memoria_runtime.telemetry import setup_tracing

log = logging.getLogger("memoria.gateway")

# uvicorn closes a socket whose frame exceeds ws_max_size; keep that hard cap well above
# MEMORIA_MAX_FRAME_BYTES so an oversized frame gets an error frame and the socket lives.
_HARD_FRAME_CAP_FACTOR = 16


def _stop_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def exit_zero_after_a_stop_signal() -> None:
    """uvicorn shuts down gracefully on SIGTERM/SIGINT, then hands the signal back to the
    handler installed before it and raises it again; with the default one the process then
    dies of it (exit -15), a crash to any supervisor. Stopping on request is a clean exit."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop_cleanly)


def refuse_an_open_dev_login(settings: GatewayProcessSettings) -> None:
    """Stop here rather than serve a password-free login beyond this machine by accident."""
    hosts = settings.auth.dev_login_hosts
    problem = exposed_dev_login(settings.auth.dev_login, settings.gateway.gateway_host, hosts)
    if problem is not None:
        raise SystemExit(f"memoria {SERVICE_NAME}: cannot start: {problem}")
    if settings.auth.dev_login and not is_loopback(host_name(settings.gateway.gateway_host)):
        log.warning(
            "the dev login (no password) is on and answers on %s: whoever reaches the gateway "
            "under those names can log in as anyone",
            ", ".join(hosts),
        )


def main() -> None:
    exit_zero_after_a_stop_signal()
    keep_files_private()
    settings = GatewayProcessSettings.load()
    configure_logging(settings.telemetry.log_level)
    refuse_an_open_dev_login(settings)
    provider = setup_tracing(SERVICE_NAME, settings.telemetry)
    # The same ops port as every other service, so one image health check fits all four.
    health = Health()
    stop_ops = (
        ops.serve(settings.telemetry.metrics_port, health)
        if settings.telemetry.metrics_port
        else None
    )
    try:
        try:
            app = create_app(settings, provider, health, freeze_heap=True)
        except PersonaConfigError as exc:
            raise SystemExit(f"memoria {SERVICE_NAME}: {exc}") from None  # no traceback
        uvicorn.run(
            app,
            host=settings.gateway.gateway_host,
            port=settings.gateway.gateway_port,
            log_config=None,
            ws_max_size=settings.gateway.max_frame_bytes * _HARD_FRAME_CAP_FACTOR,
            ws_ping_interval=20.0,
        )
    finally:
        if stop_ops is not None:
            stop_ops()
        provider.shutdown()


if __name__ == "__main__":
    main()
