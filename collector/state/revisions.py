"""Closed revisions and reopenable revisions in the store.

* ``closed``: which session revisions closed, up to which request, over which traces (what a
  restart must replay for the ones not yet evaluated);
* ``reopenable`` and ``held``: which evaluated revisions later spans may reopen whole, and
  the requests each keeps from deletion.

Every write here is one nobody waits for, committed with the store's next group.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from collector.db import sql
from collector.db.writer import Rows
from collector.state.appended import QueuedRows
from collector.state.types import Closed, Reopenable

_INSERT_CLOSED = "INSERT OR REPLACE INTO closed (session, revision, reason, first_request, last_request, traces, closed_at)"

Put = Callable[[Callable[[sqlite3.Connection], Any] | Rows], None]


class Revisions:
    """Notes of closed and reopenable revisions, queued through ``put``."""

    def __init__(self, put: Put) -> None:
        self._closed_rows = QueuedRows(put, _INSERT_CLOSED)  # one queued write for all that wait
        # Keeps and forgets, in order: a wave of closed sessions costs a few statements, not a
        # few per session.
        self._reopen = QueuedRows(put, _write_reopen)

    def record_closed(self, closed: Closed) -> None:
        row = (
            closed.session,
            closed.revision,
            closed.reason,
            closed.first_request,
            closed.last_request,
            ",".join(closed.traces),
            time.time(),
        )
        self._closed_rows.add(row)

    def keep_reopenable(self, entry: Reopenable) -> None:
        self._reopen.add(entry)

    def forget_reopenable(self, session: str) -> None:
        self._reopen.add(session)

    @staticmethod
    def expire(db: sqlite3.Connection, replay_from: int, cutoff: float | None) -> None:
        """In the caller's transaction: closed-revision records no request from
        ``replay_from`` on needs, and reopenable revisions closed before ``cutoff``."""
        db.execute("DELETE FROM closed WHERE last_request < ?", (replay_from,))
        if cutoff is not None:
            db.execute(
                "DELETE FROM held WHERE session IN (SELECT session FROM reopenable WHERE closed_at < ?)",
                (cutoff,),
            )
            db.execute("DELETE FROM reopenable WHERE closed_at < ?", (cutoff,))


def _write_reopen(db: sqlite3.Connection, ops: list[Reopenable | str]) -> None:
    """Keeps (``Reopenable``) and forgets (a session), as each in turn, in four statements:
    first every session a forget names loses its rows, then each keep that follows its
    session's last forget is written (keeps and forgets alternate as closing sessions push
    the oldest out of ``reopen_cache``)."""
    forgotten: dict[str, int] = {}  # session -> position of its last forget
    for at, op in enumerate(ops):
        if isinstance(op, str):
            forgotten[op] = at
    kept = [
        op for at, op in enumerate(ops) if isinstance(op, Reopenable) and forgotten.get(op.session, -1) < at
    ]
    sessions = list(forgotten)
    sql.where_in(db, "DELETE FROM held WHERE session IN ({in})", sessions)
    sql.where_in(db, "DELETE FROM reopenable WHERE session IN ({in})", sessions)
    now = time.time()
    sql.insert_rows(
        db,
        "INSERT OR REPLACE INTO reopenable",
        [(e.session, e.revision, e.first_request, ",".join(e.traces), e.spans, now) for e in kept],
    )
    # A reopened revision's requests include the earlier one's: nothing to delete.
    sql.insert_rows(db, "INSERT OR IGNORE INTO held", [(r, e.session) for e in kept for r in e.requests])
