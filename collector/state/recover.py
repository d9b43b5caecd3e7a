"""``skillgauge recover``: rebuild the data directory's database from its request segments.

For a directory ``serve`` refuses (``collector.state.vouch``): the database missing, empty
or damaged while segment files hold acknowledged requests.  Under the directory's lock, the
database (with its WAL and shared-memory files) is renamed aside, never deleted; a new one is
created and every intact request of every framed segment file is entered in it, in file
order, under its signal and tenant.  The next ``serve`` replays them all: each session is
rebuilt, closed and evaluated again (what the lost database knew of earlier verdicts is gone
with it).  Segment files written before frames cannot be split and stay where they are.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from collector.state.database import initialise
from collector.state.lock import DataDirLock
from collector.state.segments import Segments
from collector.state.vouch import DATABASE, REQUESTS, StoreRefused, vouch


@dataclass
class Recovered:
    """What ``recover`` did."""

    database: Path
    moved_aside: list[Path] = field(default_factory=list)
    requests: int = 0
    files: int = 0
    unframed: list[Path] = field(default_factory=list)  # left in place, not recovered
    sound: bool = False  # the database needed nothing: nothing was changed


def recover(directory: str | Path, *, force: bool = False) -> Recovered:
    """Rebuild ``directory``'s database from its segments (see the module's docstring).  A
    sound database is left alone unless ``force``.  Raises ``DataDirLocked`` while a serve
    holds the directory."""
    directory = Path(directory)
    lock = DataDirLock(directory).acquire()
    try:
        path = directory / DATABASE
        done = Recovered(path)
        if not force:
            try:
                vouch(directory)
                done.sound = True
                return done
            except StoreRefused:
                pass
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        for suffix in ("", "-wal", "-shm"):
            old = Path(f"{path}{suffix}")
            if old.exists():
                aside = old.with_name(f"{DATABASE}.broken-{stamp}{suffix}")
                os.rename(old, aside)
                done.moved_aside.append(aside)
        initialise(path)
        segments = Segments(directory / REQUESTS)
        rows: list[tuple[int, float, str, int, int, int, str]] = []
        for number in segments.numbers():
            file = directory / REQUESTS / f"{number:08d}.seg"
            try:
                frames = list(segments.frames(number))
                received_at = file.stat().st_mtime
            except ValueError:
                done.unframed.append(file)
                continue
            done.files += 1
            for frame in frames:
                where = frame.where
                rows.append(
                    (
                        len(rows) + 1,
                        received_at,
                        frame.signal,
                        where.segment,
                        where.offset,
                        where.length,
                        frame.tenant,
                    )
                )
        db = sqlite3.connect(path)
        try:
            with db:
                db.executemany("INSERT INTO spooled VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        finally:
            db.close()
        done.requests = len(rows)
        return done
    finally:
        lock.release()
