"""The store the stages use (``Spool``), made of its owners' parts in two places:

* local to the replica, in the data directory's SQLite database (or an in-memory one,
  ``storage.path: ":memory:"``, replay: the same code, nothing kept beyond the process):
  the request log and the closed and reopenable revisions that replay it;
* shared: verdicts, evaluated revisions (what the status queries read), the judge queue and
  the export outbox.  In the same SQLite database by default; in PostgreSQL with
  ``storage.shared: postgresql://...``, written by a writer of its own
  (``collector.db.pgwriter``) when sessions are recorded, never on the ingest path.  Shared
  writes are functions of a ``collector.db.shared.Db``, in SQL both dialects read.

* ``collector.state.requestlog``: every accepted request, committed before it is
  acknowledged (segment files and the local ``spooled`` index);
* ``collector.state.revisions``: closed revisions, and the reopenable ones with the requests
  each keeps;
* ``collector.state.verdicts``: judge verdicts and evaluated revisions (with what the status
  queries read, ``collector.state.index``);
* the judge queue (``collector.evaluate.pending``, through ``defer``) and the export outbox
  (``collector.export.outbox``, through ``transact``) write their own tables.

Local writes go through one writer thread that commits them in groups (``collector.db.writer``);
a write that fails for want of storage makes the store unavailable until one succeeds again
(see there).  The tables are ``collector.db.schema``'s, made and migrated at start
(``collector.state.database``) after ``collector.state.vouch`` has found the file sound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from collector.db.location import Location
from collector.db.pgwriter import SharedWriter
from collector.db.shared import Db
from collector.db.writer import Faults, Rows, WriteKind, Writer
from collector.state import database, startup, verdicts
from collector.state.appended import index_tail
from collector.state.config import Storage
from collector.state.requestlog import RequestLog
from collector.state.reserve import Reserve, reserve_for
from collector.state.revisions import Revisions, unwritten_kept
from collector.state.segments import Segments, Sync, Write
from collector.state.types import Closed, QuarantineReason, Recorded, Recovery, Reopenable
from collector.state.vouch import StoreRefused

log = logging.getLogger(__name__)
T = TypeVar("T")
# Evaluated revisions the in-memory store keeps for the status API (the latest ones).
MEMORY_REVISIONS = 10_000


class Store:
    """The store of the data directory ``directory``, or in memory with ``directory`` None."""

    def __init__(
        self,
        directory: str | Path | None,
        outbox_capacity: int = 100_000,
        *,
        max_bytes: int | None = None,
        write: Write = os.write,
        sync: Sync | None = os.fdatasync,
        revisions_capacity: int = MEMORY_REVISIONS,
        shared: str | None = None,
        replica: str | None = None,
        lease_seconds: float = 30.0,
    ) -> None:
        """``max_bytes`` (``storage.max_bytes``) sizes segment files and the WAL to fit it;
        ``write`` is how segment bytes reach their file (``os.write``), ``sync`` how they are
        made durable before their acknowledgement (``os.fdatasync``; None: not synced,
        ``storage.sync`` off); in memory, only the latest ``revisions_capacity`` evaluated
        revisions are kept.  ``shared`` (``storage.shared``) puts the shared tables in that
        PostgreSQL database; ``replica`` names this replica there; the judge work it queues
        and the outbox entries it sends are leased to it for ``lease_seconds``
        (``storage.lease``), renewed while it lives."""
        self.unfinished: dict[tuple[str, int], int] = {}
        self.faults = Faults()
        self.outbox_capacity = outbox_capacity
        segment_bytes, wal_size_limit = database.sizes_for(max_bytes)
        segments: Segments | None = None
        if directory is None:
            self.location = database.open_memory()
            self._capacity: int | None = revisions_capacity if shared is None else None
        else:
            self.location = database.open_file(Path(directory))
            self._capacity = None
            segments = Segments(Path(directory) / "requests", segment_bytes, write, sync or os.fdatasync)
        self.durable = self.location.durable
        self.replica = replica or _replica_name(directory)
        self.lease_seconds = lease_seconds
        self._free_db_bytes = 0  # free pages in the database file, as of the last checkpoint
        try:
            self._recovery, next_id = startup.load_local(self.location, segments)
            self.shared = self.location if shared is None else database.open_shared(shared)
            self.outbox_counts = _once(
                self.shared, lambda db: startup.load_shared(db, self._recovery, self.replica, lease_seconds)
            )
        except sqlite3.DatabaseError as err:  # damage quick_check did not see: the same refusal
            raise StoreRefused(
                f"storage.path: refusing to start: the database {self.path} is damaged ({err}). "
                "Nothing was deleted. Run `skillgauge recover --config FILE` to rebuild it from the "
                f"request segments, or move {Path(str(directory))} aside to start with an empty store"
            ) from None
        if segments is not None and self.location.path is not None:
            # Frames a crash left with no row get theirs before anything reads the rows.
            next_id = index_tail(self.location.path, segments, next_id)
        quarantine = None if directory is None else Path(directory) / "quarantine"
        reserve = None if directory is None else Reserve(Path(directory), reserve_for(max_bytes), write)
        self.log = RequestLog(
            self.location,
            segments,
            self.faults,
            next_id,
            quarantine,
            synced=sync is not None,
            reserve=reserve,
        )
        self._writer = Writer(self.location, wal_size_limit, self.faults, self.log.probe, self.log.make_room)
        self.log.start(self._writer)
        self.revisions = Revisions(self._writer.put)
        for entry in unwritten_kept(self._recovery):  # written by the first checkpoint that needs them
            self.revisions.keep_reopenable(entry)
        self._shared_writer = None if shared is None else SharedWriter(self.shared, self.faults)
        self._writer.put(self.log.probe, "probe")  # a full disk at startup: unavailable from the start
        self.defer(startup.recount_outbox)  # before any put or ack; retried while storage fails

    @classmethod
    def in_memory(cls, outbox_capacity: int = 100_000, revisions_capacity: int = MEMORY_REVISIONS) -> Store:
        return cls(None, outbox_capacity, revisions_capacity=revisions_capacity)

    @property
    def path(self) -> Path | None:
        """The database file (None in memory)."""
        return self.location.path

    @property
    def commits(self) -> int:
        """Transactions committed so far."""
        return self._writer.commits

    # -- the request log ------------------------------------------------------------------------

    async def append(self, signal: str, payload: bytes, tenant: str = "") -> int:
        return await self.log.append(signal, payload, tenant)

    def requests(self, from_id: int) -> Iterator[tuple[int, str, bytes, str]]:
        return self.log.requests(from_id)

    async def read_requests(self, ids: tuple[int, ...]) -> list[tuple[int, str, bytes]]:
        return await self.log.read_requests(ids)

    def quarantine(
        self, request_id: int, signal: str, payload: bytes, reason: QuarantineReason, why: str
    ) -> None:
        self.log.quarantine(request_id, signal, payload, reason, why)

    # -- revisions ------------------------------------------------------------------------------

    def recovery(self) -> Recovery:
        return self._recovery

    def record_closed(self, closed: Closed) -> None:
        self.unfinished[(closed.session, closed.revision)] = closed.first_request
        self.revisions.record_closed(closed)

    def keep_reopenable(self, entry: Reopenable) -> None:
        if self.durable:  # in memory, reopening reuses the evidence the assembler keeps
            self.revisions.keep_reopenable(entry)

    def forget_reopenable(self, session: str) -> None:
        if self.durable:
            self.revisions.forget_reopenable(session)

    # -- verdicts and evaluated revisions -------------------------------------------------------

    async def save_result(self, key: str, session: str, revision: int, record: dict[str, Any]) -> None:
        await self.transact(verdicts.result_write(key, session, revision, record))

    async def save_coverage(
        self, revisions: list[Recorded], lines: list[dict[str, Any]] | None = None
    ) -> None:
        # One row holds a revision: its coverage line (a JSON object) with the results added
        # as "results".  Only judge verdicts are read back, and only for unfinished revisions
        # (``save_result``); a row per result, with three indexes each, cost ~30 us a session.
        later = [(session, revision) for session, revision, _, _ in revisions if revision > 1]
        if later:  # queued first: never committed after the lines that mark them done
            self.defer(verdicts.supersede(later))
        if revisions and self._shared_writer is not None:
            # The closed rows queued before these revisions closed commit first (the local
            # writer is in order): a restart that finds a revision evaluated in the shared
            # store finds it closed here too, and may reopen it whole.
            await self._writer.submit(_nothing)
        if revisions:  # with the writer's next gathered group: only the revisions' metrics wait
            await self.transact(verdicts.coverage_write(revisions, self._capacity, lines), soon=True)
        for session, revision, _, _ in revisions:
            self.unfinished.pop((session, revision), None)

    # -- what the judge queue and the outbox write through ---------------------------------------

    def defer(self, work: Callable[[Db], Any]) -> None:
        """Queue a write of the shared store nobody waits for (committed with a later group,
        in order; retried while storage fails)."""
        if self._shared_writer is not None:
            self._shared_writer.put(work)
        else:
            self._writer.put(lambda raw: work(Db(raw, "sqlite")))

    async def transact(self, work: Callable[[Db], T], *, soon: bool = False) -> T:
        """Run ``work`` in the shared store's next transaction; its result once committed.
        ``soon``: the local writer may wait to gather other work with it (``Writer.submit``)."""
        if self._shared_writer is not None:
            value: T = await self._shared_writer.submit(work)
            return value
        return await self._writer.submit(lambda raw: work(Db(raw, "sqlite")), soon=soon)

    def _submit(
        self, work: Callable[[sqlite3.Connection], T] | Rows, *, kind: WriteKind = "write"
    ) -> asyncio.Future[T]:
        return self._writer.submit(work, kind=kind)

    # -- upkeep ---------------------------------------------------------------------------------

    async def checkpoint(self, replay_from: int, keep_results_for: float | None = None) -> None:
        bounded = self._capacity is not None
        cutoff = None if keep_results_for is None else time.time() - keep_results_for

        def write(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO state (name, value) VALUES ('replay_from', ?)", (replay_from,))
            Revisions.expire(db, replay_from, cutoff)
            RequestLog.forget(db, replay_from)  # but the requests a reopenable revision holds

        if cutoff is not None:
            await self.transact(lambda db: verdicts.expire(db, cutoff, bounded))
        self.revisions.write_kept(replay_from)  # queued before the deletions below
        await self._writer.submit(write)

        def drop(db: sqlite3.Connection) -> None:
            # Files go once the rows that pointed into them are gone for good (committed above).
            self.log.drop_files(db)
            # Pages freed by deletions are reused before the file grows: not counted as used.
            (free,) = db.execute("PRAGMA freelist_count").fetchone()
            (page,) = db.execute("PRAGMA page_size").fetchone()
            self._free_db_bytes = int(free) * int(page)

        await self._writer.submit(drop)

    def size_bytes(self) -> int:
        """Bytes the store holds on disk, less the database's free pages (reused first)."""
        if self.path is None:
            return 0
        total = self.log.size_bytes() - self._free_db_bytes
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += Path(f"{self.path}{suffix}").stat().st_size
        return max(0, total)

    async def shutdown(self, timeout: float = 10.0) -> None:
        self.revisions.write_kept()  # a clean restart finds every kept revision's rows
        if self._shared_writer is not None:
            await self._shared_writer.stop(timeout)
        await self._writer.stop(timeout)
        self.log.close()
        self.location.close()


