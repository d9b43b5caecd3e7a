"""The outbox: results waiting for a downstream acknowledgement.

Lifecycle of an entry: ``put`` (the result is recorded) -> ``peek`` (the sender reads the
oldest entries without removing them) -> ``ack`` (the downstream acknowledged them, or
refused them for good) -> gone.  An entry that is peeked but never acked is peeked again:
a crash or an outage between send and ack re-sends it, and the deterministic span id
(see ``encode``) lets the downstream deduplicate.

The interface is async and small on purpose, so a durable implementation (SQLite in WAL
mode, committed in the storage thread before ``put`` returns) can replace ``MemoryOutbox``
without touching the sender: it keeps the same four methods and the same ordering.
``MemoryOutbox`` keeps entries only as long as the process lives.

Bounded: when full, the oldest entries are dropped to make room, and ``put`` says how many,
so the caller can count them (``skillgauge_export_dropped_total{reason="queue_full"}``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Entry:
    key: str  # idempotency key: putting a key that is already waiting replaces it
    payload: bytes  # a serialized OTLP Span or LogRecord
    enqueued_at: float  # unix seconds, for the export lag


class Outbox(Protocol):
    async def put(self, entries: Sequence[Entry]) -> int:
        """Record entries; return how many older entries were dropped to stay bounded."""
        ...

    async def peek(self, limit: int) -> list[Entry]:
        """The oldest ``limit`` entries, oldest first, without removing them."""
        ...

    async def ack(self, keys: Iterable[str]) -> None:
        """Remove entries for good (acknowledged, or permanently refused)."""
        ...

    def __len__(self) -> int: ...

    async def close(self) -> None: ...


class MemoryOutbox:
    """An in-process, bounded, insertion-ordered outbox."""

    durable = False

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    async def put(self, entries: Sequence[Entry]) -> int:
        dropped = 0
        for entry in entries:
            self._entries.pop(entry.key, None)
            self._entries[entry.key] = entry
            if len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
                dropped += 1
        return dropped

    async def peek(self, limit: int) -> list[Entry]:
        out: list[Entry] = []
        for entry in self._entries.values():
            if len(out) >= limit:
                break
            out.append(entry)
        return out

    async def ack(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    async def close(self) -> None:
        return None
