"""The spool: what must survive ``kill -9``, in one SQLite database (WAL).

* every accepted OTLP request, committed before it is acknowledged (its bytes in segment
  files beside the database, ``collector.state.segments``; where they are, and the tenant
  it came from, in ``spooled``);
* which session revisions closed, up to which request, over which traces;
* each judge verdict as it arrives, under its idempotency key (reused after a crash);
* judge work not yet done (``judge_pending``): which evaluation of which closed revision, since
  when it waits and how often its call failed; the revision itself is rebuilt from its
  requests after a restart, as any revision closed but not evaluated, and its work queued
  again with the time it first waited (``judge.max_wait`` counts across restarts);
* each evaluated revision's coverage line, holding every result of the revision;
* each evaluated revision's coverage line, holding every result of the revision, with what
  the status API's listing reads (``collector.state.queries``);
* which evaluated revisions later spans may reopen whole, and the requests each keeps;
* the export outbox.

One writer thread owns the connection.  Work queued while a commit runs shares the next
transaction (group commit), so the event loop never waits on disk per request and syncs
stay few under load.  ``synchronous=NORMAL`` with WAL loses nothing on a process crash.
A second thread, on a connection of its own, copies committed pages from the WAL into the
database (a passive checkpoint, with its sync): commits neither wait for it nor stop it.

Requests come first: an Export call waits for its commit, so each transaction takes every
waiting request but at most 64 other writes (closed revisions, results, coverage, outbox,
deletions), and the rest follows in the next: no transaction grows long enough to hold up a
request that arrives while it runs.  Rows for the same table that queue up
together are inserted by one multi-row statement: each SQLite call hands the GIL to the
event loop and must win it back, so statements, not rows, are what a busy loop makes slow.

Storage that fails (a full disk, an I/O error) fails safe: a request that cannot be stored
is refused as ``Retryable`` (the sender retries it; a half-written request is cut off its
segment file), the failure is counted (``Faults``) and the store reports itself unavailable
until a write succeeds again: the next request, or a small probe written every second.
Other writes nobody waits for (closed revisions) are retried until they commit; a writer
thread never dies of a failed write.  A spooled request that cannot be read back at a
restart is copied to ``quarantine/`` beside the database and left out of the replay.

``MemorySpool`` keeps the same interface in memory (``storage.path: ":memory:"``; replay):
nothing survives the process, and the service says so at startup.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import orjson

from collector.component import Retryable
from collector.db import migrate
from collector.export.outbox import Entry, MemoryOutbox
from collector.state import queries, sql
from collector.state.segments import SEGMENT_BYTES, Segments, Spooled, Write
from collector.state.vouch import StoreRefused, vouch
from collector.status.view import SessionPage, SessionQuery

log = logging.getLogger(__name__)


# An evaluated session revision: (session, revision, its results' records, its coverage line).
Recorded = tuple[str, int, list[str], str]
# Judge work waiting: (idempotency key, session, revision, evaluation, first queued at (epoch s)).
PendingJudge = tuple[str, str, int, str, float]


def encode_record(record: dict[str, Any]) -> str:
    """How records are stored: compact JSON, keys sorted.  orjson: a closed session has a
    dozen records, and ``json`` took 8 % of the serving process's time encoding them."""
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode()


# Sessions whose latest revision a restart remembers (the assembler's bound on revisions).
LATEST_REVISIONS = 100_000
# Work other than requests per transaction: a request that arrives while a transaction runs
# waits for it, so it stays short (~5 ms) even when a wave of closed sessions is queued.
_OTHER_PER_GROUP = 64
_WAL_SIZE_LIMIT = 64 * 1024 * 1024
# How often the WAL's committed pages are copied into the database.  A page written many
# times between two copies is copied once; the WAL grows by what the tables get meanwhile.
_CHECKPOINT_EVERY = 0.5  # seconds
# The writer copies the WAL itself, inside a commit, only past this many pages: a backstop
# for a checkpointer that falls behind (SQLite's default, 1,000, would take its work).
_WRITER_CHECKPOINT_PAGES = 8192
# While storage fails: how soon a sender may retry a refused request, how often the store
# tries a small write to learn that it works again, and how soon a failed write nobody waits
# for (a closed revision) is tried again.
RETRY_AFTER = 5.0
_PROBE_EVERY = 1.0
_PROBE_BYTES = 1024 * 1024  # at most: a probe writes as much as the last refused request
_RETRY_WRITES_EVERY = 1.0
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


WriteKind = Literal["request", "write", "probe"]
QuarantineReason = Literal["unreadable", "undecodable"]


