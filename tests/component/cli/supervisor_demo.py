"""A supervisor of throwaway children, run as its own process by the signal tests.

Usage: ``python supervisor_demo.py GRACE_SECONDS NAME:KIND [NAME:KIND ...]`` where KIND is
``polite`` (exits on SIGTERM) or ``stubborn`` (ignores SIGTERM). Every child says which
signals it receives, so a test can tell whether a raw Ctrl-C reached it.
"""

from __future__ import annotations

import asyncio
import sys

from memoria_cli.supervisor import ProcessSpec, Supervisor

CHILD = """
import signal, sys, time
name, kind = sys.argv[1], sys.argv[2]

def on_signal(sig, _frame):
    print(f"{name} got {signal.Signals(sig).name}", flush=True)
    if sig == signal.SIGTERM and kind == "polite":
        sys.exit(0)

signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
print(f"{name} up", flush=True)
while True:
    time.sleep(0.05)
"""


def main(argv: list[str]) -> int:
    grace = float(argv[0])
    specs = []
    for item in argv[1:]:
        name, kind = item.split(":")
        specs.append(ProcessSpec(name=name, argv=[sys.executable, "-c", CHILD, name, kind]))
    supervisor = Supervisor(specs, label="demo", color=False, grace_period=grace)
    return asyncio.run(supervisor.run())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
