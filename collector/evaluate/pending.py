"""The judge queue's rows in the shared store (``judge_pending``): which evaluation of which
closed revision waits for the judge, since when, and how often its call failed.  A restart
queues them again with the time each first waited (``judge.max_wait`` counts across
restarts; ``collector.state.startup`` reads them).  Each note is a write nobody waits for,
committed with the store's next group (``Spool.defer``), in SQL both dialects read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from collector.db.shared import Db
from collector.state.types import PendingJudge

_COLUMNS = ("key", "session", "revision", "evaluation", "enqueued_at", "lease_owner")


class DeferringStore(Protocol):
    """The part of ``collector.state.types.Spool`` the judge queue uses."""

    durable: bool
    replica: str

    def defer(self, work: Callable[[Db], Any]) -> None: ...


class StoredPending:
    """``collector.evaluate.runner.PendingWork`` kept in the store, each row held by the
    replica that queued it (``lease_owner``)."""

    def __init__(self, store: DeferringStore) -> None:
        self._store = store
        self.durable = store.durable

    def pending_add(self, rows: list[PendingJudge]) -> None:
        """Queued work (kept as first noted: a row queued again after a restart keeps its time)."""
        if not rows:
            return
        owner = self._store.replica
        values = [(*row, owner) for row in rows]
        self._store.defer(
            lambda db: db.insert("judge_pending", _COLUMNS, values, "ON CONFLICT (key) DO NOTHING")
        )

    def pending_failed(self, key: str, attempts: int, error: str) -> None:
        """A failed call of waiting work."""
        params = {"attempts": attempts, "error": error[:500], "key": key}
        self._store.defer(
            lambda db: db.execute(
                "UPDATE judge_pending SET attempts = :attempts, last_error = :error WHERE key = :key", params
            )
        )

    def pending_done(self, keys: list[str]) -> None:
        """Work that has its final row."""
        if keys:
            self._store.defer(lambda db: _delete(db, keys))


def _delete(db: Db, keys: list[str]) -> None:
    for start in range(0, len(keys), 256):
        names, params = db.in_("k", keys[start : start + 256])
        db.execute(f"DELETE FROM judge_pending WHERE key IN {names}", params)
