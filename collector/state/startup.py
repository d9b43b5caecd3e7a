"""What a restart reads from the database before the writer runs: where to replay from, the
closed revisions and verdicts of revisions not yet evaluated, waiting judge work, the latest
revision of each session, the reopenable revisions, the next request id and the outbox counts."""

from __future__ import annotations

import json
import sqlite3
import time

from collector.db.location import Location
from collector.db.shared import ROWS_PER_STATEMENT, Db
from collector.state import index
from collector.state.segments import Segments
from collector.state.types import LATEST_REVISIONS, Closed, Recovery, Reopenable, revision_key


def load_local(location: Location, segments: Segments | None) -> tuple[Recovery, int]:
    """What a restart needs from the data directory's database at ``location``: where to
    replay from, the closed and reopenable revisions (``Recovery``), and the next request id."""
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
        # Request ids only grow, across restarts too: ``replay_from`` may be past every row
        # left (SQLite would number the next row of an empty table 1, and a restart would
        # then skip it).
        (last,) = db.execute("SELECT MAX(id) FROM spooled").fetchone()
        return recovery, max(int(last or 0) + 1, recovery.replay_from)
    finally:
        db.close()


def load_shared(db: Db, recovery: Recovery, replica: str, lease_seconds: float = 30.0) -> dict[str, int]:
    """Fill in what a restart needs from the shared store, in the caller's transaction:
    which of this replica's closed and reopenable revisions were evaluated (or are being
    evaluated by another replica that took them over), each session's latest revision, the
    verdicts of revisions not yet evaluated, this replica's waiting judge work (its leases
    held again, ``lease_seconds``); returns each outbox channel's row count."""
    if db.dialect == "sqlite":
        _index_older_revisions(db)
    mine = {(s, c.revision) for s, revs in recovery.closed.items() for c in revs}
    mine |= {(e.session, e.revision) for e in recovery.reopenable}
    recovery.evaluated = _evaluated(db, sorted(mine))
    for session, revision in db.rows(
        "SELECT session, MAX(revision) FROM coverage GROUP BY session ORDER BY MAX(evaluated_at) DESC LIMIT :n",
        {"n": LATEST_REVISIONS},
    ):
        recovery.latest[session] = int(revision)
    # Verdicts of revisions not evaluated (this replica's, or another's it may take over).
    for key, record in db.rows(
        "SELECT key, record FROM results r WHERE superseded = 0 AND NOT EXISTS "
        "(SELECT 1 FROM coverage c WHERE c.session = r.session AND c.revision = r.revision)"
    ):
        recovery.results[str(key)] = json.loads(record)
    # Work of revisions evaluated since is done (its rows went with a crash between).
    for table in ("judge_pending", "judge_revisions"):
        db.execute(
            f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM coverage c "
            f"WHERE c.session = {table}.session AND c.revision = {table}.revision)"
        )
    _hold_own_work(db, recovery, mine, replica, lease_seconds)
    for key, enqueued_at, attempts in db.rows(
        "SELECT key, enqueued_at, attempts FROM judge_pending WHERE lease_owner = :me OR lease_owner IS NULL",
        {"me": replica},
    ):
        recovery.pending[key] = (float(enqueued_at), int(attempts))
    # Counted once here (and written by the store's first write, ``recount_outbox``), then
    # kept by each put and ack.
    return {
        str(channel): int(count)
        for channel, count in db.rows("SELECT channel, COUNT(*) FROM outbox GROUP BY channel")
    }


def _hold_own_work(
    db: Db, recovery: Recovery, mine: set[tuple[str, int]], replica: str, lease_seconds: float
) -> None:
    """Revisions with queued judge work (``judge_revisions``) at a restart: those this replica
    closed (its replay evaluates them again from its request log) are leased to it again,
    unless another replica took them over and holds them (that one finishes them: they count
    as evaluated here); those it had taken over from others are let go, for a takeover
    (``collector.evaluate.takeover``, its own or another's) to finish from their evidence."""
    now = time.time()
    closed = {revision_key(s, r): (s, r) for s, r in mine}
    lock = " FOR UPDATE" if db.dialect == "postgresql" else ""
    for key, owner, expires in db.rows(f"SELECT key, lease_owner, lease_expires FROM judge_revisions{lock}"):
        if key in closed:
            if owner not in (None, replica) and expires is not None and float(expires) >= now:
                recovery.evaluated.add(closed[key])
                continue
            db.execute(
                "UPDATE judge_revisions SET lease_owner = :me, lease_expires = :until WHERE key = :key",
                {"me": replica, "until": now + lease_seconds, "key": key},
            )
        elif owner == replica:
            db.execute(
                "UPDATE judge_revisions SET lease_owner = NULL, lease_expires = NULL WHERE key = :key",
                {"key": key},
            )


def _evaluated(db: Db, keys: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """Which of ``keys`` (session, revision) have a coverage row."""
    found: set[tuple[str, int]] = set()
    wanted = set(keys)
    for start in range(0, len(keys), ROWS_PER_STATEMENT):
        names, params = db.in_("s", sorted({s for s, _ in keys[start : start + ROWS_PER_STATEMENT]}))
        for session, revision in db.rows(
            f"SELECT session, revision FROM coverage WHERE session IN {names}", params
        ):
            if (session, int(revision)) in wanted:
                found.add((session, int(revision)))
    return found


def _index_older_revisions(db: Db) -> None:
    """Fill in the listing's columns of revisions stored before the listing (a spool from
    before migrations), from their records, once."""
    rows = db.rows("SELECT session, revision, record, evaluated_at FROM coverage WHERE summary IS NULL")
    if rows:
        index.index_revisions(
            db, [(str(s), int(r), str(rec), float(at)) for s, r, rec, at in rows], replace=False
        )


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


def recount_outbox(db: Db) -> None:
    """Set ``outbox_rows`` from the rows themselves (a store from before it was kept, or a
    count gone wrong), in the caller's transaction: the store's first write."""
    db.execute("DELETE FROM outbox_rows")
    db.execute("INSERT INTO outbox_rows SELECT channel, COUNT(*) FROM outbox GROUP BY channel")
