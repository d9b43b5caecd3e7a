"""Closed revisions and reopenable revisions in the store.

* ``closed``: which session revisions closed, up to which request, over which traces (what a
  restart must replay for the ones not yet evaluated);
* ``reopenable`` and ``held``: which evaluated revisions later spans may reopen whole, and
  the requests each keeps from deletion.

Every write here is one nobody waits for, committed with the store's next group.

A kept revision's rows are written only when a checkpoint would otherwise delete what its
closed row holds (``write_kept``, called as each checkpoint queues its deletions): its
closed row is deleted, and its requests may be, only by a checkpoint whose ``replay_from``
is past its requests, so until then a restart finds it from its closed row
(``unwritten_kept``).  At saturation the reopen cache (``sessions.reopen_cache``) turns over
in a few seconds, the checkpoints come every ``storage.checkpoint_interval``: a revision kept
and let go between two checkpoints costs the store no row and no deletion.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from collector.db import sql
from collector.db.writer import Rows
from collector.state.appended import QueuedRows
from collector.state.types import REOPEN_WHOLE, Closed, Recovery, Reopenable
from evaluators.evidence import split_session_key

_INSERT_CLOSED = "INSERT OR REPLACE INTO closed (session, revision, reason, first_request, last_request, traces, closed_at)"

Put = Callable[[Callable[[sqlite3.Connection], Any] | Rows], None]


class Revisions:
    """Notes of closed and reopenable revisions, queued through ``put``."""

    def __init__(self, put: Put) -> None:
        self._closed_rows = QueuedRows(put, _INSERT_CLOSED)  # one queued write for all that wait
        # Keeps and forgets, in order: a wave of closed sessions costs a few statements, not a
        # few per session.
        self._reopen = QueuedRows(put, _write_reopen)
        # Kept, not written yet (``write_kept``), the latest kept last; and the sessions whose
        # rows this process queued and has not forgotten since.
        self._kept: dict[str, Reopenable] = {}
        self._written: set[str] = set()

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
        """``entry`` is reopenable (replacing what its session kept): written by the first
        ``write_kept`` that needs it, unless forgotten before."""
        self._kept.pop(entry.session, None)
        self._kept[entry.session] = entry

    def forget_reopenable(self, session: str) -> None:
        """``session`` is no longer reopenable: its rows go, if any were written (by this
        process or an earlier one)."""
        if self._kept.pop(session, None) is not None and session not in self._written:
            return  # kept since the last checkpoint only: nothing of it was written
        self._written.discard(session)
        self._reopen.add(session)

    def write_kept(self, replay_from: int | None = None) -> None:
        """Queue the rows of the revisions kept and not written yet that hold a request
        before ``replay_from`` (every one with None): call it before queuing the deletions of
        a checkpoint from ``replay_from``, which the rows then commit with or before."""
        kept = self._kept
        for session, entry in list(kept.items()):
            if replay_from is None or min(entry.first_request, *entry.requests) < replay_from:
                del kept[session]
                self._written.add(session)
                self._reopen.add(entry)

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


def unwritten_kept(recovery: Recovery) -> list[Reopenable]:
    """The revisions a restart keeps for reopening from their closed rows alone (kept since
    the last checkpoint, ``write_kept``): each session's latest closed revision, evaluated,
    its session's latest, closed for a reason that reopens whole, keyed (a trace that named
    no session is not kept), and newer than its reopenable row, if any.  Each holds the
    requests from its first to its last (those the store still has; spans not known: 0);
    oldest first."""
    rows = {entry.session: entry.revision for entry in recovery.reopenable}
    found: list[tuple[int, Reopenable]] = []
    for session, revisions in recovery.closed.items():
        last = max(revisions, key=lambda c: c.revision)
        if (
            last.reason not in REOPEN_WHOLE
            or (session, last.revision) not in recovery.evaluated
            or recovery.latest.get(session, 0) > last.revision
            or rows.get(session, 0) >= last.revision
            or split_session_key(session)[1] in last.traces  # provisional: named by its trace
        ):
            continue
        requests = tuple(range(last.first_request, last.last_request + 1))
        found.append(
            (
                last.last_request,
                Reopenable(session, last.revision, last.first_request, requests, last.traces, 0),
            )
        )
    return [entry for _, entry in sorted(found, key=lambda f: f[0])]
