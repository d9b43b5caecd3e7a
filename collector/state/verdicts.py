"""Judge verdicts and evaluated revisions in the store.

* each judge verdict as it arrives, under its idempotency key (``results``; read back after a
  crash, for revisions not yet evaluated, so that no verdict is paid twice);
* each evaluated revision's coverage line, holding every result of the revision, with what
  the status queries read (``collector.state.index``); earlier revisions' verdicts become
  superseded.

With a bound (``capacity``: the in-memory store), the revisions saved longest ago go once
more are kept: found by the ``coverage_evaluated_at`` index and a count kept in ``state``,
so a save costs the same however many are kept.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from collector.db.writer import Rows
from collector.state import index
from collector.state.types import Recorded, encode_record, with_results

T = TypeVar("T")
Submit = Callable[[Callable[[sqlite3.Connection], Any] | Rows], "Any"]

_INSERT_RESULT = "INSERT OR IGNORE INTO results (key, session, revision, record, created_at)"
# Retention, at every checkpoint: each searches an index of its own (``collector.db.schema``).
EXPIRE = (
    "DELETE FROM results WHERE created_at < ?",
    "DELETE FROM coverage WHERE evaluated_at < ?",
    index.EXPIRE,
)
_KEPT = "coverage_rows"  # the ``state`` row counting ``coverage`` under a bound


def result_row(key: str, session: str, revision: int, record: dict[str, Any]) -> Rows:
    """One judged result, as a write."""
    return Rows(_INSERT_RESULT, [(key, session, revision, encode_record(record), time.time())])


def supersede(later: list[tuple[str, int]]) -> Callable[[sqlite3.Connection], None]:
    """A write marking the verdicts of revisions before each (session, revision) superseded."""

    def write(db: sqlite3.Connection) -> None:
        db.executemany("UPDATE results SET superseded = 1 WHERE session = ? AND revision < ?", later)

    return write


def coverage_write(revisions: list[Recorded], capacity: int | None) -> Callable[[sqlite3.Connection], None]:
    """A write storing evaluated revisions (each a coverage line with its results) with their
    listing columns; with ``capacity``, letting the oldest beyond it go."""
    now = time.time()
    rows = [(s, r, with_results(line, results), now) for s, r, results, line in revisions]

    def write(db: sqlite3.Connection) -> None:
        indexed = index.prepare(rows)  # parsed first: a bad line fails the write before it writes
        if capacity is None:
            index.store(db, indexed)
            return
        keys = list(dict.fromkeys((s, r) for s, r, _, _ in rows))
        known = sum(
            1
            for key in keys
            if db.execute("SELECT 1 FROM coverage WHERE session = ? AND revision = ?", key).fetchone()
        )
        index.store(db, indexed)
        count = _kept(db) + len(keys) - known
        over = max(0, count - capacity)
        if over:
            oldest = db.execute(
                "SELECT session, revision FROM coverage ORDER BY evaluated_at, rowid LIMIT ?", (over,)
            ).fetchall()
            index.forget_revisions(db, [(str(s), int(r)) for s, r in oldest])
            count -= len(oldest)
        _set_kept(db, count)

    return write


def expire(db: sqlite3.Connection, cutoff: float, bounded: bool) -> None:
    """Results, coverage lines and verdicts older than ``cutoff``, in the caller's transaction."""
    for statement in EXPIRE:
        deleted = db.execute(statement, (cutoff,)).rowcount
        if bounded and statement.startswith("DELETE FROM coverage"):
            _set_kept(db, max(0, _kept(db) - deleted))


def _kept(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM state WHERE name = ?", (_KEPT,)).fetchone()
    return int(row[0]) if row else 0


def _set_kept(db: sqlite3.Connection, count: int) -> None:
    db.execute("INSERT OR REPLACE INTO state (name, value) VALUES (?, ?)", (_KEPT, count))
