"""Redis Streams plumbing (ADR 0013, ADR 0025): a service's bus (service_bus.py), publishers,
group consumers, dead letters, request/reply (request_reply.py, replies.py) and the typed
requests to the memory service (memory_requests.py)."""

from memoria_runtime.bus.consumer import Delivery, EventHandler, subscribe_group
from memoria_runtime.bus.publisher import EventPublisher
from memoria_runtime.bus.service_bus import ServiceBus, create_bus

__all__ = [
    "Delivery",
    "EventHandler",
    "EventPublisher",
    "ServiceBus",
    "create_bus",
    "subscribe_group",
]
