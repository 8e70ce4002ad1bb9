"""What each service reads and writes on the bus, declared where it is wired: the source of
its AsyncAPI document (asyncapi.py). Every declaration belongs to a reader or a publisher
that runs; nothing is declared for the documents alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Operation = Literal["xadd", "xreadgroup", "xread"]


@dataclass(frozen=True, slots=True)
class Channel:
    """One use of a stream by a service: appending to it, reading it in a consumer group,
    or reading it without one (the gateway's fan-out)."""

    stream: str
    role: str  # "publish", the consumer group, or the name of a group-less reader
    operation: Operation
    description: str

    @property
    def key(self) -> str:
        return f"{self.stream}:{self.role}"
