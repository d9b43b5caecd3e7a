"""The request log: every accepted OTLP request, written and synced before it is
acknowledged.  Its bytes go to segment files in the data directory
(``collector.state.segments``), on the event loop, and are made durable by one
``fdatasync`` for the appends of a loop turn, off the loop (``collector.state.synced``);
where they are, and the tenant each came from, to the local ``spooled`` index,
committed after by the writer thread (a restart indexes any frame left without its row:
``collector.state.appended``).  It is local to each replica (session routing makes it so)
and never leaves the data directory.

Storage that fails (a full disk, an I/O error) fails safe: a request that cannot be stored
is refused as ``Retryable`` (the sender retries it; a half-written request is cut off its
segment file).  A spooled request that cannot be read back at a restart is copied to
``quarantine/`` beside the database and left out of the replay.

In memory (``storage.path: ":memory:"``) nothing of a request is kept: it is numbered, and
reopening reuses the evidence the assembler holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from collector.component import Retryable
from collector.db.location import Location
from collector.db.writer import Faults, Writer, describe
from collector.state.appended import Appended, unindexed
from collector.state.reserve import Reserve
from collector.state.segments import Segments, Spooled
from collector.state.synced import GroupSync
from collector.state.types import QuarantineReason

log = logging.getLogger(__name__)

# While storage fails: how soon a sender may retry a refused request.
RETRY_AFTER = 5.0
_PROBE_BYTES = 1024 * 1024  # at most: a probe writes as much as the last refused request
_READ_CHUNK = 500


class RequestLog:
    """The requests of one data directory (``segments`` None: in memory, nothing kept)."""

    def __init__(
        self,
        location: Location,
        segments: Segments | None,
        faults: Faults,
        next_id: int,
        quarantine: Path | None,
        *,
        synced: bool = True,
        reserve: Reserve | None = None,
    ) -> None:
        """``synced``: an append returns once its bytes are synced (``storage.sync``);
        ``reserve``: room kept for the writes that finish acknowledged requests (requests are
        refused while it is released)."""
        self._location = location
        self._segments = segments
        self._database_file = _identity(location.path)  # the file the store opened
        self._database_gone = False  # found deleted or replaced since: logged once
        self._reserve = reserve
        if reserve is not None:
            with contextlib.suppress(OSError):  # no room: refused until the probe finds some
                reserve.restore()
        self._faults = faults
        self._next_id = next_id
        self._quarantine = quarantine
        self._last_refused = 0  # bytes of the last request refused for a failed write
        self.writer: Writer | None = None  # set by ``start`` (after startup's reads)
        self._appended: Appended | None = None
        self._synced = GroupSync(segments.sync) if segments is not None and synced else None
        # Reads of kept requests (reopening): one connection, from a worker thread.
        self._reader = location.connect(check_same_thread=False)
        self._reader_lock = threading.Lock()

    def start(self, writer: Writer) -> None:
        """Append through ``writer`` from now on (it commits the rows)."""
        self.writer = writer
        if self._segments is not None:
            self._appended = Appended(self._segments, writer.put)

    async def append(self, signal: str, payload: bytes, tenant: str = "") -> int:
        """Write one request (from ``tenant``) to its segment file, on the calling thread, and
        queue its row; return once a sync made it durable (``GroupSync``: one ``fdatasync``
        for the appends of a loop turn, off the loop; unless ``storage.sync`` is off).  Raise
        ``Retryable`` (reason ``storage_error``) if it cannot be written (nothing of it is
        kept) or synced (its frame stays: a restart replays it, and the sender's retry is a
        duplicate)."""
        appended, writer = self._appended, self.writer
        if appended is not None and writer is not None:
            if self._reserve is not None and self._reserve.released:
                self._last_refused = len(payload)
                full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "the spool's reserve is in use")
                raise self._refused(writer, full, "store")
            try:
                appended.append(self._next_id, signal, payload, tenant)
            except OSError as err:
                self._last_refused = len(payload)
                raise self._refused(writer, err, "store") from err
        request_id, self._next_id = self._next_id, self._next_id + 1
        if self._synced is not None and writer is not None:
            try:
                await self._synced.wait()
            except OSError as err:
                raise self._refused(writer, err, "make durable") from err
        return request_id

    def _refused(self, writer: Writer, err: OSError, doing: str) -> Retryable:
        """A request the disk failed (counted, and the writer told), as the sender's retry."""
        self._faults.write_failures["request"] += 1
        writer.failed(err)
        return Retryable(
            f"the spool cannot {doing} the request ({describe(err)}); retry later",
            retry_after=RETRY_AFTER,
            reason="storage_error",
        )

    def requests(self, from_id: int) -> Iterator[tuple[int, str, bytes, str]]:
        """Spooled requests from ``from_id`` on (id, signal, payload, tenant), read through a
        connection of the caller's own.  A request whose bytes cannot be read is quarantined
        (what is left of them) and skipped: the others still replay."""
        segments = self._segments
        if segments is None:
            return
        db = self._location.connect()
        try:
            # The frames past the last row too (their rows may not be written yet): what a
            # restart would index (``appended.index_tail``).
            tail = unindexed(db, segments)
            rows = db.execute(
                "SELECT id, signal, segment, offset, length, tenant FROM spooled WHERE id >= ? ORDER BY id",
                (from_id,),
            ).fetchall()
            seen = max(from_id - 1, rows[-1][0] if rows else 0)
            rows += [(i, f.signal, *f.where.fields(), f.tenant) for i, f in tail if i > seen]
            for request_id, signal, segment, offset, length, tenant in rows:
                where = Spooled(segment, offset, length)
                try:
                    payload = segments.read(where)
                except OSError as err:
                    self.quarantine(
                        request_id, signal, segments.read_what_is_left(where), "unreadable", str(err)
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
        self._faults.quarantined[reason] += 1
        if self._quarantine is None:
            return
        name = f"{request_id}.{signal if signal in ('traces', 'logs') else 'unknown'}.binpb"
        copy = self._quarantine / name
        try:
            self._quarantine.mkdir(exist_ok=True)
            copy.write_bytes(payload)
            kept = f"copied to {copy}"
        except OSError as err:
            kept = f"no copy kept ({err})"
        log.warning(
            "spooled request %d is %s and was quarantined, skipped: %s; %s", request_id, reason, why, kept
        )

    async def read_requests(self, ids: tuple[int, ...]) -> list[tuple[int, str, bytes]]:
        """Those spooled requests (the ones still stored, their rows written or still
        queued), in id order, read off the loop."""
        segments = self._segments
        if segments is None:
            return []

        def read() -> list[tuple[int, str, bytes]]:
            found: dict[int, tuple[str, Spooled]] = {}
            with self._reader_lock:
                for start in range(0, len(ids), _READ_CHUNK):
                    chunk = ids[start : start + _READ_CHUNK]
                    rows = self._reader.execute(
                        "SELECT id, signal, segment, offset, length FROM spooled WHERE id IN "
                        f"({','.join('?' * len(chunk))})",
                        chunk,
                    ).fetchall()
                    for request_id, signal, segment, offset, length in rows:
                        found[request_id] = (signal, Spooled(segment, offset, length))
            if self._appended is not None and len(found) < len(ids):
                for request_id, signal, where in self._appended.queued(set(ids) - found.keys()):
                    found[request_id] = (signal, where)
            out: list[tuple[int, str, bytes]] = []
            for request_id in sorted(found):
                signal, where = found[request_id]
                with contextlib.suppress(OSError):  # unreadable: its spans are not rebuilt
                    out.append((request_id, signal, segments.read(where)))
            return out

        return await asyncio.to_thread(read)

    @staticmethod
    def forget(db: sqlite3.Connection, replay_from: int) -> None:
        """Requests before ``replay_from`` are no longer needed, but those a reopenable
        revision holds (``held``): their rows go, in the caller's transaction."""
        db.execute(
            "DELETE FROM spooled WHERE id < ? AND id NOT IN (SELECT request FROM held)", (replay_from,)
        )

    def drop_files(self, db: sqlite3.Connection) -> None:
        """Delete the segment files no row points into any more (after ``forget`` committed).

        Synced (``storage.sync``), the database is made durable first when a file goes: its
        commits reach the WAL unsynced (``synchronous=NORMAL``), and a power cut that undid
        the deletion of the rows, but not of their file, would leave rows pointing at
        nothing, their sessions beyond rebuilding and evaluating again."""
        if self._segments is None or not self._database_in_place():
            return
        # Asked again here: requests spooled since may need the latest file.
        (first,) = db.execute("SELECT MIN(segment) FROM spooled").fetchone()
        durable = self._database_durable if self._synced is not None else None
        if self._appended is not None:  # and behind the rows still queued
            self._appended.drop_before(None if first is None else int(first), durable)
        else:
            self._segments.drop_before(None if first is None else int(first), durable)

    def _database_in_place(self) -> bool:
        """Whether the database file is still the one the store opened.  Deleted or replaced
        while serve runs (not by skillgauge), what is committed since is in no file: from then
        on no segment file is deleted, so that the next start, refused for want of its
        database, can rebuild it from them (``skillgauge recover``) and evaluate again what
        was evaluated since."""
        if self._database_gone or _identity(self._location.path) == self._database_file:
            return not self._database_gone
        self._database_gone = True
        log.error(
            "spool: the database %s was deleted or replaced while serve runs (not by skillgauge): "
            "what is recorded from now on is in no file, so request segments are no longer "
            "deleted; stop serve, then run `skillgauge recover --config FILE` and start it again "
            "(the sessions since are evaluated again)",
            self._location.path,
        )
        return False

    def _database_durable(self) -> None:
        """Every transaction committed so far, durable: the database file's and its WAL's
        writes synced (the WAL holds the latest commits; the file, what checkpoints copied).
        Raises ``OSError`` when the disk cannot."""
        path = self._location.path
        if path is None:
            return
        for name in (path, Path(f"{path}-wal")):
            try:
                fd = os.open(name, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def size_bytes(self) -> int:
        return 0 if self._segments is None else self._segments.size_bytes()

    def probe(self, db: sqlite3.Connection) -> None:
        """A small write of each kind an append makes (segment bytes, a row): what tells the
        store that storage works again when no request comes to try it."""
        if self._reserve is not None:
            self._reserve.restore()
        if self._segments is not None:
            self._segments.probe(min(max(self._last_refused, 1), _PROBE_BYTES))
        db.execute("INSERT OR REPLACE INTO state (name, value) VALUES ('probed_at', ?)", (int(time.time()),))

    def make_room(self) -> bool:
        """Release the reserve (see ``collector.state.reserve``); True if that freed room."""
        return self._reserve is not None and self._reserve.release()

    def close(self) -> None:
        if self._segments is not None:
            self._segments.close()
        with self._reader_lock:
            self._reader.close()


def _identity(path: Path | None) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None for none (in memory, or deleted)."""
    if path is None:
        return None
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino
