"""The outbox: results waiting for a downstream acknowledgement.

Lifecycle of an entry: ``put`` (the result is recorded) -> ``peek`` (the sender reads the
oldest entries without removing them) -> ``ack`` (the downstream acknowledged them, or
refused them for good) -> gone.  An entry that is peeked but never acked is peeked again:
a crash or an outage between send and ack re-sends it, and the deterministic span id
(see ``encode``) lets the downstream deduplicate.

The interface is async and small on purpose, so a durable implementation (SQLite in WAL
mode, committed in the storage thread before ``put`` returns) can replace ``MemoryOutbox``
without touching the sender: it keeps the same four methods and the same ordering.
``MemoryOutbox`` keeps entries only as long as the process lives; ``SpoolOutbox`` keeps them
in the spool's SQLite database, committed before ``put`` returns, so a restart resends them.

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
        for entry in entries:
            self._entries.pop(entry.key, None)
            self._entries[entry.key] = entry
        dropped = max(0, len(self._entries) - self.capacity)
        for _ in range(dropped):
            self._entries.popitem(last=False)
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


class SpoolOutbox:
    """The outbox of one channel, kept in the spool (durable with the SQLite spool)."""

    def __init__(self, spool: SpoolStore, channel: str) -> None:
        self._spool = spool
        self._channel = channel
        self.durable = spool.durable

    async def put(self, entries: Sequence[Entry]) -> int:
        return await self._spool.outbox_put(
            self._channel, [(e.key, e.payload, e.enqueued_at) for e in entries]
        )

    async def peek(self, limit: int) -> list[Entry]:
        return [Entry(k, p, t) for k, p, t in await self._spool.outbox_peek(self._channel, limit)]

    async def ack(self, keys: Iterable[str]) -> None:
        await self._spool.outbox_ack(self._channel, list(keys))

    def __len__(self) -> int:
        return self._spool.outbox_len(self._channel)

    async def close(self) -> None:
        return None


class SpoolStore(Protocol):
    """The part of ``collector.state.store.Spool`` an outbox uses."""

    durable: bool

    async def outbox_put(self, channel: str, entries: list[tuple[str, bytes, float]]) -> int: ...

    async def outbox_peek(self, channel: str, limit: int) -> list[tuple[str, bytes, float]]: ...

    async def outbox_ack(self, channel: str, keys: list[str]) -> None: ...

    def outbox_len(self, channel: str) -> int: ...
