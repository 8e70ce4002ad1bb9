"""Redis Streams plumbing: broker, publishers, group consumers, dead letters (ADR 0013,
ADR 0025)."""

from memoria_runtime.bus.broker import MemoriaBroker, create_broker
from memoria_runtime.bus.consumer import Delivery, EventHandler, subscribe_group
from memoria_runtime.bus.publisher import EventPublisher

__all__ = [
    "Delivery",
    "EventHandler",
    "EventPublisher",
    "MemoriaBroker",
    "create_broker",
    "subscribe_group",
]
