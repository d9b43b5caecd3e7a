"""The store's writer: one thread owns the SQLite connection that writes, and commits work in
groups.

Work queued while a commit runs shares the next transaction (group commit), so the event
loop never waits on disk per request and syncs stay few under load.  ``synchronous=NORMAL``
with WAL loses nothing on a process crash.  A second thread, on a connection of its own,
copies committed pages from the WAL into the database (a passive checkpoint, with its sync):
commits neither wait for it nor stop it.

Requests come first: an Export call waits for its commit, so each transaction takes every
waiting request but at most 64 other writes (closed revisions, results, coverage, outbox,
deletions), and the rest follows in the next: no transaction grows long enough to hold up a
request that arrives while it runs.  Rows for the same table that queue up together
(``Rows``) are inserted by one multi-row statement: each SQLite call hands the GIL to the
event loop and must win it back, so statements, not rows, are what a busy loop makes slow.
For the same reason work nobody waits for (``put``) wakes the writer once for all that is
put within ``_GATHER`` of it, not once each: work someone waits for (``submit``) wakes it at
once, and takes what was put before it along, in order.

Storage that fails (a full disk, an I/O error) fails safe: the failure is counted
(``Faults``) and the store reports itself unavailable until a write succeeds again: the next
request, or a small probe (the caller's) written every second.  Other writes nobody waits for
are retried until they commit, at once when the caller's ``make_room`` freed room for them
(the store's reserve), else a second later; the writer thread never dies of a failed write.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from collector.db import sql
from collector.db.location import Location

log = logging.getLogger(__name__)

# Work other than requests per transaction: a request that arrives while a transaction runs
# waits for it, so it stays short (~5 ms) even when a wave of closed sessions is queued.
_OTHER_PER_GROUP = 64
# How often the WAL's committed pages are copied into the database.  A page written many
# times between two copies is copied once; the WAL grows by what the tables get meanwhile.
_CHECKPOINT_EVERY = 0.5  # seconds
# The writer copies the WAL itself, inside a commit, only past this many pages: a backstop
# for a checkpointer that falls behind (SQLite's default, 1,000, would take its work).
_WRITER_CHECKPOINT_PAGES = 8192
# While storage fails: how often the store tries a small write to learn that it works again,
# and how soon a failed write nobody waits for (a closed revision) is tried again.
_PROBE_EVERY = 1.0
_RETRY_WRITES_EVERY = 1.0
# Work nobody waits for (``put``) wakes the writer once for all that is put within this long:
# a wake-up hands the GIL to the writer and back, which cost the event loop more than the
# row (one wake-up a closed session, ~35 % of closing one, in a served replica at saturation),
# and each group's statements hand it over again.  At 50 ms a saturated replica's writer
# switched ~300 times a second (10 ms: ~650, waking at each put: ~850) and took ~25 % less
# CPU than waking at each put; what waits is closed rows, request rows and recorded
# revisions' metrics (bench.py, tests/perf/README.md).
_GATHER = 0.05  # seconds
T = TypeVar("T")

WriteKind = Literal["request", "write", "probe"]


def is_storage_error(err: BaseException) -> bool:
    """A failure of the disk or the database file (full, I/O error, corrupt), not of a caller's
    arguments: what makes the store unavailable and is worth retrying."""
    if isinstance(err, OSError):
        return True
    if type(err).__module__.startswith("psycopg"):  # the shared store's server or connection
        import psycopg

        return isinstance(err, psycopg.OperationalError)
    return isinstance(err, sqlite3.OperationalError) or type(err) is sqlite3.DatabaseError


@dataclass
class Faults:
    """What went wrong with the storage: for readiness and the metrics.  Written by the
    writer thread, read by the event loop (single assignments and increments)."""

    unavailable: str | None = None  # why writes fail now; None once one succeeds again
    write_failures: dict[str, int] = field(default_factory=lambda: {"request": 0, "write": 0})
    quarantined: dict[str, int] = field(default_factory=lambda: {"unreadable": 0, "undecodable": 0})


@dataclass(frozen=True, slots=True)
class Rows:
    """Rows for one INSERT; a transaction's ``Rows`` of one statement share multi-row INSERTs."""

    insert: str  # "INSERT ... INTO table (columns)", without VALUES
    rows: list[tuple[Any, ...]]


