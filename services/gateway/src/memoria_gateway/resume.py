"""Resuming a socket where the client left off: the order of live frames around a replay.

A resuming socket is registered for live frames *before* the replay is read, so nothing
published meanwhile can slip between the two. Live frames are held while the replay is sent,
and every live frame at or before the last replayed entry is dropped — then and afterwards,
because this replica's fan-out may still be behind the replay's read. The fan-out delivers
in stream order, so what is left goes out exactly once, in order.
"""

from __future__ import annotations

from memoria_runtime.bus.entry_id import EntryId


class LiveGate:
    """Decides, for each live frame of one socket, whether it goes out now, waits for the
    replay to be sent, or was replayed already."""

    def __init__(self) -> None:
        self._held: list[tuple[EntryId, str]] | None = None
        self._after: EntryId | None = None

    @property
    def holding(self) -> bool:
        return self._held is not None

    @property
    def held(self) -> int:
        return len(self._held or ())

    def hold(self) -> None:
        """Keep live frames back until :meth:`open` (a replay is about to be read)."""
        self._held = []

    def offer(self, entry_id: EntryId, text: str) -> bool:
        """A live frame arrived: True to send it now; False when it is held or dropped."""
        if self._after is not None and entry_id <= self._after:
            return False  # the replay had it
        if self._held is not None:
            self._held.append((entry_id, text))
            return False
        return True

    def release(self, after: EntryId | None) -> list[str]:
        """The replay was sent up to ``after`` (None: nothing to skip). Return the held
        frames that come later, in order, and keep holding: frames that arrive while these
        are queued wait for the next call, until one returns nothing and :meth:`open` is
        called without an await in between."""
        if after is not None and (self._after is None or after > self._after):
            self._after = after
        held, self._held = self._held or [], []
        return [text for entry_id, text in held if self._after is None or entry_id > self._after]

    def open(self) -> None:
        """Send live frames as they come (still dropping those the replay had)."""
        self._held = None
