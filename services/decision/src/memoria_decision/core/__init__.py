"""Decision's pure core: every decision of the thought cycle, no I/O.

:func:`~memoria_decision.core.machine.decide` is the one entry point; read it from there.
It imports only the contracts and plain-Python helpers (a test checks, in a fresh
interpreter)."""

from memoria_decision.core.machine import decide

__all__ = ["decide"]
