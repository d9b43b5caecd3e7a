"""The outbox: results waiting for a downstream acknowledgement.

Lifecycle of an entry: ``put`` (the result is recorded) -> ``peek`` (the sender reads the
oldest entries without removing them; in the store, it leases them to its replica) -> ``ack``
(the downstream acknowledged them, or refused them for good) -> gone.  Replicas sharing one
store (``storage.shared``) each send what they lease; the entries of one that died are
leased by another once its lease lapses.  An entry that is peeked but never acked is peeked again:
a crash or an outage between send and ack re-sends it, and the deterministic span id
(see ``encode``) lets the downstream deduplicate.

The interface is async and small on purpose, so a durable implementation (SQLite in WAL
mode, committed in the storage thread before ``put`` returns) can replace ``MemoryOutbox``
without touching the sender: it keeps the same four methods and the same ordering.
``MemoryOutbox`` keeps entries only as long as the process lives; ``SpoolOutbox`` keeps them
in the shared store (the data directory's SQLite database, or ``storage.shared``'s
PostgreSQL), committed before ``put`` returns, so a restart resends them.

Bounded: when full, the oldest entries are dropped to make room, and ``put`` says how many,
so the caller can count them (``skillgauge_export_dropped_total{reason="queue_full"}``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from collector.db.location import Location
from collector.db.shared import Db


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
    """The outbox of one channel, kept in the store's ``outbox`` table through its
    transactions (``Spool.transact``), in SQL both dialects read.  Each channel's row count
    is kept in ``outbox_rows`` by the transactions that change it: a put or an ack reads only
    its own keys, however many entries wait."""

    def __init__(self, store: SpoolStore, channel: str) -> None:
        self._store = store
        self._channel = channel
        self.durable = store.durable
        # Replicas sharing the store: how often an idle sender looks for entries (``refresh``).
        self.poll_every = store.lease_seconds if store.shared.dialect == "postgresql" else None

    async def refresh(self) -> None:
        """Read the channel's row count again (entries other replicas put or left)."""
        channel = self._channel
        rows = await self._store.transact(
            lambda db: db.rows("SELECT count FROM outbox_rows WHERE channel = :channel", {"channel": channel})
        )
        self._store.outbox_counts[channel] = int(rows[0][0]) if rows else 0

    async def put(self, entries: Sequence[Entry]) -> int:
        channel, capacity = self._channel, self._store.outbox_capacity
        latest: dict[str, Entry] = {}
        for entry in entries:  # a key put twice: its last entry, in its place
            latest.pop(entry.key, None)
            latest[entry.key] = entry
        rows = [(channel, e.key, e.payload, e.enqueued_at) for e in latest.values()]

        def write(db: Db) -> tuple[int, int]:
            keys = list(latest)
            waiting = _delete(db, channel, keys)  # a key put again replaces its entry, at the end of the line
            db.insert("outbox", ("channel", "key", "payload", "enqueued_at"), rows)
            count = _count_add(db, channel, len(keys) - waiting)
            over = max(0, count - capacity)
            if over:
                dropped = db.execute(
                    "DELETE FROM outbox WHERE seq IN "
                    "(SELECT seq FROM outbox WHERE channel = :channel ORDER BY seq LIMIT :over)",
                    {"channel": channel, "over": over},
                ).rowcount
                count = _count_add(db, channel, -dropped)
            return count, over

        length, dropped = await self._store.transact(write)
        self._store.outbox_counts[channel] = length
        return dropped

    async def peek(self, limit: int) -> list[Entry]:
        """The oldest ``limit`` entries this replica may send: free ones, its own, and those
        whose lease lapsed (a replica that died); each is leased to it for
        ``store.lease_seconds`` again (a live replica renews what it peeks).  On PostgreSQL
        rows another replica is leasing right now are skipped, not waited for."""
        channel, owner, lease = self._channel, self._store.replica, self._store.lease_seconds

        def claim(db: Db) -> list[Entry]:
            now = time.time()
            skip_locked = " FOR UPDATE SKIP LOCKED" if db.dialect == "postgresql" else ""
            rows = db.rows(
                "UPDATE outbox SET lease_owner = :owner, lease_expires = :until WHERE seq IN "
                "(SELECT seq FROM outbox WHERE channel = :channel AND (lease_owner IS NULL OR "
                "lease_owner = :owner OR lease_expires < :now) ORDER BY seq LIMIT :limit"
                f"{skip_locked}) RETURNING seq, key, payload, enqueued_at",
                {"owner": owner, "until": now + lease, "channel": channel, "now": now, "limit": limit},
            )
            return [
                Entry(str(k), bytes(p), float(t)) for _, k, p, t in sorted(rows, key=lambda row: int(row[0]))
            ]

        return await self._store.transact(claim)

    async def ack(self, keys: Iterable[str]) -> None:
        channel, acked_keys = self._channel, list(keys)

        def write(db: Db) -> int:
            return _count_add(db, channel, -_delete(db, channel, acked_keys))

        self._store.outbox_counts[channel] = await self._store.transact(write)

    def __len__(self) -> int:
        return self._store.outbox_counts.get(self._channel, 0)

    async def close(self) -> None:
        return None


_CHUNK = 256  # keys a statement


def _delete(db: Db, channel: str, keys: list[str]) -> int:
    """Delete the entries of ``keys`` on ``channel``, in chunks; how many there were."""
    deleted = 0
    for start in range(0, len(keys), _CHUNK):
        names, params = db.in_("k", keys[start : start + _CHUNK])
        deleted += db.execute(
            f"DELETE FROM outbox WHERE key IN {names} AND channel = :channel",
            {**params, "channel": channel},
        ).rowcount
    return deleted


def _count_add(db: Db, channel: str, change: int) -> int:
    """Add ``change`` to the channel's row count (``outbox_rows``) in the caller's
    transaction, so that a group rolled back takes its changes back too; returns the count."""
    (count,) = db.execute(
        "INSERT INTO outbox_rows (channel, count) VALUES (:channel, :change) "
        "ON CONFLICT (channel) DO UPDATE SET count = outbox_rows.count + excluded.count RETURNING count",
        {"channel": channel, "change": change},
    ).fetchone()
    return int(count)


T = TypeVar("T")


class SpoolStore(Protocol):
    """The part of ``collector.state.types.Spool`` an outbox uses."""

    durable: bool
    replica: str  # who leases the entries it peeks
    lease_seconds: float
    shared: Location
    outbox_capacity: int
    outbox_counts: dict[str, int]

    async def transact(self, work: Callable[[Db], T]) -> T: ...
