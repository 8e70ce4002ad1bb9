"""Decision's pure core: every decision of the thought cycle, no I/O; read it from
:func:`memoria_decision.core.machine.decide`."""
