"""Fault-injection suite: services killed, the broker restarted, a hung model, poison events.

What each test does and the invariants it holds are described in docs/chaos.md.
"""
