"""The shared store's writer on PostgreSQL (``storage.shared``): one thread, one connection,
work committed in groups, off the event loop.

Each write runs under a savepoint of the group's transaction, so a bad one fails alone and
the group commits.  A group the server does not commit (a lost connection, a restart, a
serialization failure) is tried again on a new connection after a pause: writes nobody
waits for stay queued until they commit; a caller waiting for its write gets the error, as
from the SQLite writer (``collector.db.writer.is_storage_error`` says it is worth retrying:
the recorder waits and tries again).  The failure is logged once an outage and counted
(``Faults.write_failures``), but the replica stays ready: ingest needs only the local
request log, and sessions recorded late are recorded all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from collector.db.location import Location
from collector.db.shared import Db
from collector.db.writer import Faults, describe

log = logging.getLogger(__name__)
T = TypeVar("T")
_PER_GROUP = 256
_RETRY_EVERY = 1.0  # seconds between tries while the server does not answer
_Work = tuple[Callable[[Db], Any], "asyncio.Future[Any] | None", "asyncio.AbstractEventLoop | None"]
_STOP: _Work = (lambda db: None, None, None)


class SharedWriter:
    """The writer thread of the PostgreSQL database at ``location``."""

    def __init__(self, location: Location, faults: Faults) -> None:
        self.location = location
        self.faults = faults
        self.commits = 0
        self.unavailable: str | None = None  # why the server takes no writes now
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="skillgauge-shared", daemon=True)
        self._thread.start()

    def submit(self, work: Callable[[Db], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        self._queue.put((work, done, loop))
        return done

    def put(self, work: Callable[[Db], Any]) -> None:
        self._queue.put((work, None, None))

    async def stop(self, timeout: float) -> None:
        """Commit what is queued (while the server answers, up to ``timeout``), then stop."""
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join, timeout)
        self._stop.set()

    def _run(self) -> None:
        db: Db | None = None
        pending: list[_Work] = []
        stopping = False
        while True:
            if not pending:
                if stopping:
                    break
                pending.append(self._queue.get())
            while len(pending) < _PER_GROUP:
                try:
                    pending.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if _STOP in pending:
                stopping = True
                pending = [w for w in pending if w is not _STOP]
                if not pending:
                    break
            try:
                if db is None:
                    db = Db(self.location.connect_any(), "postgresql")
                outcomes = self._commit(db, pending)
            except Exception as err:  # the server or the connection: the group is tried again
                if db is not None:
                    with contextlib.suppress(Exception):
                        db.connection.close()
                db = None
                self._failed(err, pending)
                pending = [w for w in pending if w[1] is None]  # callers that wait got the error
                if self._stop.wait(_RETRY_EVERY):
                    break
                continue
            if self.unavailable is not None:
                log.warning("shared store: %s works again (%s before)", self.location, self.unavailable)
                self.unavailable = None
            for (_, done, loop), (value, error) in zip(pending, outcomes, strict=True):
                if done is not None and loop is not None:
                    loop.call_soon_threadsafe(_settle, done, value, error)
            pending = []
        if db is not None:
            with contextlib.suppress(Exception):
                db.connection.close()

    def _commit(self, db: Db, group: list[_Work]) -> list[tuple[Any, BaseException | None]]:
        outcomes: list[tuple[Any, BaseException | None]] = []
        alone = len(group) == 1  # no savepoint: what fails rolls back only itself anyway
        db.connection.execute("BEGIN")
        try:
            for work, _, _ in group:
                if not alone:
                    db.connection.execute("SAVEPOINT work")
                try:
                    outcomes.append((work(db), None))
                    if not alone:
                        db.connection.execute("RELEASE SAVEPOINT work")
                except Exception as err:
                    if _is_connection_error(err):
                        raise
                    db.connection.execute("ROLLBACK" if alone else "ROLLBACK TO SAVEPOINT work")
                    outcomes.append((None, err))
                    if alone:
                        return outcomes
            db.connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                db.connection.execute("ROLLBACK")
            raise
        self.commits += 1
        return outcomes

    def _failed(self, err: BaseException, group: list[_Work]) -> None:
        if self.unavailable is None:
            log.error(
                "shared store: %s does not take writes (%s); %d writes wait to be tried again",
                self.location,
                describe(err),
                sum(1 for w in group if w[1] is None),
            )
        self.unavailable = describe(err)
        self.faults.write_failures["write"] += 1
        for _, done, loop in group:
            if done is not None and loop is not None:
                loop.call_soon_threadsafe(_settle, done, None, err)


def _is_connection_error(err: BaseException) -> bool:
    import psycopg

    return isinstance(err, psycopg.OperationalError)


def _settle(done: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(value)
    else:
        done.set_exception(error)
