"""The gateway's parts: broker with the chat.out fan-out, thread gate, intake, sockets."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from memoria_contracts.streams import Stream
from memoria_gateway import SERVICE_NAME
from memoria_gateway.fan_out import ChatOutFanOut
from memoria_gateway.hub import ConnectionHub
from memoria_gateway.intake import Intake
from memoria_gateway.quiet_cycles import QuietCycleNotices
from memoria_gateway.replay import ChatOutLog
from memoria_gateway.routing import UserRoutes
from memoria_gateway.user_rate_limit import HTTP_REQUESTS, WS_MESSAGES, UserRateLimit
from memoria_runtime import redis_clients
from memoria_runtime.auth import TokenIssuer
from memoria_runtime.bus import ServiceBus, create_bus
from memoria_runtime.bus.channels import Channel
from memoria_runtime.bus.memory_requests import MemoryClient
from memoria_runtime.bus.signing import Signer, signer_for
from memoria_runtime.bus.thread_gate import ThreadGate
from memoria_runtime.settings import GatewayProcessSettings

log = logging.getLogger("memoria.gateway")

# redis-py's default pool holds at most 100 connections and refuses the 101st command in
# flight ("Too many connections"): 200 sockets sending at once got broker_unavailable. The
# gateway keeps that cap (for the broker's sake) but a burst waits for a free connection.
REDIS_POOL_SIZE = 100
REDIS_POOL_WAIT_S = 10.0


@dataclass
class Gateway:
    """Everything the routes need; the token issuer is set at start-up (it may create the
    secret file)."""

    settings: GatewayProcessSettings
    broker: ServiceBus
    redis: Any
    intake: Intake
    memory: MemoryClient
    chat_out: ChatOutLog
    signer: Signer
    routes: UserRoutes
    hub: ConnectionHub
    quiet: QuietCycleNotices
    issuer: TokenIssuer | None = None
    # Per user, across gateways (None: no limit): HTTP API requests, and chat messages over
    # all of a user's sockets.
    requests: UserRateLimit | None = None
    messages: UserRateLimit | None = None

    def tokens(self) -> TokenIssuer:
        if self.issuer is None:
            raise RuntimeError("the gateway has not started")
        return self.issuer


def build_broker(
    settings: GatewayProcessSettings, provider: TracerProvider | None = None
) -> tuple[ServiceBus, Gateway]:
    broker = create_bus(settings.bus, tracer_provider=provider, service=SERVICE_NAME)
    redis = redis_clients.connect_bounded(
        settings.bus, max_connections=REDIS_POOL_SIZE, wait_s=REDIS_POOL_WAIT_S
    )
    gate = ThreadGate(
        redis,
        lock_ttl_s=settings.cycle.thread_lock_ttl_s,
        stream_maxlen=settings.bus.stream_maxlen,
        partitions=settings.bus.partitions,
    )
    signer = signer_for(settings.bus)
    hub = ConnectionHub()
    gateway = Gateway(
        settings=settings,
        broker=broker,
        redis=redis,
        intake=Intake(settings.gateway, gate, signer),
        memory=MemoryClient(broker, settings.bus),
        chat_out=ChatOutLog(redis, broker.message_format, signer, settings.bus.partitions),
        signer=signer,
        routes=UserRoutes(
            redis,
            settings.bus.partitions,
            settings.bus.consumer,
            routed=settings.bus.routed_fan_out,
        ),
        hub=hub,
        quiet=QuietCycleNotices(hub, redis, settings.gateway.cycle_quiet_status_seconds),
        requests=_user_limit(
            redis, settings, settings.gateway.http_requests_per_minute, HTTP_REQUESTS
        ),
        messages=_user_limit(
            redis, settings, settings.gateway.ws_user_messages_per_minute, WS_MESSAGES
        ),
    )
    # The thread gate's script appends these, atomically with the thread's lock and queue.
    broker.declare(
        Channel(
            Stream.CHAT_IN.value,
            "publish",
            "xadd",
            "A user message whose thread is free (later ones wait in its queue).",
        )
    )

    # starts and stops with the broker
    ChatOutFanOut(
        broker,
        signer,
        gateway.hub,
        gateway.routes,
        cluster=settings.bus.redis_cluster,
        retention_s=settings.bus.stream_retention_seconds,
    )
    return broker, gateway


def _user_limit(
    redis: Any, settings: GatewayProcessSettings, per_minute: int, counted: str
) -> UserRateLimit | None:
    if not per_minute:
        return None
    cluster_url = settings.bus.effective_redis_url if settings.bus.redis_cluster else None
    return UserRateLimit(redis, per_minute, counted, cluster_url=cluster_url)