def is_storage_error(err: BaseException) -> bool:
    """A failure of the disk or the database file (full, I/O error, corrupt), not of a caller's
    arguments: what makes the store unavailable and is worth retrying."""
    if isinstance(err, OSError):
        return True
    return isinstance(err, sqlite3.OperationalError) or type(err) is sqlite3.DatabaseError


@dataclass
class Faults:
    """What went wrong with the storage: for readiness and the metrics.  Written by the
    writer thread, read by the event loop (single assignments and increments)."""

    unavailable: str | None = None  # why writes fail now; None once one succeeds again
    write_failures: dict[str, int] = field(default_factory=lambda: {"request": 0, "write": 0})
    quarantined: dict[str, int] = field(default_factory=lambda: {"unreadable": 0, "undecodable": 0})


@dataclass(frozen=True, slots=True)
class Closed:
    """A closed session revision: its spans are those of requests first..last on its traces."""

    session: str
    revision: int
    reason: str
    first_request: int
    last_request: int
    traces: tuple[str, ...]  # hex trace ids


@dataclass(frozen=True, slots=True)
class Reopenable:
    """An evaluated revision that later spans may reopen whole (as the next revision, with
    every earlier span): the spooled requests that hold its spans are kept while it is
    reopenable (``sessions.reopen_cache``), and read again, only they, to rebuild it."""

    session: str
    revision: int
    first_request: int
    requests: tuple[int, ...]
    traces: tuple[str, ...]  # hex trace ids
    spans: int


@dataclass
class Recovery:
    """What a restart needs: where to replay from, and what was already done."""

    replay_from: int = 1
    closed: dict[str, list[Closed]] = field(default_factory=dict)  # session -> revisions
    evaluated: set[tuple[str, int]] = field(default_factory=set)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # idempotency key -> record
    # Judge work that was waiting: idempotency key -> (first queued at (epoch s), failed calls).
    pending: dict[str, tuple[float, int]] = field(default_factory=dict)
    # Each session's latest evaluated revision (the most recently evaluated sessions first,
    # at most ``LATEST_REVISIONS``): the next one under its key is numbered after it.
    latest: dict[str, int] = field(default_factory=dict)
    reopenable: list[Reopenable] = field(default_factory=list)  # oldest first


class Spool(Protocol):
    durable: bool
    faults: Faults
    # Closed revisions not yet evaluated (session, revision) -> the first request they need:
    # what a restart must replay for them.
    unfinished: dict[tuple[str, int], int]

    async def append(self, signal: str, payload: bytes, tenant: str = "") -> int:
        """Commit one request (from ``tenant``); return its id once it is durable."""
        ...

    def record_closed(self, closed: Closed) -> None:
        """Note a closed revision (queued; committed with the next group)."""
        ...

    def keep_reopenable(self, entry: Reopenable) -> None:
        """Keep ``entry``'s requests (queued), replacing what its session had kept."""
        ...

    def forget_reopenable(self, session: str) -> None:
        """``session`` can no longer reopen whole: its kept requests may go (queued)."""
        ...

    async def read_requests(self, ids: tuple[int, ...]) -> list[tuple[int, str, bytes]]:
        """Those spooled requests (the ones still stored), in id order, read off the loop."""
        ...

    async def save_result(self, key: str, session: str, revision: int, record: dict[str, Any]) -> None:
        """Commit one judged result before anything else can depend on it."""
        ...

    async def save_coverage(self, revisions: list[Recorded]) -> None:
        """Commit evaluated session revisions, each a coverage line with its results (each as
        ``encode_record`` made it), in one transaction, marking them evaluated; earlier
        revisions' verdicts become superseded."""
        ...

    def pending_add(self, rows: list[PendingJudge]) -> None:
        """Note judge work queued (kept as first noted: a row queued again after a restart
        keeps its time); committed with the next group, nobody waits."""
        ...

    def pending_failed(self, key: str, attempts: int, error: str) -> None:
        """Note a failed call of waiting judge work (queued, nobody waits)."""
        ...

    def pending_done(self, keys: list[str]) -> None:
        """Judge work that has its final row (queued, nobody waits)."""
        ...

    async def revisions(self, session: str, not_before: float) -> list[list[dict[str, Any]]]:
        """A session's evaluated revisions (``queries.revisions``), evaluated at or after
        ``not_before`` (unix seconds)."""
        ...

    async def sessions(self, query: SessionQuery, not_before: float) -> SessionPage:
        """``queries.list_sessions``: latest revisions evaluated at or after ``not_before``."""
        ...

    async def overview(
        self, since: float, not_before: float, tenant: str | None = None
    ) -> dict[str, Any]: ...

    async def outbox_put(self, channel: str, entries: list[tuple[str, bytes, float]]) -> int: ...

    async def outbox_peek(self, channel: str, limit: int) -> list[tuple[str, bytes, float]]: ...

    async def outbox_ack(self, channel: str, keys: list[str]) -> None: ...

    def outbox_len(self, channel: str) -> int: ...

    async def checkpoint(self, replay_from: int, keep_results_for: float | None = None) -> None:
        """Requests before ``replay_from`` are no longer needed: remember it and delete them
        (but those a reopenable revision keeps), with the closed-revision records they alone
        needed; results, coverage lines and reopenable revisions older than
        ``keep_results_for`` seconds go too."""
        ...

    def recovery(self) -> Recovery: ...

    def requests(self, from_id: int) -> Iterator[tuple[int, str, bytes, str]]:
        """(request id, signal, payload, tenant) of each spooled request from ``from_id`` on."""
        ...

    def quarantine(
        self, request_id: int, signal: str, payload: bytes, reason: QuarantineReason, why: str
    ) -> None:
        """Set a spooled request that cannot be replayed aside (logged, counted, copied)."""
        ...

    def size_bytes(self) -> int: ...

    async def shutdown(self, timeout: float = 10.0) -> None: ...


