"""The status API's reads of the shared store (every replica's sessions), several at once.

Each read runs on a connection of its own from a small pool, in a worker thread: a slow
listing of one tenant does not hold up another's page, and with the store's file in WAL
mode no read waits for the writer (in memory, a read waits for a commit under way).  The
queries are ``collector.status.listing``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from collector.db.location import Location
from collector.db.shared import Db
from collector.db.writer import describe, is_storage_error
from collector.state.types import Spool
from collector.status import listing
from collector.status.cluster import OpenAcross, merged
from collector.status.view import SessionPage, SessionQuery

T = TypeVar("T")
READERS = 4  # reads at once; more wait for a connection
RETRY_AFTER = 5  # seconds: when a client may ask again while the store is unavailable


# SQLite's (extended) result codes of a store that cannot be read now, by prefix.
_SQLITE_UNAVAILABLE = (
    "SQLITE_IOERR",
    "SQLITE_FULL",
    "SQLITE_CANTOPEN",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_CORRUPT",
    "SQLITE_NOTADB",
    "SQLITE_PROTOCOL",
)


class StoreUnavailable(Exception):
    """A read failed for want of the store (its server away, its disk failing): the status
    API answers 503 with this message, and asks again ``RETRY_AFTER`` seconds later."""


class ReaderPool:
    """Up to ``size`` read-only connections to ``location``, each used by one read at a time."""

    def __init__(self, location: Location, size: int = READERS) -> None:
        self._location = location
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Db] = []
        self._all: list[Db] = []

    def _connect(self) -> Db:
        location = self._location
        if location.dialect == "postgresql":
            db = Db(location.connect_any(), "postgresql")
        else:
            db = Db(location.connect(check_same_thread=False), "sqlite")
            db.connection.execute("PRAGMA query_only = 1")
        self._all.append(db)
        return db

    async def read(self, read: Callable[..., T], *args: Any) -> T:
        """``read(db, *args)`` in a worker thread, on a connection no other read holds (one
        that failed is let go: the next read opens another).  Raises ``StoreUnavailable``
        when the store cannot be read (connecting or reading)."""
        async with self._slots:
            try:
                db = self._idle.pop() if self._idle else await asyncio.to_thread(self._connect)
            except Exception as err:
                self._raise_if_unavailable(err)
                raise
            try:
                value = await asyncio.to_thread(read, db, *args)
            except Exception as err:
                self._all.remove(db)
                with contextlib.suppress(Exception):
                    db.connection.close()
                self._raise_if_unavailable(err)
                raise
            self._idle.append(db)
            return value

    def _raise_if_unavailable(self, err: Exception) -> None:
        """Raise ``err`` as ``StoreUnavailable`` when the store failed; return for another
        (a bug, which the caller raises as it is)."""
        if isinstance(err, sqlite3.Error):  # SQLite says more than its class: an SQL error is one too
            if not getattr(err, "sqlite_errorname", "").startswith(_SQLITE_UNAVAILABLE):
                return
        elif not is_storage_error(err):
            return
        where = "the shared store" if self._location.dialect == "postgresql" else "the store"
        raise StoreUnavailable(
            f"{where} {self._location} cannot be read now ({describe(err)}); retry later"
        ) from err

    def close(self) -> None:
        for db in self._all:
            db.connection.close()
        self._all.clear()
        self._idle.clear()


class StatusReads:
    """``revisions``, ``sessions`` and ``overview`` of the store's evaluated sessions; with
    replicas sharing the store, the other replicas' open sessions (``collector.status.cluster``)."""

    def __init__(self, store: Spool, size: int = READERS) -> None:
        self._pool = ReaderPool(store.shared, size)
        self._open = OpenAcross(store) if store.shared.dialect == "postgresql" else None

    def publish_open(self, local: Callable[[], list[dict[str, Any]]]) -> None:
        """Publish this replica's open sessions (``local()``) while it runs (replicas sharing a
        PostgreSQL only: on SQLite the store is this replica's alone)."""
        if self._open is not None:
            self._open.start(local)

    def with_others(
        self, local: list[dict[str, Any]], tenant: str | None, held: dict[str, str]
    ) -> list[dict[str, Any]]:
        """``local`` (this replica's open sessions of ``tenant``, each given ``held``: its
        ``replica`` and ``also_closed_by``) and the other replicas', soonest to close first."""
        mine = [{**row, **held} for row in local]
        if self._open is None:
            return mine
        return merged(mine, self._open.rows(tenant, held["also_closed_by"]))

    async def revisions(self, session: str, not_before: float) -> list[list[dict[str, Any]]]:
        return await self._pool.read(listing.revisions, session, not_before)

    async def sessions(self, query: SessionQuery, not_before: float) -> SessionPage:
        return await self._pool.read(listing.list_sessions, query, not_before)

    async def overview(self, since: float, not_before: float, tenant: str | None = None) -> dict[str, Any]:
        return await self._pool.read(listing.overview, since, not_before, tenant)

    def close(self) -> None:
        if self._open is not None:
            self._open.stop()
        self._pool.close()
