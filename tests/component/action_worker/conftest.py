"""A harness per test, on the real Valkey of ``tests/conftest.py`` (plans are cached there)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from .harness import Harness


@pytest.fixture
def harness(redis: Redis) -> Harness:
    return Harness(redis=redis)
