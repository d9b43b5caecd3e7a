"""The spool: what must survive ``kill -9``, in one SQLite database (WAL).

* every accepted OTLP request, written before it is acknowledged (its bytes in segment
  files beside the database, ``collector.state.segments``, on the event loop; where they
  are, and the tenant it came from, in ``spooled``, committed after: a restart indexes any
  frame left without its row, ``collector.state.appended``);
* which session revisions closed, up to which request, over which traces;
* each judge verdict as it arrives, under its idempotency key (reused after a crash);
* judge work not yet done (``judge_pending``, noted by ``collector.evaluate.pending`` through
  ``defer``); the revision itself is rebuilt from its requests after a restart, as any
  revision closed but not evaluated, and its work queued again with the time it first waited;
* each evaluated revision's coverage line, holding every result of the revision, with what
  the status API's listing reads (``collector.state.queries``);
* which evaluated revisions later spans may reopen whole, and the requests each keeps;
* the export outbox (``collector.export.outbox.SpoolOutbox``, through ``transact``).

The tables are ``collector.db.schema``'s, made and migrated by Alembic at start
(``collector.db.migrate``), after ``collector.state.vouch`` has found the database sound.

Writes go through one writer thread that commits them in groups (``collector.db.writer``).

Storage that fails (a full disk, an I/O error) fails safe: a request that cannot be stored
is refused as ``Retryable`` (the sender retries it; a half-written request is cut off its
segment file), the failure is counted (``Faults``) and the store reports itself unavailable
until a write succeeds again: the next request, or a small probe written every second.
Other writes nobody waits for (closed revisions) are retried until they commit; a writer
thread never dies of a failed write.  A spooled request that cannot be read back at a
restart is copied to ``quarantine/`` beside the database and left out of the replay.

``collector.state.memory.MemorySpool`` keeps the same interface in memory
(``storage.path: ":memory:"``; replay).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from collector.component import Retryable
from collector.db import migrate, sql
from collector.db.writer import Faults, Rows, WriteKind, Writer, describe, is_storage_error
from collector.state import queries, startup
from collector.state.appended import Appended, QueuedRows, index_tail, unindexed
from collector.state.memory import MemorySpool
from collector.state.segments import SEGMENT_BYTES, Segments, Spooled, Write
from collector.state.types import (
    Closed,
    PendingJudge,
    QuarantineReason,
    Recorded,
    Recovery,
    Reopenable,
    Spool,
    encode_record,
    with_results,
)
from collector.state.vouch import StoreRefused, vouch
from collector.status.view import SessionPage, SessionQuery

__all__ = [
    "Closed",
    "Faults",
    "MemorySpool",
    "PendingJudge",
    "Recorded",
    "Recovery",
    "Reopenable",
    "Spool",
    "SqliteSpool",
    "encode_record",
    "is_storage_error",
    "open_spool",
    "sizes_for",
]

log = logging.getLogger(__name__)


_WAL_SIZE_LIMIT = 64 * 1024 * 1024
# While storage fails: how soon a sender may retry a refused request.
RETRY_AFTER = 5.0
_PROBE_BYTES = 1024 * 1024  # at most: a probe writes as much as the last refused request
# ``storage.max_bytes`` counts files, and the file being appended to is freed only once it is
# full and every request in it is done: segments stay a small share of the limit.
_SEGMENTS_PER_LIMIT = 8
_MIN_SEGMENT_BYTES = 256 * 1024
T = TypeVar("T")


def sizes_for(max_bytes: int | None) -> tuple[int, int]:
    """(segment file size, WAL size limit) for a spool held to ``max_bytes``: each at most
    an eighth of it, so that neither a half-empty segment nor a WAL file SQLite keeps at its
    high-water mark can hold the spool over its limit for good."""
    if max_bytes is None:
        return SEGMENT_BYTES, _WAL_SIZE_LIMIT
    share = max(_MIN_SEGMENT_BYTES, max_bytes // _SEGMENTS_PER_LIMIT)
    return min(SEGMENT_BYTES, share), min(_WAL_SIZE_LIMIT, share)


_INSERT_CLOSED = "INSERT OR REPLACE INTO closed (session, revision, reason, first_request, last_request, traces, closed_at)"
_INSERT_RESULT = "INSERT OR IGNORE INTO results (key, session, revision, record, created_at)"
# Retention, at every checkpoint: each searches an index of its own (``collector.db.schema``).
_EXPIRE = (
    "DELETE FROM results WHERE created_at < ?",
    "DELETE FROM coverage WHERE evaluated_at < ?",
    queries.EXPIRE,
)


def initialise(path: Path) -> None:
    """Create the spool's tables at ``path`` (a new file) or migrate an older spool's
    (``collector.db.migrate``; the caller holds the data directory's lock)."""
    migrate.upgrade_sqlite(path)


class SqliteSpool:
    durable = True

    def __init__(
        self,
        directory: str | Path,
        outbox_capacity: int = 100_000,
        *,
        max_bytes: int | None = None,
        write: Write = os.write,
    ) -> None:
        """``max_bytes`` (``storage.max_bytes``) sizes segment files and the WAL to fit it;
        ``write`` is how segment bytes reach their file (``os.write``)."""
        self.unfinished: dict[tuple[str, int], int] = {}
        self.faults = Faults()
        self.path = Path(directory) / "skillgauge.sqlite"
        segment_bytes, self._wal_size_limit = sizes_for(max_bytes)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RuntimeError(
                f"storage.path: cannot open the spool at {self.path}: {err} - {_open_fix(err)}"
            ) from None
        vouch(self.path.parent)  # before anything is written: a database we cannot trust is refused
        try:
            initialise(self.path)
        except (OSError, sqlite3.Error) as err:
            raise RuntimeError(
                f"storage.path: cannot open the spool at {self.path}: {err} - {_open_fix(err)}"
            ) from None
        self.outbox_capacity = outbox_capacity
        self._segments = Segments(self.path.parent / "requests", segment_bytes, write)
        self._quarantine = self.path.parent / "quarantine"
        self._free_db_bytes = 0  # free pages in the database file, as of the last checkpoint
        self._last_refused = 0  # bytes of the last request refused for a failed write
        try:
            self._recovery, self._next_id, self.outbox_counts = startup.load(self.path, self._segments)
        except sqlite3.DatabaseError as err:  # damage quick_check did not see: the same refusal
            raise StoreRefused(
                f"storage.path: refusing to start: the database {self.path} is damaged ({err}). "
                "Nothing was deleted. Run `skillgauge recover --config FILE` to rebuild it from the "
                f"request segments, or move {self.path.parent} aside to start with an empty store"
            ) from None
        # Reads for the status API: one connection of their own (WAL: they never wait for the
        # writer), used from a worker thread (``asyncio.to_thread``), one read at a time.
        self._reader = sqlite3.connect(self.path, check_same_thread=False)
        self._reader_lock = threading.Lock()
        self._reopen_ops: list[Reopenable | str] = []  # for ``_write_reopen``
        self._reopen_lock = threading.Lock()
        # Frames a crash left with no row get theirs before anything reads the rows.
        self._next_id = index_tail(self.path, self._segments, self._next_id)
        self._writer = Writer(self.path, self._wal_size_limit, self.faults, self._probe)
        self._appended = Appended(self._segments, self._put)  # requests, appended on the loop
        self._closed_rows = QueuedRows(self._put, _INSERT_CLOSED)  # a write for all that wait
        self._put(self._probe, kind="probe")  # a full disk at startup: unavailable from the start
        self._put(_recount_outbox)  # before any put or ack; retried while storage fails

    # -- reads at startup (before the writer runs) --------------------------------------------

    def recovery(self) -> Recovery:
        return self._recovery

    def requests(self, from_id: int) -> Iterator[tuple[int, str, bytes, str]]:
        """Spooled requests from ``from_id`` on (id, signal, payload, tenant), read through a
        connection of the caller's own.
        A request whose bytes cannot be read is quarantined (what is left of them) and
        skipped: the others still replay."""
        db = sqlite3.connect(self.path)
        try:
            # The frames past the last row too (their rows may not be written yet): what a
            # restart would index (``appended.index_tail``).
            tail = unindexed(db, self._segments)
            rows = db.execute(
                "SELECT id, signal, segment, offset, length, tenant FROM spooled WHERE id >= ? ORDER BY id",
                (from_id,),
            ).fetchall()
            seen = max(from_id - 1, rows[-1][0] if rows else 0)
            rows += [(i, f.signal, *f.where.fields(), f.tenant) for i, f in tail if i > seen]
            for request_id, signal, segment, offset, length, tenant in rows:
                where = Spooled(segment, offset, length)
                try:
                    payload = self._segments.read(where)
                except OSError as err:
                    self.quarantine(
                        request_id, signal, self._segments.read_what_is_left(where), "unreadable", str(err)
                    )
                    continue
                yield request_id, signal, payload, str(tenant)
        finally:
            db.close()

    def quarantine(
        self, request_id: int, signal: str, payload: bytes, reason: QuarantineReason, why: str
    ) -> None:
        """Log, count and copy aside (``quarantine/<id>.<signal>.binpb``) a spooled request
        that cannot be replayed.  Its spans are lost to evaluation; the copy is for a person."""
        self.faults.quarantined[reason] += 1
        copy = (
            self._quarantine / f"{request_id}.{signal if signal in ('traces', 'logs') else 'unknown'}.binpb"
        )
        try:
            self._quarantine.mkdir(exist_ok=True)
            copy.write_bytes(payload)
            kept = f"copied to {copy}"
        except OSError as err:
            kept = f"no copy kept ({err})"
        log.warning(
            "spooled request %d is %s and was quarantined, skipped: %s; %s", request_id, reason, why, kept
        )

    # -- writes (through the writer thread) ---------------------------------------------------

    @property
    def commits(self) -> int:
        """Transactions committed so far."""
        return self._writer.commits

    @property
    def _checkpointer(self) -> threading.Thread:
        return self._writer.checkpointer

    def _submit(
        self, work: Callable[[sqlite3.Connection], T] | Rows, *, kind: WriteKind = "write"
    ) -> asyncio.Future[T]:
        return self._writer.submit(work, kind=kind)

    def _put(self, work: Callable[[sqlite3.Connection], Any] | Rows, kind: WriteKind = "write") -> None:
        """Queue work nobody waits for (it commits with a later group, in order; retried
        while storage fails)."""
        self._writer.put(work, kind)

    async def append(self, signal: str, payload: bytes, tenant: str = "") -> int:
        """Write one request (from ``tenant``) to its segment file, on the calling thread, and
        queue its row (``collector.state.appended``); raise ``Retryable`` (reason
        ``storage_error``) if it cannot be written: nothing of it is kept."""
        try:
            self._appended.append(self._next_id, signal, payload, tenant)
        except OSError as err:
            self._last_refused = len(payload)
            self.faults.write_failures["request"] += 1
            self._writer.failed(err)
            raise Retryable(
                f"the spool cannot store the request ({describe(err)}); retry later",
                retry_after=RETRY_AFTER,
                reason="storage_error",
            ) from err
        request_id, self._next_id = self._next_id, self._next_id + 1
        return request_id

    def record_closed(self, closed: Closed) -> None:
        self.unfinished[(closed.session, closed.revision)] = closed.first_request
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
        self._queue_reopen(entry)

    def forget_reopenable(self, session: str) -> None:
        self._queue_reopen(session)

    def _queue_reopen(self, op: Reopenable | str) -> None:
        """Keeps and forgets, in order, written by one queued write for all that wait (a
        wave of closed sessions costs a few statements, not a few per session)."""
        with self._reopen_lock:
            self._reopen_ops.append(op)
            first = len(self._reopen_ops) == 1
        if first:
            self._put(self._write_reopen)

    def _write_reopen(self, db: sqlite3.Connection) -> None:
        with self._reopen_lock:  # what comes later queues another write
            ops, self._reopen_ops = self._reopen_ops, []
        try:
            # The same as each operation in turn, in four statements: first every session a
            # forget names loses its rows, then each keep that follows its session's last
            # forget is written (keeps and forgets alternate as closing sessions push the
            # oldest out of ``reopen_cache``).
            forgotten: dict[str, int] = {}  # session -> position of its last forget
            for at, op in enumerate(ops):
                if isinstance(op, str):
                    forgotten[op] = at
            kept = [
                op
                for at, op in enumerate(ops)
                if isinstance(op, Reopenable) and forgotten.get(op.session, -1) < at
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
            sql.insert_rows(
                db, "INSERT OR IGNORE INTO held", [(r, e.session) for e in kept for r in e.requests]
            )
        except BaseException:  # tried again (a full disk): the same operations, first
            with self._reopen_lock:
                self._reopen_ops[:0] = ops
            raise

    async def read_requests(self, ids: tuple[int, ...]) -> list[tuple[int, str, bytes]]:
        def read() -> list[tuple[int, str, bytes]]:
            out: list[tuple[int, str, bytes]] = []
            with self._reader_lock:
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    rows = self._reader.execute(
                        "SELECT id, signal, segment, offset, length FROM spooled WHERE id IN "
                        f"({','.join('?' * len(chunk))}) ORDER BY id",
                        chunk,
                    ).fetchall()
                    for request_id, signal, segment, offset, length in rows:
                        with contextlib.suppress(OSError):  # unreadable: its spans are not rebuilt
                            out.append(
                                (request_id, signal, self._segments.read(Spooled(segment, offset, length)))
                            )
            return out

        return await asyncio.to_thread(read)

    async def save_result(self, key: str, session: str, revision: int, record: dict[str, Any]) -> None:
        row = (key, session, revision, encode_record(record), time.time())
        await self._submit(Rows(_INSERT_RESULT, [row]))

    async def save_coverage(self, revisions: list[Recorded]) -> None:
        # One row holds a revision: its coverage line (a JSON object) with the results added
        # as "results".  Only judge verdicts are read back, and only for unfinished revisions
        # (``save_result``); a row per result, with three indexes each, cost ~30 us a session.
        later = [(session, revision) for session, revision, _, _ in revisions if revision > 1]
        if later:  # queued first: never committed after the lines that mark them done
            self._put(
                lambda db: db.executemany(
                    "UPDATE results SET superseded = 1 WHERE session = ? AND revision < ?", later
                )
            )
        now = time.time()
        rows = [
            (session, revision, with_results(line, results), now)
            for session, revision, results, line in revisions
        ]
        if rows:  # parsed for the listing's columns in the writer thread, not on the loop
            await self._submit(lambda db: queries.index_revisions(db, rows))
        for session, revision, _, _ in revisions:
            self.unfinished.pop((session, revision), None)

    def defer(self, work: Callable[[sqlite3.Connection], Any] | Rows) -> None:
        """Queue a write nobody waits for (committed with a later group, in order; retried
        while storage fails)."""
        self._put(work)

    async def revisions(self, session: str, not_before: float) -> list[list[dict[str, Any]]]:
        return await self._read(queries.revisions, session, not_before)

    async def sessions(self, query: SessionQuery, not_before: float) -> SessionPage:
        return await self._read(queries.list_sessions, query, not_before)

    async def overview(self, since: float, not_before: float, tenant: str | None = None) -> dict[str, Any]:
        return await self._read(queries.overview, since, not_before, tenant)

    async def _read(self, read: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            with self._reader_lock:
                return read(self._reader, *args)

        return await asyncio.to_thread(run)

    async def transact(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in the writer's next transaction; its result once committed."""
        return await self._submit(work)

    async def checkpoint(self, replay_from: int, keep_results_for: float | None = None) -> None:
        def write(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO state (name, value) VALUES ('replay_from', ?)", (replay_from,))
            db.execute("DELETE FROM closed WHERE last_request < ?", (replay_from,))
            if keep_results_for is not None:
                cutoff = time.time() - keep_results_for
                for statement in _EXPIRE:
                    db.execute(statement, (cutoff,))
                db.execute(
                    "DELETE FROM held WHERE session IN (SELECT session FROM reopenable WHERE closed_at < ?)",
                    (cutoff,),
                )
                db.execute("DELETE FROM reopenable WHERE closed_at < ?", (cutoff,))
            # Requests a reopenable revision holds stay (``held``).
            db.execute(
                "DELETE FROM spooled WHERE id < ? AND id NOT IN (SELECT request FROM held)", (replay_from,)
            )

        await self._submit(write)

        def drop(db: sqlite3.Connection) -> None:
            # Files go once the rows that pointed into them are gone for good (committed
            # above), asked again here: requests spooled since may need the latest file.
            (first,) = db.execute("SELECT MIN(segment) FROM spooled").fetchone()
            self._appended.drop_before(None if first is None else int(first))
            # Pages freed by deletions are reused before the file grows: not counted as used.
            (free,) = db.execute("PRAGMA freelist_count").fetchone()
            (page,) = db.execute("PRAGMA page_size").fetchone()
            self._free_db_bytes = int(free) * int(page)

        await self._submit(drop)

    def size_bytes(self) -> int:
        """Bytes the spool holds on disk, less the database's free pages (reused first)."""
        total = self._segments.size_bytes() - self._free_db_bytes
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += Path(f"{self.path}{suffix}").stat().st_size
        return max(0, total)

    async def shutdown(self, timeout: float = 10.0) -> None:
        await self._writer.stop(timeout)
        self._segments.close()
        with self._reader_lock:
            self._reader.close()

    def _probe(self, db: sqlite3.Connection) -> None:
        """A small write of each kind an append makes (segment bytes, a row): what tells the
        store that storage works again when no request comes to try it (readiness is 503)."""
        self._segments.probe(min(max(self._last_refused, 1), _PROBE_BYTES))
        db.execute("INSERT OR REPLACE INTO state (name, value) VALUES ('probed_at', ?)", (int(time.time()),))


def _recount_outbox(db: sqlite3.Connection) -> None:
    """Set ``outbox_rows`` from the rows themselves (a spool from before it was kept, or a
    count gone wrong), in the caller's transaction."""
    db.execute("DELETE FROM outbox_rows")
    db.execute("INSERT INTO outbox_rows SELECT channel, COUNT(*) FROM outbox GROUP BY channel")


def _open_fix(err: OSError | sqlite3.Error) -> str:
    """What an operator can do about a spool that does not open."""
    if isinstance(err, sqlite3.DatabaseError) and not isinstance(err, sqlite3.OperationalError):
        # "file is not a database", "database disk image is malformed"
        return (
            "the file is damaged: run `skillgauge recover --config FILE` to rebuild it from the "
            "request segments, restore the directory from a backup, or move it aside to start "
            "with an empty spool (what it held is then not evaluated)"
        )
    return "check that the directory exists or can be created, is writable by this user and has free space"


def open_spool(path: str, outbox_capacity: int = 100_000, max_bytes: int | None = None) -> Spool:
    if path == ":memory:":
        return MemorySpool(outbox_capacity)
    return SqliteSpool(path, outbox_capacity, max_bytes=max_bytes)
