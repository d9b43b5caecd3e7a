"""Transactions tried again on a conflict: concurrent read-modify-write transactions on a real
PostgreSQL at SERIALIZABLE all land; SQLite's "database is locked" is tried again; any other
error is raised at once."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server

from collector.db import engine as engines
from collector.db import transact

COUNTER = sa.Table("counter", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True), sa.Column("n", sa.Integer))


def test_conflicting_serializable_transactions_all_land(postgres_server: Postgres) -> None:  # noqa: F811
    engine = engines.create(postgres_server.url()).execution_options(isolation_level="SERIALIZABLE")
    COUNTER.create(engine)
    with engine.begin() as conn:
        conn.execute(COUNTER.insert().values(id=1, n=0))
    conflicts: list[int] = []

    def increment(conn: sa.Connection) -> None:
        n = conn.execute(sa.select(COUNTER.c.n).where(COUNTER.c.id == 1)).scalar_one()
        conn.execute(COUNTER.update().where(COUNTER.c.id == 1).values(n=n + 1))

    def worker() -> None:
        for _ in range(10):
            transact.run(engine, increment, attempts=50, pause=lambda s: conflicts.append(1))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with engine.connect() as conn:
        assert conn.execute(sa.select(COUNTER.c.n)).scalar_one() == 40  # no increment lost
    engine.dispose()


def _locked() -> sa.exc.OperationalError:
    return sa.exc.OperationalError("UPDATE", {}, sqlite3.OperationalError("database is locked"))


def test_a_locked_sqlite_database_is_tried_again_and_other_errors_are_not(tmp_path: Path) -> None:
    engine = engines.sqlite(tmp_path / "t.sqlite")
    tries: list[int] = []
    pauses: list[float] = []

    def flaky(conn: sa.Connection) -> int:
        tries.append(1)
        if len(tries) < 3:
            raise _locked()
        return int(conn.execute(sa.text("SELECT 7")).scalar_one())

    assert transact.run(engine, flaky, pause=pauses.append) == 7
    assert (len(tries), len(pauses)) == (3, 2)

    def broken(conn: sa.Connection) -> None:
        tries.append(1)
        conn.execute(sa.text("SELECT * FROM no_such_table"))

    tries.clear()
    with pytest.raises(sa.exc.OperationalError, match="no such table"):
        transact.run(engine, broken, pause=pauses.append)
    assert len(tries) == 1

    def always_locked(conn: sa.Connection) -> None:
        raise _locked()

    with pytest.raises(sa.exc.OperationalError, match="database is locked"):
        transact.run(engine, always_locked, attempts=3, pause=pauses.append)
    engine.dispose()
