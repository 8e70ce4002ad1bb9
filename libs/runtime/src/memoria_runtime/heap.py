"""The garbage collector in a long-running service.

A service starts with about 80,000 to 140,000 container objects from its imports alone
that live as long as the process (modules, pydantic schemas, the embedding model's and the
vector index's objects, connection pools), and CPython's full collection walks every one of
them: 25–51 ms with the event loop stopped, once or twice per service in a 25-second
benchmark run, which was the slowest cycles' whole tail (``docs/benchmarks.md``, "objects
of start-up frozen"). Freezing them once the service is up takes them out of every later
collection; what a service allocates afterwards is collected as before.
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