class MemorySpool:
    """The spool's interface with nothing kept beyond the process.  Evaluated revisions are
    kept for the status API in an in-memory SQLite database with the spool's tables (the
    same queries answer), the latest ``revisions_capacity`` of them."""

    durable = False

    def __init__(self, outbox_capacity: int = 100_000, revisions_capacity: int = 10_000) -> None:
        self.unfinished: dict[tuple[str, int], int] = {}
        self.faults = Faults()
        self._db = sqlite3.connect(":memory:", isolation_level=None)
        migrate.create_in_memory(self._db)
        self._revisions_capacity = revisions_capacity
        # The revisions in ``coverage``, oldest saved first: the ones to let go are known
        # without counting or scanning the tables.
        self._kept: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._next = 0
        self._outbox: dict[str, MemoryOutbox] = {}
        self._capacity = outbox_capacity

    async def append(self, signal: str, payload: bytes, tenant: str = "") -> int:
        self._next += 1
        return self._next

    def record_closed(self, closed: Closed) -> None:
        self.unfinished[(closed.session, closed.revision)] = closed.first_request

    def keep_reopenable(self, entry: Reopenable) -> None:
        return None  # reopening reuses the evidence the assembler keeps in memory

    def forget_reopenable(self, session: str) -> None:
        return None

    async def read_requests(self, ids: tuple[int, ...]) -> list[tuple[int, str, bytes]]:
        return []

    async def save_result(self, key: str, session: str, revision: int, record: dict[str, Any]) -> None:
        return None

    async def save_coverage(self, revisions: list[Recorded]) -> None:
        now = time.time()
        rows = [(s, r, _with_results(line, results), now) for s, r, results, line in revisions]
        kept, saved = self._kept, dict.fromkeys((s, r) for s, r, _, _ in revisions)
        # The oldest kept, beyond capacity once these are in (one saved again is not let go).
        over = len(kept) + sum(1 for key in saved if key not in kept) - self._revisions_capacity
        evicted = list(itertools.islice((key for key in kept if key not in saved), max(0, over)))
        with self._db:
            self._db.execute("BEGIN")
            queries.index_revisions(self._db, rows)
            queries.forget_revisions(self._db, evicted)
        for key in evicted:  # committed: the order follows the tables
            del kept[key]
        for key in saved:
            kept[key] = None
            kept.move_to_end(key)  # saved again: the newest now
        for session, revision, _, _ in revisions:
            self.unfinished.pop((session, revision), None)

    def pending_add(self, rows: list[PendingJudge]) -> None:
        return None

    def pending_failed(self, key: str, attempts: int, error: str) -> None:
        return None

    def pending_done(self, keys: list[str]) -> None:
        return None

    async def revisions(self, session: str, not_before: float) -> list[list[dict[str, Any]]]:
        return queries.revisions(self._db, session, not_before)

    async def sessions(self, query: SessionQuery, not_before: float) -> SessionPage:
        return queries.list_sessions(self._db, query, not_before)

    async def overview(self, since: float, not_before: float, tenant: str | None = None) -> dict[str, Any]:
        return queries.overview(self._db, since, not_before, tenant)

    async def outbox_put(self, channel: str, entries: list[tuple[str, bytes, float]]) -> int:
        box = self._outbox.get(channel)
        if box is None:
            box = self._outbox[channel] = MemoryOutbox(self._capacity)
        return await box.put([Entry(key, payload, at) for key, payload, at in entries])

    async def outbox_peek(self, channel: str, limit: int) -> list[tuple[str, bytes, float]]:
        box = self._outbox.get(channel)
        return [] if box is None else [(e.key, e.payload, e.enqueued_at) for e in await box.peek(limit)]

    async def outbox_ack(self, channel: str, keys: list[str]) -> None:
        box = self._outbox.get(channel)
        if box is not None:
            await box.ack(keys)

    def outbox_len(self, channel: str) -> int:
        box = self._outbox.get(channel)
        return 0 if box is None else len(box)

    async def checkpoint(self, replay_from: int, keep_results_for: float | None = None) -> None:
        if keep_results_for is not None:
            cutoff = time.time() - keep_results_for
            with self._db:
                self._db.execute("BEGIN")
                expired = "SELECT session, revision FROM coverage WHERE evaluated_at < ?"
                keys = self._db.execute(expired, (cutoff,)).fetchall()
                for statement in _EXPIRE[1:]:
                    self._db.execute(statement, (cutoff,))
            for key in keys:  # committed: the order follows the tables, as in save_coverage
                self._kept.pop(key, None)

    def recovery(self) -> Recovery:
        return Recovery()

    def requests(self, from_id: int) -> Iterator[tuple[int, str, bytes, str]]:
        return iter(())

    def quarantine(
        self, request_id: int, signal: str, payload: bytes, reason: QuarantineReason, why: str
    ) -> None:
        self.faults.quarantined[reason] += 1

    def size_bytes(self) -> int:
        return 0

    async def shutdown(self, timeout: float = 10.0) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _Rows:
    """Rows for one INSERT; a transaction's ``_Rows`` of one statement share multi-row INSERTs."""

    insert: str  # "INSERT ... INTO table (columns)", without VALUES
    rows: list[tuple[Any, ...]]


