"""Judge verdicts and evaluated revisions in the shared store.

* each judge verdict as it arrives, under its idempotency key (``results``; read back after a
  crash, for revisions not yet evaluated, so that no verdict is paid twice);
* each evaluated revision's coverage line, holding every result of the revision, with what
  the status queries read (``collector.state.index``); earlier revisions' verdicts become
  superseded, and the revision's queued judge work (``judge_revisions``, leased) is done, in
  the same transaction.

Each function returns a write (``Db`` -> result) in SQL both dialects read.  With a bound
(``capacity``: the in-memory store), the revisions saved longest ago go once more are kept:
found by the ``coverage_evaluated_at`` index and a count kept in ``state``, so a save costs
the same however many are kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from collector.db.shared import ROWS_PER_STATEMENT, Db
from collector.state import index
from collector.state.types import Recorded, encode_record, revision_key, with_results

# Retention, at every checkpoint: each searches an index of its own (``collector.db.schema``).
EXPIRE = (
    "DELETE FROM results WHERE created_at < :cutoff",
    "DELETE FROM coverage WHERE evaluated_at < :cutoff",
    index.EXPIRE,
)
_KEPT = "coverage_rows"  # the ``state`` row counting ``coverage`` under a bound
Write = Callable[[Db], None]


def result_write(key: str, session: str, revision: int, record: dict[str, Any]) -> Write:
    """One judged result (the first one stored under ``key`` stays)."""
    row = (key, session, revision, encode_record(record), time.time())

    def write(db: Db) -> None:
        db.insert(
            "results",
            ("key", "session", "revision", "record", "created_at"),
            [row],
            "ON CONFLICT (key) DO NOTHING",
        )

    return write


def supersede(later: list[tuple[str, int]]) -> Write:
    """A write marking the verdicts of revisions before each (session, revision) superseded."""

    def write(db: Db) -> None:
        db.executemany(
            "UPDATE results SET superseded = 1 WHERE session = :session AND revision < :revision",
            [{"session": s, "revision": r} for s, r in later],
        )

    return write


def coverage_write(
    revisions: list[Recorded], capacity: int | None, lines: list[dict[str, Any]] | None = None
) -> Write:
    """A write storing evaluated revisions (each a coverage line with its results) with their
    listing columns (from ``lines``, each revision's line with its results as the caller has
    it, or else read from the text); with ``capacity`` (SQLite in memory), letting the oldest
    beyond it go."""
    now = time.time()
    rows = [(s, r, with_results(line, results), now) for s, r, results, line in revisions]

    def write(db: Db) -> None:
        indexed = index.prepare(rows, lines)  # first: a bad line fails the write before it writes
        _work_done(db, [revision_key(s, r) for s, r, _, _ in rows])
        added = index.store(db, indexed)
        if capacity is None:
            return
        count = _kept(db) + added
        over = max(0, count - capacity)
        if over:
            oldest = db.rows(
                "SELECT session, revision FROM coverage ORDER BY evaluated_at, rowid LIMIT :over",
                {"over": over},
            )
            index.forget_revisions(db, [(str(s), int(r)) for s, r in oldest])
            count -= len(oldest)
        _set_kept(db, count)

    return write


def _work_done(db: Db, keys: list[str]) -> None:
    """The leased judge work of these revisions (``revision_key``) is done.  With no judge
    work queued at all (no judge configured, or none waiting), one lookup finds nothing to
    delete, instead of a search for every revision."""
    if db.execute("SELECT 1 FROM judge_revisions LIMIT 1").fetchone() is None:
        return
    for start in range(0, len(keys), ROWS_PER_STATEMENT):
        names, params = db.in_("k", keys[start : start + ROWS_PER_STATEMENT])
        db.execute(f"DELETE FROM judge_revisions WHERE key IN {names}", params)


def expire(db: Db, cutoff: float, bounded: bool) -> None:
    """Results, coverage lines and verdicts older than ``cutoff``, in the caller's transaction."""
    for statement in EXPIRE:
        deleted = db.execute(statement, {"cutoff": cutoff}).rowcount
        if bounded and statement.startswith("DELETE FROM coverage"):
            _set_kept(db, max(0, _kept(db) - deleted))


def _kept(db: Db) -> int:
    row = db.execute("SELECT value FROM state WHERE name = :name", {"name": _KEPT}).fetchone()
    return int(row[0]) if row else 0


def _set_kept(db: Db, count: int) -> None:
    db.execute(
        "INSERT INTO state (name, value) VALUES (:name, :value) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        {"name": _KEPT, "value": count},
    )