def open_spool(storage: Storage, outbox_capacity: int = 100_000) -> Store:
    """The store of ``storage.path`` (``":memory:"``: in memory) and ``storage.shared``."""
    path = None if storage.path == ":memory:" else storage.path
    store = Store(
        path,
        outbox_capacity,
        max_bytes=storage.max_bytes,
        sync=os.fdatasync if storage.sync else None,
        shared=storage.shared,
        lease_seconds=storage.lease,
    )
    if storage.shared is not None:
        log.info(
            "shared store: %s (the verdicts, sessions, judge queue and outbox of every replica); "
            "this replica is %s",
            store.shared,
            store.replica,
        )
    return store


def _replica_name(directory: str | Path | None) -> str:
    """This replica's name in the shared store: its host and data directory (what stays the
    same across its restarts), or its process in memory."""
    where = f"pid {os.getpid()}" if directory is None else str(Path(directory).resolve())
    return f"{socket.gethostname()}:{where}"


def _once(location: Location, read: Callable[[Db], T]) -> T:
    """``read`` in one transaction of a connection of its own (at start, before the writers)."""
    connection = location.connect_any()
    try:
        connection.execute("BEGIN")
        value = read(Db(connection, location.dialect))
        connection.execute("COMMIT")
        return value
    finally:
        connection.close()


def _nothing(db: sqlite3.Connection) -> None:
    """A write that commits nothing of its own: awaited, it waits for every write queued before."""
