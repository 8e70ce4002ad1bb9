"""Identifiers: time-ordered, URL-safe, prefixed with what they name."""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
_TIME_CHARS = 10  # 50 bits: milliseconds for the next 35,000 years
_RANDOM_CHARS = 16  # 80 bits
_RANDOM_BYTES = 10


class _Sequence:
    """The last (millisecond, random part) handed out, so ids made in one millisecond count
    up instead of sorting at random."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._millis = 0
        self._random = 0

    def next(self) -> tuple[int, int]:
        with self._lock:
            millis = time.time_ns() // 1_000_000
            if millis <= self._millis:
                self._random += 1
            else:
                self._millis = millis
                # the top bit stays clear, leaving room to count up within the millisecond
                self._random = int.from_bytes(os.urandom(_RANDOM_BYTES), "big") >> 1
            return self._millis, self._random


_sequence = _Sequence()


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, index = divmod(value, 32)
        chars.append(_ALPHABET[index])
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    """Return ``prefix_`` + 26 characters that sort in creation order (ms time + randomness).

    Within one millisecond the random part counts up, so ids made by one process sort in the
    order they were made; ids from different processes sort by time.
    """
    millis, randomness = _sequence.next()
    return f"{prefix}_{_encode(millis, _TIME_CHARS)}{_encode(randomness, _RANDOM_CHARS)}"
