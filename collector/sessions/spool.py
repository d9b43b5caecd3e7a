"""The spool: every accepted OTLP request is committed to SQLite before it is acknowledged.

One writer thread owns the connection and commits in groups: requests that arrive while a
commit is running share the next one, so the event loop never waits on disk per request
and disk syncs stay few under load.  ``MemorySpool`` keeps nothing (``storage.path:
":memory:"``) and says so at startup.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    received_at REAL NOT NULL,
    signal TEXT NOT NULL,
    payload BLOB NOT NULL
);
"""
_MAX_GROUP = 512


class Spool(Protocol):
    durable: bool

    async def append(self, signal: str, payload: bytes) -> None:
        """Return once the request is durable (or at once, for a spool that is not)."""

    def size_bytes(self) -> int: ...

    async def shutdown(self, timeout: float = 10.0) -> None: ...


class MemorySpool:
    durable = False

    async def append(self, signal: str, payload: bytes) -> None:
        return None

    def size_bytes(self) -> int:
        return 0

    async def shutdown(self, timeout: float = 10.0) -> None:
        return None


_Item = tuple[str, bytes, asyncio.Future[None], asyncio.AbstractEventLoop]


class SqliteSpool:
    durable = True

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "spool.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="skillgauge-spool", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        self.commits = 0

    async def append(self, signal: str, payload: bytes) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queue.put((signal, payload, done, loop))
        await done

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += Path(f"{self.path}{suffix}").stat().st_size
        return total

    async def shutdown(self, timeout: float = 10.0) -> None:
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join, timeout)

    def _run(self) -> None:
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=True)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a process crash
            db.executescript(_SCHEMA)
        except sqlite3.Error as err:
            self._error = RuntimeError(f"storage.path: cannot open spool {self.path}: {err}")
            self._ready.set()
            return
        self._ready.set()
        stopping = False
        while not stopping:
            item = self._queue.get()
            if item is None:
                break
            group = [item]
            while len(group) < _MAX_GROUP:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stopping = True
                    break
                group.append(nxt)
            self._commit(db, group)
        db.close()

    def _commit(self, db: sqlite3.Connection, group: list[_Item]) -> None:
        now = time.time()
        error: BaseException | None = None
        try:
            db.execute("BEGIN")
            db.executemany(
                "INSERT INTO requests (received_at, signal, payload) VALUES (?, ?, ?)",
                [(now, signal, payload) for signal, payload, _, _ in group],
            )
            db.execute("COMMIT")
            self.commits += 1
        except sqlite3.Error as err:
            log.error("spool commit failed: %s", err)
            error = err
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        for _, _, done, loop in group:
            loop.call_soon_threadsafe(_settle, done, error)


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


def open_spool(path: str) -> Spool:
    if path == ":memory:":
        return MemorySpool()
    return SqliteSpool(path)