# (work, future to settle or None, its loop, kind: "request" is urgent (an acknowledgement
# waits for it; a single statement), "write" is any other, "probe" a check that storage works)
_Work = tuple[
    "Callable[[sqlite3.Connection], Any] | Rows",
    "asyncio.Future[Any] | None",
    "asyncio.AbstractEventLoop | None",
    WriteKind,
]
_STOP: _Work = (lambda db: None, None, None, "write")  # shutdown: commit what is queued, then stop
_NOW, _LATER = "now", "later"  # what a signal to the writer asks: take the work at once, or soon


class Writer:
    """The writer thread and the WAL checkpointer of the SQLite database at ``location`` (an
    in-memory one has no WAL: no checkpointer).  ``probe`` is the small write tried while
    storage fails (``Faults.unavailable``); ``make_room`` frees room kept for the writer's own
    writes when a group fails for want of storage (True: it did, and they go again at once)."""

    def __init__(
        self,
        location: Location,
        wal_size_limit: int,
        faults: Faults,
        probe: Callable[[sqlite3.Connection], None],
        make_room: Callable[[], bool] = lambda: False,
    ) -> None:
        self.location = location
        self.faults = faults
        self.commits = 0
        self._wal_size_limit = wal_size_limit
        self._probe = probe
        self._make_room = make_room
        self._room_made = False  # the last failed group freed room: its writes go again at once
        self._retries_waiting = 0  # failed writes nobody waits for, not yet tried again
        # Every piece of work, in the order queued; the writer hears of it through ``_signals``.
        self._work: deque[_Work] = deque()
        self._signals: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._armed = False  # a ``_LATER`` signal is out: work ``put`` since needs none
        self._thread = threading.Thread(target=self._run, name="skillgauge-spool", daemon=True)
        self._thread.start()
        self._stopped = threading.Event()
        self.checkpointer = threading.Thread(
            target=self._checkpoint_forever, name="skillgauge-wal", daemon=True
        )
        if location.durable:
            self.checkpointer.start()

    def submit(
        self, work: Callable[[sqlite3.Connection], T] | Rows, *, kind: WriteKind = "write", soon: bool = False
    ) -> asyncio.Future[T]:
        """Queue work and return the future its commit settles: at once, or with ``soon`` as
        work ``put`` is (within ``_GATHER``, with what is put meanwhile)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        self._work.append((work, done, loop, kind))
        if not soon:
            self._signals.put(_NOW)
        elif not self._armed:
            self._armed = True
            self._signals.put(_LATER)
        return done

    def put(self, work: Callable[[sqlite3.Connection], Any] | Rows, kind: WriteKind = "write") -> None:
        """Queue work nobody waits for (it commits with a later group, in order; retried
        while storage fails).  It wakes the writer only if nothing else put has yet: the
        writer then waits up to ``_GATHER`` for more (or for work someone waits for) and
        takes all of it at once."""
        self._work.append((work, None, None, kind))
        if not self._armed:
            self._armed = True
            self._signals.put(_LATER)

    def failed(self, error: BaseException) -> None:
        """A write made on another thread (a request's segment frame, on the event loop)
        failed: storage is unavailable until a probe, tried from now on, is stored."""
        self._note(error, False, [])
        self.put(self._probe, "probe")

    async def stop(self, timeout: float) -> None:
        """Commit what is queued, then stop both threads."""
        self._work.append(_STOP)
        self._signals.put(_NOW)
        await asyncio.to_thread(self._thread.join, timeout)
        self._stopped.set()
        if self.checkpointer.is_alive():
            await asyncio.to_thread(self.checkpointer.join, timeout)

    def _run(self) -> None:
        db = self.location.connect(autocommit=True)
        db.execute("PRAGMA journal_mode=WAL")  # in memory: stays "memory"
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
                retry_at = time.monotonic() + (0.0 if self._room_made else _RETRY_WRITES_EVERY)
            self._room_made = False
        db.close()

    def _probe_due(self, probed_at: float) -> float | None:
        """When the next probe of failing storage is due (None: storage works)."""
        return probed_at + _PROBE_EVERY if self.faults.unavailable is not None else None

    def _next(self, block: bool, until: float | None) -> _Work | None:
        """The oldest work queued; when there is none and ``block``, wait for a signal (up to
        ``until``), and after a ``_LATER`` one up to ``_GATHER`` more, for work to share it."""
        if not block or self._work:
            return self._next_nowait()
        try:
            timeout = None if until is None else max(0.0, until - time.monotonic())
            signal = self._signals.get(timeout=timeout)
            if signal == _LATER:
                with contextlib.suppress(queue.Empty):
                    while self._signals.get(timeout=_GATHER) != _NOW:
                        pass
        except queue.Empty:
            pass
        self._armed = False  # what is put from now on signals again
        return self._next_nowait()

    def _next_nowait(self) -> _Work | None:
        try:
            return self._work.popleft()
        except IndexError:
            return None

    def _commit(self, db: sqlite3.Connection, group: list[_Work]) -> list[_Work]:
        """Run and commit one group; settle its futures.  Returns the writes nobody waits for
        that failed for want of storage (to be tried again)."""
        outcomes: list[tuple[Any, BaseException | None]] = [(None, None)] * len(group)
        work, _, _, kind = group[0]
        if len(group) == 1 and kind != "write" and not isinstance(work, Rows):
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
                if isinstance(work, Rows):
                    by_insert.setdefault(work.insert, []).append(i)
            for indexes in by_insert.values():
                batch = [work for i in indexes if isinstance(work := group[i][0], Rows)]
                for i, outcome in zip(indexes, _insert_rows(db, batch), strict=True):
                    outcomes[i] = outcome
                    _lost_transaction(db, outcome[1])
            for i, (work, _, _, _) in enumerate(group):
                if isinstance(work, Rows):
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
        if storage_error is not None and any(kind != "probe" for _, _, _, kind in group):
            self._room_made = self._make_room()  # room kept for these writes (``make_room``)
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
                describe(error),
                f"; {len(failed)} closed-session records will be retried" if failed else "",
            )
        faults.unavailable = describe(error)

    def _checkpoint_forever(self) -> None:
        """Every ``_CHECKPOINT_EVERY`` seconds until shutdown, copy the WAL's committed pages
        into the database on this thread's own connection.  A passive checkpoint waits for no
        reader or writer, and the writer appends to the WAL while it copies: no commit, and
        so no acknowledgement, waits for a copy or its sync."""
        try:
            db = self.location.connect(autocommit=True)
        except sqlite3.Error:  # the writer checkpoints past its backstop instead
            log.exception("spool: the WAL checkpointer cannot open %s", self.location.path)
            return
        try:
            while not self._stopped.wait(_CHECKPOINT_EVERY):
                with contextlib.suppress(sqlite3.OperationalError):  # busy or a full disk: next time
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            db.close()


def describe(err: BaseException) -> str:
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


def _insert_rows(db: sqlite3.Connection, batch: list[Rows]) -> list[tuple[Any, BaseException | None]]:
    """Insert the rows of a group's ``Rows`` of one statement, a few hundred per statement;
    if a statement fails, each ``Rows`` is tried alone so that a bad one fails alone."""
    try:
        sql.insert_rows(db, batch[0].insert, [row for work in batch for row in work.rows])
        return [(None, None)] * len(batch)
    except sqlite3.Error:
        pass  # a failed statement changes nothing; the rows go again, one ``Rows`` at a time
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