# (work, future to settle or None, its loop, kind: "request" is urgent (an acknowledgement
# waits for it; a single statement), "write" is any other, "probe" a check that storage works)
_Work = tuple[
    "Callable[[sqlite3.Connection], Any] | _Rows",
    "asyncio.Future[Any] | None",
    "asyncio.AbstractEventLoop | None",
    WriteKind,
]
_STOP: _Work = (lambda db: None, None, None, "write")  # shutdown: commit what is queued, then stop
_INSERT_CLOSED = "INSERT OR REPLACE INTO closed (session, revision, reason, first_request, last_request, traces, closed_at)"
_INSERT_RESULT = "INSERT OR IGNORE INTO results (key, session, revision, record, created_at)"
_INSERT_PENDING = "INSERT OR IGNORE INTO judge_pending (key, session, revision, evaluation, enqueued_at)"
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
        self._capacity = outbox_capacity
        self._outbox_len: dict[str, int] = {}
        self._segments = Segments(self.path.parent / "requests", segment_bytes, write)
        self._quarantine = self.path.parent / "quarantine"
        self._free_db_bytes = 0  # free pages in the database file, as of the last checkpoint
        self._last_refused = 0  # bytes of the last request refused for a failed write
        self._retries_waiting = 0  # failed writes nobody waits for, not yet tried again
        self._next_id = 1  # set by ``_load``
        try:
            self._recovery = self._load()
        except sqlite3.DatabaseError as err:  # damage quick_check did not see: the same refusal
            raise StoreRefused(
                f"storage.path: refusing to start: the database {self.path} is damaged ({err}). "
                "Nothing was deleted. Run `skillgauge recover --config FILE` to rebuild it from the "
                f"request segments, or move {self.path.parent} aside to start with an empty store"
            ) from None
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        # Reads for the status API: one connection of their own (WAL: they never wait for the
        # writer), used from a worker thread (``asyncio.to_thread``), one read at a time.
        self._reader = sqlite3.connect(self.path, check_same_thread=False)
        self._reader_lock = threading.Lock()
        self._reopen_ops: list[Reopenable | str] = []  # for ``_write_reopen``
        self._reopen_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="skillgauge-spool", daemon=True)
        self._thread.start()
        self._stopped = threading.Event()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_forever, name="skillgauge-wal", daemon=True
        )
        self._checkpointer.start()
        self.commits = 0
        self._put(self._probe, kind="probe")  # a full disk at startup: unavailable from the start
        self._put(_recount_outbox)  # before any put or ack; retried while storage fails

    # -- reads at startup (before the writer runs) --------------------------------------------

    def _load(self) -> Recovery:
        db = sqlite3.connect(self.path)
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
            self._move_blobs(db)
            # Request ids only grow, across restarts too: ``replay_from`` may be past every row
            # left (SQLite would number the next row of an empty table 1, and a restart would
            # then skip it).
            (last,) = db.execute("SELECT MAX(id) FROM spooled").fetchone()
            self._next_id = max(int(last or 0) + 1, recovery.replay_from)
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
            for key, enqueued_at, attempts in db.execute(
                "SELECT key, enqueued_at, attempts FROM judge_pending"
            ):
                recovery.pending[key] = (float(enqueued_at), int(attempts))
            # Counted once here (and written by the first write, ``_recount_outbox``), then
            # kept by each put and ack (``_outbox_add``).
            for channel, count in db.execute("SELECT channel, COUNT(*) FROM outbox GROUP BY channel"):
                self._outbox_len[channel] = int(count)
            return recovery
        finally:
            db.close()

    def _move_blobs(self, db: sqlite3.Connection) -> None:
        """Spools from before segment files kept request bytes in a ``requests`` table: move
        them into a segment, keeping their ids, in one transaction (rerun after a crash)."""
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'requests'").fetchone():
            return
        with db:
            for request_id, received_at, signal, payload in db.execute(  # one blob at a time
                "SELECT id, received_at, signal, payload FROM requests ORDER BY id"
            ):
                where = self._segments.append(payload)
                db.execute(
                    "INSERT OR REPLACE INTO spooled (id, received_at, signal, segment, offset, length) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (request_id, received_at, signal, where.segment, where.offset, where.length),
                )
            db.execute("DROP TABLE requests")
        self._segments.close()

    def recovery(self) -> Recovery:
        return self._recovery

    def requests(self, from_id: int) -> Iterator[tuple[int, str, bytes, str]]:
        """Spooled requests from ``from_id`` on (id, signal, payload, tenant), read through a
        connection of the caller's own.
        A request whose bytes cannot be read is quarantined (what is left of them) and
        skipped: the others still replay."""
        db = sqlite3.connect(self.path)
        try:
            rows = db.execute(
                "SELECT id, signal, segment, offset, length, tenant FROM spooled WHERE id >= ? ORDER BY id",
                (from_id,),
            )
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

    def _submit(
        self, work: Callable[[sqlite3.Connection], T] | _Rows, *, kind: WriteKind = "write"
    ) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        self._queue.put((work, done, loop, kind))
        return done

    def _put(self, work: Callable[[sqlite3.Connection], Any] | _Rows, kind: WriteKind = "write") -> None:
        """Queue work nobody waits for (it commits with a later group, in order; retried
        while storage fails)."""
        self._queue.put((work, None, None, kind))

    async def append(self, signal: str, payload: bytes, tenant: str = "") -> int:
        """Commit one request (from ``tenant``); raise ``Retryable`` (reason
        ``storage_error``) if it cannot be stored: nothing of it is kept."""
        now = time.time()

        def insert(db: sqlite3.Connection) -> int:
            # The bytes first: a row is never committed without them (see ``segments``).
            where = self._segments.append(payload, signal, tenant)
            try:
                db.execute(
                    "INSERT INTO spooled VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (self._next_id, now, signal, where.segment, where.offset, where.length, tenant),
                )
            except BaseException:
                self._segments.trim(where)  # bytes no row will point to
                raise
            request_id, self._next_id = self._next_id, self._next_id + 1
            return request_id

        try:
            return await self._submit(insert, kind="request")
        except (OSError, sqlite3.Error) as err:
            self._last_refused = len(payload)
            raise Retryable(
                f"the spool cannot store the request ({_describe(err)}); retry later",
                retry_after=RETRY_AFTER,
                reason="storage_error",
            ) from err

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
        self._put(_Rows(_INSERT_CLOSED, [row]))

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
        await self._submit(_Rows(_INSERT_RESULT, [row]))

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
            (session, revision, _with_results(line, results), now)
            for session, revision, results, line in revisions
        ]
        if rows:  # parsed for the listing's columns in the writer thread, not on the loop
            await self._submit(lambda db: queries.index_revisions(db, rows))
        for session, revision, _, _ in revisions:
            self.unfinished.pop((session, revision), None)

    def pending_add(self, rows: list[PendingJudge]) -> None:
        if rows:
            self._put(_Rows(_INSERT_PENDING, list(rows)))

    def pending_failed(self, key: str, attempts: int, error: str) -> None:
        self._put(
            lambda db: db.execute(
                "UPDATE judge_pending SET attempts = ?, last_error = ? WHERE key = ?",
                (attempts, error[:500], key),
            )
        )

    def pending_done(self, keys: list[str]) -> None:
        if keys:
            self._put(lambda db: sql.where_in(db, "DELETE FROM judge_pending WHERE key IN ({in})", keys))

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

    async def outbox_put(self, channel: str, entries: list[tuple[str, bytes, float]]) -> int:
        capacity = self._capacity

        def write(db: sqlite3.Connection) -> tuple[int, int]:
            keys = list(dict.fromkeys(key for key, _, _ in entries))
            waiting = sql.count_in(
                db, "SELECT COUNT(*) FROM outbox WHERE key IN ({in}) AND channel = ?", keys, channel
            )
            sql.insert_rows(
                db,
                "INSERT OR REPLACE INTO outbox (channel, key, payload, enqueued_at)",
                [(channel, key, payload, at) for key, payload, at in entries],
            )
            count = _outbox_add(db, channel, len(keys) - waiting)  # a key put again replaces its entry
            over = max(0, count - capacity)
            if over:
                dropped = db.execute(
                    "DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox WHERE channel = ? ORDER BY seq LIMIT ?)",
                    (channel, over),
                ).rowcount
                count = _outbox_add(db, channel, -dropped)
            return count, over

        length, dropped = await self._submit(write)
        self._outbox_len[channel] = length
        return dropped

    async def outbox_peek(self, channel: str, limit: int) -> list[tuple[str, bytes, float]]:
        return await self._submit(
            lambda db: [
                (str(k), bytes(p), float(t))
                for k, p, t in db.execute(
                    "SELECT key, payload, enqueued_at FROM outbox WHERE channel = ? ORDER BY seq LIMIT ?",
                    (channel, limit),
                )
            ]
        )

    async def outbox_ack(self, channel: str, keys: list[str]) -> None:
        def write(db: sqlite3.Connection) -> int:
            acked = sql.where_in(db, "DELETE FROM outbox WHERE key IN ({in}) AND channel = ?", keys, channel)
            return _outbox_add(db, channel, -acked)

        self._outbox_len[channel] = await self._submit(write)

    def outbox_len(self, channel: str) -> int:
        return self._outbox_len.get(channel, 0)

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
            self._segments.drop_before(None if first is None else int(first))
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
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join, timeout)
        self._stopped.set()
        await asyncio.to_thread(self._checkpointer.join, timeout)
        self._segments.close()
        with self._reader_lock:
            self._reader.close()

    def _run(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=True)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: nothing committed is lost on a crash
        # The WAL file shrinks back to this after a burst.
        db.execute(f"PRAGMA journal_size_limit={self._wal_size_limit}")
        db.execute(f"PRAGMA wal_autocheckpoint={_WRITER_CHECKPOINT_PAGES}")
        other: deque[_Work] = deque()  # queued behind requests, in order
        retry: list[_Work] = []  # writes nobody waits for that failed, tried again at ``retry_at``
        retry_at = 0.0
        probed_at = 0.0
        stopping = False
        while True:
            now = time.monotonic()
            # Storage failing may come back with no request to try it: probe it every
            # ``_PROBE_EVERY`` seconds, the first time one interval after the failure.
            if self.faults.unavailable is None:
                probed_at = 0.0
            elif not probed_at:
                probed_at = now
            elif now - probed_at >= _PROBE_EVERY:
                probed_at = now
                other.append((self._probe, None, None, "probe"))
            if retry and (stopping or now >= retry_at):
                other.extendleft(reversed(retry))  # before what came later, as first queued
                retry = []
            self._retries_waiting = len(retry)
            urgent: list[_Work] = []
            if not stopping:
                # Block for work only when none is left over from the last group.
                wake = [t for t in (retry_at if retry else None, self._probe_due(probed_at)) if t is not None]
                item = self._next(block=not other, until=min(wake) if wake else None)
                while item is not None:
                    if item is _STOP:
                        stopping = True
                        break
                    (urgent if item[3] == "request" else other).append(item)
                    item = self._next_nowait()
            if not urgent and not other:
                if stopping and not retry:
                    break
                continue
            # Every waiting request, and a bounded share of the rest.  (Requests alone, with the
            # rest one transaction later, measured the same p99 and made each awaited session
            # write a transaction slower: evaluation lag p95 0.04 s -> 0.2 s.)
            group = urgent + [other.popleft() for _ in range(min(_OTHER_PER_GROUP, len(other)))]
            try:
                failed = self._commit(db, group)
            except Exception as err:  # a bug must not stop the writer: every caller would wait forever
                log.exception("spool writer: a group of %d writes failed", len(group))
                with contextlib.suppress(sqlite3.Error):
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                self._settle_all(group, [(None, err)] * len(group))
                continue
            if failed and stopping and not other:
                log.error(
                    "spool writer: %d writes (closed session revisions) could not be committed before "
                    "shutdown; a restart replays their sessions from the spool",
                    len(failed),
                )
                break
            if failed:
                retry.extend(failed)
                retry_at = time.monotonic() + _RETRY_WRITES_EVERY
        db.close()

    def _probe_due(self, probed_at: float) -> float | None:
        """When the next probe of failing storage is due (None: storage works)."""
        return probed_at + _PROBE_EVERY if self.faults.unavailable is not None else None

    def _next(self, block: bool, until: float | None) -> _Work | None:
        if not block:
            return self._next_nowait()
        try:
            timeout = None if until is None else max(0.0, until - time.monotonic())
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def _next_nowait(self) -> _Work | None:
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def _commit(self, db: sqlite3.Connection, group: list[_Work]) -> list[_Work]:
        """Run and commit one group; settle its futures.  Returns the writes nobody waits for
        that failed for want of storage (to be tried again)."""
        outcomes: list[tuple[Any, BaseException | None]] = [(None, None)] * len(group)
        work, _, _, kind = group[0]
        if len(group) == 1 and kind != "write" and not isinstance(work, _Rows):
            # A lone request is one INSERT, which commits by itself (autocommit): each SQLite
            # call gives the GIL away and must win it back, so BEGIN and COMMIT around it
            # would add two waits behind a busy event loop.
            try:
                outcomes[0] = (work(db), None)
                self.commits += 1
            except Exception as err:  # OSError: a segment write (a full disk)
                outcomes[0] = (None, err)
            return self._settle_all(group, outcomes)
        try:
            db.execute("BEGIN")
            # Rows first, one statement per table for the whole group, then the other work in
            # order.  Nothing queued needs to run before a row insert of its own transaction:
            # inserts are idempotent, and superseding only touches earlier revisions' rows.
            by_insert: dict[str, list[int]] = {}
            for i, (work, _, _, _) in enumerate(group):
                if isinstance(work, _Rows):
                    by_insert.setdefault(work.insert, []).append(i)
            for indexes in by_insert.values():
                batch = [work for i in indexes if isinstance(work := group[i][0], _Rows)]
                for i, outcome in zip(indexes, _insert_rows(db, batch), strict=True):
                    outcomes[i] = outcome
                    _lost_transaction(db, outcome[1])
            for i, (work, _, _, _) in enumerate(group):
                if isinstance(work, _Rows):
                    continue
                try:
                    outcomes[i] = (work(db), None)
                except Exception as err:  # one bad write fails alone, the group commits
                    outcomes[i] = (None, err)
                    _lost_transaction(db, err)
            db.execute("COMMIT")
            self.commits += 1
        except sqlite3.Error as err:
            # A full disk or an I/O error may have rolled the whole transaction back: nothing
            # of the group was kept, whatever each write said.
            with contextlib.suppress(sqlite3.Error):
                if db.in_transaction:
                    db.execute("ROLLBACK")
            outcomes = [(None, err)] * len(group)
        return self._settle_all(group, outcomes)

    def _settle_all(
        self, group: list[_Work], outcomes: list[tuple[Any, BaseException | None]]
    ) -> list[_Work]:
        settled: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]]
        settled = {}
        failed: list[_Work] = []
        storage_error: BaseException | None = None
        works = False  # a request or a probe was stored: storage takes writes again
        for item, (value, error) in zip(group, outcomes, strict=True):
            _, done, loop, kind = item
            works = works or (error is None and kind != "write")
            if error is not None and is_storage_error(error):
                storage_error = error
                if kind != "probe":
                    self.faults.write_failures[kind] += 1
                if done is None and kind == "write":
                    failed.append(item)
            if done is not None and loop is not None:
                settled.setdefault(loop, []).append((done, value, error))
        # Storage works again once a request or a probe is stored and no failed write waits
        # to be tried again (it may need more room than they do).
        self._note(storage_error, works and not self._retries_waiting, failed)
        for loop, answers in settled.items():
            # One wake-up of each waiting loop per transaction, not one per caller: each is a
            # write to the loop's self-pipe, and a transaction can settle dozens of sessions.
            loop.call_soon_threadsafe(_settle_each, answers)
        return failed

    def _note(self, error: BaseException | None, works: bool, failed: list[_Work]) -> None:
        """Storage is unavailable from a failed write to the next group that stores a request
        or a probe and fails nothing; logged at ERROR once a burst, and once when it is over."""
        faults = self.faults
        if error is None:
            if works and faults.unavailable is not None:
                log.warning("spool: storage works again (%s before)", faults.unavailable)
                faults.unavailable = None
            return
        if faults.unavailable is None:
            log.error(
                "spool: a write failed (%s): requests are refused as retryable and /readyz answers 503 "
                "until storage works again%s",
                _describe(error),
                f"; {len(failed)} closed-session records will be retried" if failed else "",
            )
        faults.unavailable = _describe(error)

    def _probe(self, db: sqlite3.Connection) -> None:
        """A small write of each kind an append makes (segment bytes, a row): what tells the
        store that storage works again when no request comes to try it (readiness is 503)."""
        self._segments.probe(min(max(self._last_refused, 1), _PROBE_BYTES))
        db.execute("INSERT OR REPLACE INTO state (name, value) VALUES ('probed_at', ?)", (int(time.time()),))

    def _checkpoint_forever(self) -> None:
        """Every ``_CHECKPOINT_EVERY`` seconds until shutdown, copy the WAL's committed pages
        into the database on this thread's own connection.  A passive checkpoint waits for no
        reader or writer, and the writer appends to the WAL while it copies: no commit, and
        so no acknowledgement, waits for a copy or its sync."""
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=True)
        except sqlite3.Error:  # the writer checkpoints past its backstop instead
            log.exception("spool: the WAL checkpointer cannot open %s", self.path)
            return
        try:
            while not self._stopped.wait(_CHECKPOINT_EVERY):
                with contextlib.suppress(sqlite3.OperationalError):  # busy or a full disk: next time
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            db.close()


