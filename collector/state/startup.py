"""What a restart reads from the database before the writer runs: where to replay from, the
closed revisions and verdicts of revisions not yet evaluated, waiting judge work, the latest
revision of each session, the reopenable revisions, the next request id and the outbox counts."""

from __future__ import annotations

import json
import sqlite3

from collector.db.location import Location
from collector.state import index
from collector.state.segments import Segments
from collector.state.types import LATEST_REVISIONS, Closed, Recovery, Reopenable


def load(location: Location, segments: Segments | None) -> tuple[Recovery, int, dict[str, int]]:
    """What a restart needs from the database at ``location``: the ``Recovery``, the next
    request id, and each outbox channel's row count."""
    outbox_len: dict[str, int] = {}
    db = location.connect()
    try:
        recovery = Recovery()
        row = db.execute("SELECT value FROM state WHERE name = 'replay_from'").fetchone()
        recovery.replay_from = int(row[0]) if row else 1
        for session, revision, reason, first, last, traces in db.execute(
            "SELECT session, revision, reason, first_request, last_request, traces FROM closed ORDER BY revision"
        ):
            recovery.closed.setdefault(session, []).append(
                Closed(session, revision, reason, first, last, tuple(t for t in traces.split(",") if t))
            )
        recovery.evaluated = {(s, r) for s, r in db.execute("SELECT session, revision FROM coverage")}
        for session, revision in db.execute(
            "SELECT session, MAX(revision) FROM coverage GROUP BY session "
            "ORDER BY MAX(evaluated_at) DESC LIMIT ?",
            (LATEST_REVISIONS,),
        ):
            recovery.latest[session] = int(revision)
        held: dict[str, list[int]] = {}
        for request, session in db.execute("SELECT request, session FROM held ORDER BY request"):
            held.setdefault(session, []).append(int(request))
        for session, revision, first, traces, spans in db.execute(
            "SELECT session, revision, first_request, traces, spans FROM reopenable ORDER BY closed_at"
        ):
            recovery.reopenable.append(
                Reopenable(
                    session,
                    int(revision),
                    int(first),
                    tuple(held.get(session, ())),
                    tuple(t for t in traces.split(",") if t),
                    int(spans),
                )
            )
        if segments is not None:
            _move_blobs(db, segments)
        _index_older_revisions(db)
        # Request ids only grow, across restarts too: ``replay_from`` may be past every row
        # left (SQLite would number the next row of an empty table 1, and a restart would
        # then skip it).
        (last,) = db.execute("SELECT MAX(id) FROM spooled").fetchone()
        next_id = max(int(last or 0) + 1, recovery.replay_from)
        unevaluated = {(s, r) for s, revs in recovery.closed.items() for r in (c.revision for c in revs)}
        unevaluated -= recovery.evaluated
        for key, record in db.execute(
            "SELECT key, record FROM results WHERE superseded = 0 AND (session, revision) NOT IN "
            "(SELECT session, revision FROM coverage)"
        ):
            recovery.results[key] = json.loads(record)
        # Work of revisions evaluated since is done (its rows went with a crash between).
        with db:
            db.execute(
                "DELETE FROM judge_pending WHERE (session, revision) IN (SELECT session, revision FROM coverage)"
            )
        for key, enqueued_at, attempts in db.execute("SELECT key, enqueued_at, attempts FROM judge_pending"):
            recovery.pending[key] = (float(enqueued_at), int(attempts))
        # Counted once here (and written by the first write, ``_recount_outbox``), then
        # kept by each put and ack (``_outbox_add``).
        for channel, count in db.execute("SELECT channel, COUNT(*) FROM outbox GROUP BY channel"):
            outbox_len[channel] = int(count)
        return recovery, next_id, outbox_len
    finally:
        db.close()


def _index_older_revisions(db: sqlite3.Connection) -> None:
    """Fill in the listing's columns of revisions stored before the listing (a spool from
    before migrations), from their records, once."""
    rows = db.execute(
        "SELECT session, revision, record, evaluated_at FROM coverage WHERE summary IS NULL"
    ).fetchall()
    if rows:
        with db:
            index.index_revisions(db, rows, replace=False)


def _move_blobs(db: sqlite3.Connection, segments: Segments) -> None:
    """Spools from before segment files kept request bytes in a ``requests`` table: move
    them into a segment, keeping their ids, in one transaction (rerun after a crash)."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'requests'").fetchone():
        return
    with db:
        for request_id, received_at, signal, payload in db.execute(  # one blob at a time
            "SELECT id, received_at, signal, payload FROM requests ORDER BY id"
        ):
            where = segments.append(payload)
            db.execute(
                "INSERT OR REPLACE INTO spooled (id, received_at, signal, segment, offset, length) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (request_id, received_at, signal, where.segment, where.offset, where.length),
            )
        db.execute("DROP TABLE requests")
    segments.close()


def recount_outbox(db: sqlite3.Connection) -> None:
    """Set ``outbox_rows`` from the rows themselves (a store from before it was kept, or a
    count gone wrong), in the caller's transaction: the store's first write."""
    db.execute("DELETE FROM outbox_rows")
    db.execute("INSERT INTO outbox_rows SELECT channel, COUNT(*) FROM outbox GROUP BY channel")
