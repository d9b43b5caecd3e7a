"""Work rows leased, not owned: how replicas sharing one store hand work over.

A row of a work table (``judge_pending``, ``outbox``) is free, or leased to an owner (a
replica) until a time.  ``claim`` takes up to ``limit`` rows that are free or whose lease has
lapsed, oldest first, and leases them to the caller; on PostgreSQL it locks them with
``FOR UPDATE SKIP LOCKED``, so replicas claiming at once take different rows without waiting
for each other.  A live owner ``renew``s its leases well before they lapse; a dead one's
lapse, and the next ``claim`` of any replica takes them over.  ``renew`` answers which rows
the caller still holds: a row taken over meanwhile is no longer its to finish.  SQLite has
one writer and one replica: the same statements run there (``FOR UPDATE`` is left out) and a
lease is never contested.

Each function runs on a SQLAlchemy connection or on a ``collector.db.shared.Db`` (the store's
writers' connections, inside their transaction): the statements are the same, compiled for
the ``Db``'s dialect.  Rows come back as mappings of the table's columns.

The work itself stays idempotent (a verdict is keyed by its revision and evaluation, a span
by its ids), so a row finished twice (an owner that stalled past its lease) costs a second
try, never a second result.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from collector.db.shared import Db

Connection = sa.Connection | Db
Row = dict[str, Any]
_DIALECTS: dict[str, sa.Dialect] = {
    "sqlite": sqlite.dialect(paramstyle="named"),
    "postgresql": postgresql.dialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
}


def claim(
    connection: Connection,
    table: sa.Table,
    owner: str,
    *,
    now: float,
    lease: float,
    limit: int,
    order_by: str,
    where: sa.ColumnElement[bool] | None = None,
) -> list[Row]:
    """Lease to ``owner`` until ``now + lease`` up to ``limit`` rows of ``table`` that are free or
    lapsed (and match ``where``), by ``order_by``; returns them (in the caller's transaction)."""
    key = _key(table)
    free = sa.or_(table.c.lease_owner.is_(None), table.c.lease_expires < now)
    pick = sa.select(key).where(free if where is None else sa.and_(free, where))
    pick = pick.order_by(table.c[order_by]).limit(limit).with_for_update(skip_locked=True)
    leased = (
        sa.update(table)
        .where(key.in_(pick.scalar_subquery()))
        .values(lease_owner=owner, lease_expires=now + lease)
        .returning(*table.c)
    )
    rows = [dict(zip(table.c.keys(), row, strict=True)) for row in _execute(connection, leased)]
    rows.sort(key=lambda row: row[order_by])
    return rows


def renew(
    connection: Connection, table: sa.Table, owner: str, keys: list[object], *, now: float, lease: float
) -> set[object]:
    """Extend ``owner``'s leases on ``keys`` to ``now + lease``; returns the keys it still holds
    (a lapsed lease another owner took is not renewed)."""
    if not keys:
        return set()
    key = _key(table)
    renewed = (
        sa.update(table)
        .where(key.in_(keys), table.c.lease_owner == owner)
        .values(lease_expires=now + lease)
        .returning(key)
    )
    return {row[0] for row in _execute(connection, renewed)}


def renew_all(connection: Connection, table: sa.Table, owner: str, *, now: float, lease: float) -> int:
    """Extend every lease ``owner`` holds on ``table`` to ``now + lease`` (a live owner's
    heartbeat); returns how many."""
    renewed = (
        sa.update(table)
        .where(table.c.lease_owner == owner)
        .values(lease_expires=now + lease)
        .returning(_key(table))
    )
    return len(_execute(connection, renewed))


def release(connection: Connection, table: sa.Table, owner: str, keys: list[object]) -> int:
    """Give ``owner``'s leases on ``keys`` back unfinished (another may claim them at once);
    returns how many it held."""
    if not keys:
        return 0
    key = _key(table)
    freed = (
        sa.update(table)
        .where(key.in_(keys), table.c.lease_owner == owner)
        .values(lease_owner=None, lease_expires=None)
    )
    if isinstance(connection, Db):
        return int(_run(connection, freed).rowcount)
    return int(connection.execute(freed).rowcount)


def _execute(connection: Connection, statement: sa.Update) -> list[tuple[Any, ...]]:
    if isinstance(connection, Db):
        return [tuple(row) for row in _run(connection, statement).fetchall()]
    return [tuple(row) for row in connection.execute(statement)]


def _run(db: Db, statement: sa.Update) -> Any:
    """``statement`` compiled for ``db``'s dialect, run on its DBAPI connection."""
    compiled = statement.compile(dialect=_DIALECTS[db.dialect], compile_kwargs={"render_postcompile": True})
    return db.connection.execute(compiled.string, compiled.params)


def _key(table: sa.Table) -> sa.Column[object]:
    (key,) = table.primary_key.columns
    return key