def _recount_outbox(db: sqlite3.Connection) -> None:
    """Set ``outbox_rows`` from the rows themselves (a spool from before it was kept, or a
    count gone wrong), in the caller's transaction."""
    db.execute("DELETE FROM outbox_rows")
    db.execute("INSERT INTO outbox_rows SELECT channel, COUNT(*) FROM outbox GROUP BY channel")


def _outbox_add(db: sqlite3.Connection, channel: str, change: int) -> int:
    """Add ``change`` to the channel's row count (``outbox_rows``) in the caller's
    transaction, so that a group rolled back takes its changes back too; returns the count."""
    (count,) = db.execute(
        "INSERT INTO outbox_rows (channel, count) VALUES (?, ?) "
        "ON CONFLICT (channel) DO UPDATE SET count = count + excluded.count RETURNING count",
        (channel, change),
    ).fetchone()
    return int(count)


def _describe(err: BaseException) -> str:
    """A failed write in a few words: ``No space left on device`` rather than a repr."""
    if isinstance(err, OSError) and err.errno is not None:
        return f"{os.strerror(err.errno)} [{errno.errorcode.get(err.errno, err.errno)}]"
    return str(err) or type(err).__name__


def _lost_transaction(db: sqlite3.Connection, error: BaseException | None) -> None:
    """Raise ``error`` again if it made SQLite roll the transaction back by itself (it may on
    a full disk or an I/O error): what the group wrote before it is gone, so none of it may be
    reported done."""
    if error is not None and not db.in_transaction:
        raise error


