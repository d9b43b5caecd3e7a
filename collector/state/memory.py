"""The spool's interface with nothing kept beyond the process (``storage.path: ":memory:"``;
replay): the service says so at startup."""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from collector.db import migrate, sql
from collector.db.writer import Faults, Rows
from collector.state import queries
from collector.state.types import (
    Closed,
    QuarantineReason,
    Recorded,
    Recovery,
    Reopenable,
    with_results,
)
from collector.status.view import SessionPage, SessionQuery

T = TypeVar("T")
# Retention: the same statements as the durable store's (``collector.state.store.EXPIRE``).
_EXPIRE = (
    "DELETE FROM coverage WHERE evaluated_at < ?",
    queries.EXPIRE,
)


class MemorySpool:
    """The spool's interface with nothing kept beyond the process.  Evaluated revisions are
    kept for the status API in an in-memory SQLite database with the spool's tables (the
    same queries answer), the latest ``revisions_capacity`` of them."""

    durable = False

    def __init__(self, outbox_capacity: int = 100_000, revisions_capacity: int = 10_000) -> None:
        self.unfinished: dict[tuple[str, int], int] = {}
        self.faults = Faults()
        self._db = sqlite3.connect(":memory:", isolation_level=None)
        migrate.create_in_memory(self._db)
        self._revisions_capacity = revisions_capacity
        # The revisions in ``coverage``, oldest saved first: the ones to let go are known
        # without counting or scanning the tables.
        self._kept: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._next = 0
        self.outbox_capacity = outbox_capacity
        self.outbox_counts: dict[str, int] = {}

    async def append(self, signal: str, payload: bytes, tenant: str = "") -> int:
        self._next += 1
        return self._next

    def record_closed(self, closed: Closed) -> None:
        self.unfinished[(closed.session, closed.revision)] = closed.first_request

    def keep_reopenable(self, entry: Reopenable) -> None:
        return None  # reopening reuses the evidence the assembler keeps in memory

    def forget_reopenable(self, session: str) -> None:
        return None

    async def read_requests(self, ids: tuple[int, ...]) -> list[tuple[int, str, bytes]]:
        return []

    async def save_result(self, key: str, session: str, revision: int, record: dict[str, Any]) -> None:
        return None

    async def save_coverage(self, revisions: list[Recorded]) -> None:
        now = time.time()
        rows = [(s, r, with_results(line, results), now) for s, r, results, line in revisions]
        kept, saved = self._kept, dict.fromkeys((s, r) for s, r, _, _ in revisions)
        # The oldest kept, beyond capacity once these are in (one saved again is not let go).
        over = len(kept) + sum(1 for key in saved if key not in kept) - self._revisions_capacity
        evicted = list(itertools.islice((key for key in kept if key not in saved), max(0, over)))
        with self._db:
            self._db.execute("BEGIN")
            queries.index_revisions(self._db, rows)
            queries.forget_revisions(self._db, evicted)
        for key in evicted:  # committed: the order follows the tables
            del kept[key]
        for key in saved:
            kept[key] = None
            kept.move_to_end(key)  # saved again: the newest now
        for session, revision, _, _ in revisions:
            self.unfinished.pop((session, revision), None)

    def defer(self, work: Callable[[sqlite3.Connection], Any] | Rows) -> None:
        """Run a write nobody waits for at once, in a transaction of the in-memory database."""
        with self._db:
            self._db.execute("BEGIN")
            if isinstance(work, Rows):
                sql.insert_rows(self._db, work.insert, work.rows)
            else:
                work(self._db)

    async def revisions(self, session: str, not_before: float) -> list[list[dict[str, Any]]]:
        return queries.revisions(self._db, session, not_before)

    async def sessions(self, query: SessionQuery, not_before: float) -> SessionPage:
        return queries.list_sessions(self._db, query, not_before)

    async def overview(self, since: float, not_before: float, tenant: str | None = None) -> dict[str, Any]:
        return queries.overview(self._db, since, not_before, tenant)

    async def transact(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in a transaction of the in-memory database; its result once committed."""
        with self._db:
            self._db.execute("BEGIN")
            return work(self._db)

    async def checkpoint(self, replay_from: int, keep_results_for: float | None = None) -> None:
        if keep_results_for is not None:
            cutoff = time.time() - keep_results_for
            with self._db:
                self._db.execute("BEGIN")
                expired = "SELECT session, revision FROM coverage WHERE evaluated_at < ?"
                keys = self._db.execute(expired, (cutoff,)).fetchall()
                for statement in _EXPIRE:
                    self._db.execute(statement, (cutoff,))
            for key in keys:  # committed: the order follows the tables, as in save_coverage
                self._kept.pop(key, None)

    def recovery(self) -> Recovery:
        return Recovery()

    def requests(self, from_id: int) -> Iterator[tuple[int, str, bytes, str]]:
        return iter(())

    def quarantine(
        self, request_id: int, signal: str, payload: bytes, reason: QuarantineReason, why: str
    ) -> None:
        self.faults.quarantined[reason] += 1

    def size_bytes(self) -> int:
        return 0

    async def shutdown(self, timeout: float = 10.0) -> None:
        return None
