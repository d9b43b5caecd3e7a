"""The status API's reads run several at once, each on a connection of its own: a slow read
does not hold up another (the store is SQLite in WAL mode, which lets readers run together)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from collector.db.location import Location
from collector.status.readers import ReaderPool, StoreUnavailable


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "skillgauge.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE coverage (session TEXT)")
        db.executemany("INSERT INTO coverage VALUES (?)", [(f"s{n}",) for n in range(10)])
    return path


async def test_a_read_finishes_while_a_slow_one_holds_its_connection(database: Path) -> None:
    pool = ReaderPool(Location.file(database), size=2)
    release = threading.Event()
    started = threading.Event()

    def slow(db: sqlite3.Connection) -> int:
        rows = db.execute("SELECT count(*) FROM coverage").fetchone()[0]
        started.set()
        release.wait(30)  # a listing that takes its time
        return int(rows)

    def quick(db: sqlite3.Connection) -> int:
        return int(db.execute("SELECT count(*) FROM coverage").fetchone()[0])

    try:
        first = asyncio.create_task(pool.read(slow))
        await asyncio.to_thread(started.wait, 30)
        assert await asyncio.wait_for(pool.read(quick), 30) == 10  # while the slow one still runs
        assert not first.done()
        release.set()
        assert await first == 10
    finally:
        release.set()
        pool.close()


async def test_reads_beyond_the_pool_wait_for_a_connection_and_writes_are_refused(database: Path) -> None:
    pool = ReaderPool(Location.file(database), size=1)
    release = threading.Event()
    started = threading.Event()

    def slow(db: sqlite3.Connection) -> None:
        started.set()
        release.wait(30)

    try:
        first = asyncio.create_task(pool.read(slow))
        await asyncio.to_thread(started.wait, 30)
        second = asyncio.create_task(pool.read(lambda db: db.execute("SELECT 1").fetchone()[0]))
        await asyncio.sleep(0)
        assert not second.done()  # one connection, held
        release.set()
        await first
        assert await second == 1
        with pytest.raises(sqlite3.OperationalError, match=r"readonly|query_only|attempt to write"):
            await pool.read(lambda db: db.execute("DELETE FROM coverage"))
    finally:
        release.set()
        pool.close()


async def test_a_store_that_cannot_be_read_is_unavailable_and_an_sql_error_stays_itself(
    database: Path, tmp_path: Path
) -> None:
    pool = ReaderPool(Location.file(database))
    try:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):  # a bug, not the store
            await pool.read(lambda db: db.execute("SELECT * FROM absent").fetchall())
        scribbled = tmp_path / "scribbled.sqlite"
        scribbled.write_bytes(b"not a database" * 1000)
        broken = ReaderPool(Location.file(scribbled))
        with pytest.raises(StoreUnavailable, match=r"the store .*scribbled.sqlite cannot be read now"):
            await broken.read(lambda db: db.execute("SELECT * FROM coverage").fetchall())
        broken.close()
        assert await pool.read(lambda db: db.execute("SELECT count(*) FROM coverage").fetchone()[0]) == 10
    finally:
        pool.close()
