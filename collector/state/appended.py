"""Requests appended on the event loop, their rows indexed by the writer thread after.

An acknowledgement waits for the request's frame to be written to its segment file
(``Segments.append``, on the loop: a write the kernel holds once it returns, so ``kill -9``
loses nothing), not for the writer thread: a commit there would make each acknowledgement
wait for that thread to win the GIL back from the busy loop after each SQLite call.  Each
frame names its request id, and the rows that index the frames (``spooled``) are queued
and written by one queued write for all that wait, as a multi-row INSERT.

A process that dies before a row is committed leaves its frame with no row: at the next
start ``index_tail`` reads the frames after the last row and indexes them, before anything
is replayed.

Segment files are dropped (``drop_before``) only behind every row: the rows committed and
the rows queued, read under the segments' lock, which an append holds until its row is
queued.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collector.db import sql
from collector.state.segments import Frame, Segments, Spooled

_INSERT = 'INSERT OR IGNORE INTO spooled (id, received_at, signal, segment, "offset", length, tenant)'
Row = tuple[int, float, str, int, int, int, str]


class QueuedRows:
    """Rows for one INSERT (or items for one ``write(db, items)``, in order), queued from any
    thread and written by one queued write for all that wait (``put`` queues work for the
    writer thread, which retries it while storage fails): a row costs the writer no wake-up
    of its own."""

    def __init__(
        self,
        put: Callable[[Callable[[sqlite3.Connection], Any]], None],
        insert: str | Callable[[sqlite3.Connection, list[Any]], None],
    ) -> None:
        self._put = put
        self._insert = insert
        self.rows: list[Any] = []  # queued, not yet inserted
        self.lock = threading.Lock()  # ``rows``: callers add, the writer takes

    def add(self, row: Any) -> None:
        with self.lock:
            self.rows.append(row)
            first = len(self.rows) == 1
        if first:
            self._put(self._write)

    def _write(self, db: sqlite3.Connection) -> None:
        with self.lock:
            rows, self.rows = self.rows, []
        try:
            if isinstance(self._insert, str):
                sql.insert_rows(db, self._insert, rows)
            else:
                self._insert(db, rows)
        except BaseException:  # this write is tried again (a full disk): the same rows, first
            with self.lock:
                self.rows[:0] = rows
            raise


class Appended:
    """Appends requests to ``segments`` and queues their rows; ``put`` queues work for the
    writer thread (retried there while storage fails)."""

    def __init__(
        self, segments: Segments, put: Callable[[Callable[[sqlite3.Connection], Any]], None]
    ) -> None:
        self._segments = segments
        self._rows = QueuedRows(put, _INSERT)

    def append(self, request: int, signal: str, payload: bytes, tenant: str) -> Spooled:
        """Write request ``request``'s frame and queue its row; raises ``OSError`` (nothing of
        it kept) when the frame cannot be written."""
        with self._segments.lock:  # until the row is queued: see ``drop_before``
            where = self._segments.append_locked(payload, signal, tenant, request)
            self._rows.add((request, time.time(), signal, where.segment, where.offset, where.length, tenant))
        return where

    def _write(self, db: sqlite3.Connection) -> None:
        self._rows._write(db)

    def queued(self, ids: set[int]) -> list[tuple[int, str, Spooled]]:
        """(id, signal, where) of those requests whose rows are queued, not yet written."""
        with self._rows.lock:
            return [(row[0], row[2], Spooled(*row[3:6])) for row in self._rows.rows if row[0] in ids]

    def drop_before(self, first_row_segment: int | None, first: Callable[[], None] | None = None) -> None:
        """Drop the segment files before ``first_row_segment`` (the first file a committed
        row points into; None: no row) and before any file a queued row points into;
        ``first`` as ``Segments.drop_before`` calls it."""
        with self._segments.lock:
            with self._rows.lock:
                queued = min((int(row[3]) for row in self._rows.rows), default=None)
            kept = [s for s in (first_row_segment, queued) if s is not None]
            self._segments.drop_before_locked(min(kept) if kept else None, first)


def unindexed(db: sqlite3.Connection, segments: Segments) -> list[tuple[int, Frame]]:
    """(id, frame) of the frames after the last row (by id) that have no row yet: those
    appended since the rows were read, or that a crash left with none."""
    last = db.execute('SELECT id, segment, "offset", length FROM spooled ORDER BY id DESC LIMIT 1').fetchone()
    after, last_id = (Spooled(*last[1:]), int(last[0])) if last is not None else (None, 0)
    return [
        (f.request, f) for f in segments.frames_after(after) if f.request is not None and f.request > last_id
    ]


def index_tail(path: Path, segments: Segments, next_id: int) -> int:
    """Index the frames a crash left with no row (ids from ``next_id`` on, after the last
    row), before the writer starts; the next request id."""
    db = sqlite3.connect(path)
    try:
        now = time.time()
        rows: list[Row] = [
            (request, now, f.signal, f.where.segment, f.where.offset, f.where.length, f.tenant)
            for request, f in unindexed(db, segments)
            if request >= next_id
        ]
        if rows:
            with db:
                sql.insert_rows(db, _INSERT, rows)
            next_id = max(next_id, max(row[0] for row in rows) + 1)
        return next_id
    finally:
        db.close()
