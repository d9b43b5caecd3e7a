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

The work itself stays idempotent (a verdict is keyed by its revision and evaluation, a span
by its ids), so a row finished twice (an owner that stalled past its lease) costs a second
try, never a second result.
"""

from __future__ import annotations

import sqlalchemy as sa


def claim(
    connection: sa.Connection,
    table: sa.Table,
    owner: str,
    *,
    now: float,
    lease: float,
    limit: int,
    order_by: str,
    where: sa.ColumnElement[bool] | None = None,
) -> list[sa.Row[tuple[object, ...]]]:
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
    rows = list(connection.execute(leased))
    rows.sort(key=lambda row: row._mapping[order_by])
    return rows


def renew(
    connection: sa.Connection, table: sa.Table, owner: str, keys: list[object], *, now: float, lease: float
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
    return {row[0] for row in connection.execute(renewed)}


def release(connection: sa.Connection, table: sa.Table, owner: str, keys: list[object]) -> int:
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
    return int(connection.execute(freed).rowcount)


def _key(table: sa.Table) -> sa.Column[object]:
    (key,) = table.primary_key.columns
    return key
