"""The judge queue's rows in the store (``judge_pending``): which evaluation of which closed
revision waits for the judge, since when, and how often its call failed.  A restart queues
them again with the time each first waited (``judge.max_wait`` counts across restarts;
``collector.state.startup`` reads them).  Each note is a write nobody waits for, committed
with the store's next group (``Spool.defer``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Protocol

from collector.db import sql
from collector.db.writer import Rows
from collector.state.types import PendingJudge

_INSERT = "INSERT OR IGNORE INTO judge_pending (key, session, revision, evaluation, enqueued_at)"


class DeferringStore(Protocol):
    """The part of ``collector.state.types.Spool`` the judge queue uses."""

    durable: bool

    def defer(self, work: Callable[[sqlite3.Connection], Any] | Rows) -> None: ...


class StoredPending:
    """``collector.evaluate.runner.PendingWork`` kept in the store."""

    def __init__(self, store: DeferringStore) -> None:
        self._store = store
        self.durable = store.durable

    def pending_add(self, rows: list[PendingJudge]) -> None:
        """Queued work (kept as first noted: a row queued again after a restart keeps its time)."""
        if rows:
            self._store.defer(Rows(_INSERT, list(rows)))

    def pending_failed(self, key: str, attempts: int, error: str) -> None:
        """A failed call of waiting work."""
        self._store.defer(
            lambda db: db.execute(
                "UPDATE judge_pending SET attempts = ?, last_error = ? WHERE key = ?",
                (attempts, error[:500], key),
            )
        )

    def pending_done(self, keys: list[str]) -> None:
        """Work that has its final row."""
        if keys:
            self._store.defer(
                lambda db: sql.where_in(db, "DELETE FROM judge_pending WHERE key IN ({in})", keys)
            )
