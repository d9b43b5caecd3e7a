"""The status API's reads of the shared store, several at once.

With the store in a SQLite file (WAL), each read runs on a connection of its own from a
small pool, in a worker thread: a slow listing of one tenant does not hold up another's
page, and no read waits for the writer.  Any other store (in memory, or one without a file)
is read through its own methods, as before.

This sits beside the store rather than in it while the store's own read path is rebuilt;
it reads through the store's query functions (``collector.state.queries``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from collector.state import queries
from collector.state.store import Spool
from collector.status.view import SessionPage, SessionQuery

T = TypeVar("T")
READERS = 4  # reads at once; more wait for a connection


class ReaderPool:
    """Up to ``size`` read-only connections to ``path``, each used by one read at a time."""

    def __init__(self, path: Path, size: int = READERS) -> None:
        self._path = path
        self._slots = asyncio.Semaphore(size)
        self._idle: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = []

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self._path, check_same_thread=False)
        connection.execute("PRAGMA query_only = 1")
        self._all.append(connection)
        return connection

    async def read(self, read: Callable[..., T], *args: Any) -> T:
        """``read(connection, *args)`` in a worker thread, on a connection no other read holds."""
        async with self._slots:
            connection = self._idle.pop() if self._idle else self._connect()
            try:
                return await asyncio.to_thread(read, connection, *args)
            finally:
                self._idle.append(connection)

    def close(self) -> None:
        for connection in self._all:
            connection.close()
        self._all.clear()
        self._idle.clear()


class StatusReads:
    """``revisions``, ``sessions`` and ``overview`` as the store answers them, on a
    ``ReaderPool`` when the store is a durable file."""

    def __init__(self, store: Spool, size: int = READERS) -> None:
        self._store = store
        path = getattr(store, "path", None)
        self._pool = ReaderPool(path, size) if store.durable and isinstance(path, Path) else None

    async def revisions(self, session: str, not_before: float) -> list[list[dict[str, Any]]]:
        if self._pool is None:
            return await self._store.revisions(session, not_before)
        return await self._pool.read(queries.revisions, session, not_before)

    async def sessions(self, query: SessionQuery, not_before: float) -> SessionPage:
        if self._pool is None:
            return await self._store.sessions(query, not_before)
        return await self._pool.read(queries.list_sessions, query, not_before)

    async def overview(self, since: float, not_before: float, tenant: str | None = None) -> dict[str, Any]:
        if self._pool is None:
            return await self._store.overview(since, not_before, tenant)
        return await self._pool.read(queries.overview, since, not_before, tenant)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
