"""Leased work rows: owners claiming at once take different rows, a live owner's renewal keeps
them, a lapsed lease is taken over and its old owner learns it; on SQLite and on a real
PostgreSQL (where a claim skips the rows another transaction holds, without waiting)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server

from collector.db import engine as engines
from collector.db import lease, migrate
from collector.db.schema import judge_pending


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    if request.param == "sqlite":
        made = engines.sqlite(tmp_path / "skillgauge.sqlite")
    else:
        server: Postgres = request.getfixturevalue("postgres_server")
        made = engines.create(server.url())
    migrate.upgrade(made)
    with made.begin() as conn:
        conn.execute(
            judge_pending.insert(),
            [
                {"key": f"k{n:02d}", "session": f"s{n}", "revision": 1, "evaluation": "e", "enqueued_at": float(n)}
                for n in range(10)
            ],
        )
    yield made
    made.dispose()


def _claim(engine: sa.Engine, owner: str, now: float, limit: int = 10) -> list[str]:
    with engine.begin() as conn:
        rows = lease.claim(conn, judge_pending, owner, now=now, lease=30, limit=limit, order_by="enqueued_at")
    return [str(row["key"]) for row in rows]


def test_owners_take_different_rows_and_a_lapsed_lease_is_taken_over(engine: sa.Engine) -> None:
    first = _claim(engine, "replica-a", now=100, limit=4)
    assert first == ["k00", "k01", "k02", "k03"]  # oldest first
    assert _claim(engine, "replica-b", now=100) == [f"k{n:02d}" for n in range(4, 10)]
    assert _claim(engine, "replica-a", now=110) == []  # every row leased
    with engine.begin() as conn:  # b is alive: it renews; a has died
        held = lease.renew(conn, judge_pending, "replica-b", [f"k{n:02d}" for n in range(4, 10)], now=120, lease=30)
    assert len(held) == 6
    assert _claim(engine, "replica-b", now=131) == first  # a's lapsed at 130; b's run to 150
    with engine.begin() as conn:
        assert lease.renew(conn, judge_pending, "replica-a", list(first), now=132, lease=30) == set()
        assert lease.release(conn, judge_pending, "replica-b", ["k00"]) == 1
    assert _claim(engine, "replica-c", now=133) == ["k00"]  # released: free at once


def test_a_claim_skips_rows_another_transaction_holds_without_waiting(
    postgres_server: Postgres,  # noqa: F811
) -> None:
    engine = engines.create(postgres_server.url())
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(
            judge_pending.insert(),
            [{"key": f"k{n}", "session": "s", "revision": n, "evaluation": "e", "enqueued_at": float(n)} for n in range(6)],
        )
    with engine.connect() as one, engine.connect() as two, one.begin():
        mine = lease.claim(one, judge_pending, "a", now=0, lease=30, limit=3, order_by="enqueued_at")
        with two.begin():
            # Had the claim waited for ``one``'s rows, this would fail instead of answering.
            two.exec_driver_sql("SET LOCAL lock_timeout = '10s'")
            theirs = lease.claim(two, judge_pending, "b", now=0, lease=30, limit=3, order_by="enqueued_at")
    assert [r["key"] for r in mine] == ["k0", "k1", "k2"]
    assert [r["key"] for r in theirs] == ["k3", "k4", "k5"]
    engine.dispose()
