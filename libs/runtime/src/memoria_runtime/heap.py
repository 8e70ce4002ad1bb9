"""The garbage collector in a long-running service.

A service starts with many thousands of container objects from its imports alone that live
as long as the process (modules, pydantic schemas, the embedding model's and the vector
index's objects, connection pools), and CPython's full collection walks every one of them
with the event loop stopped, which made the slowest cycles' whole tail in the cycle
benchmark (docs/adr/0017-freeze-startup-heap.md). Freezing them once the service is up
takes them out of every later collection; what a service allocates afterwards is collected
as before.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("memoria.runtime")


def freeze_startup_objects() -> int:
    """Collect what start-up left as garbage (frozen, it would never be freed), then move
    every object still alive out of the collector's reach. Returns how many were frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("%d objects of start-up frozen: out of every later garbage collection", frozen)
    return frozen