def _with_results(coverage: str, results: list[str]) -> str:
    """A coverage line (a JSON object's text) with the results' texts added as "results"."""
    if not (coverage.startswith("{") and coverage.endswith("}")):
        raise ValueError("a coverage line is a JSON object")
    fields = coverage[1:-1].strip()
    return f'{{{fields}{"," if fields else ""}"results":[{",".join(results)}]}}'


def _insert_rows(db: sqlite3.Connection, batch: list[_Rows]) -> list[tuple[Any, BaseException | None]]:
    """Insert the rows of a group's ``_Rows`` of one statement, a few hundred per statement;
    if a statement fails, each ``_Rows`` is tried alone so that a bad one fails alone."""
    try:
        sql.insert_rows(db, batch[0].insert, [row for work in batch for row in work.rows])
        return [(None, None)] * len(batch)
    except sqlite3.Error:
        pass  # a failed statement changes nothing; the rows go again, one ``_Rows`` at a time
    outcomes: list[tuple[Any, BaseException | None]] = []
    for work in batch:
        try:
            sql.insert_rows(db, work.insert, work.rows)
            outcomes.append((None, None))
        except sqlite3.Error as err:
            outcomes.append((None, err))
    return outcomes


def _settle_each(answers: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for done, value, error in answers:
        if done.done():
            continue
        if error is None:
            done.set_result(value)
        else:
            done.set_exception(error)


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
