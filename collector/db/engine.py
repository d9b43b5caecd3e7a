"""Engines for the store's URLs: ``postgresql://...`` (``storage.shared``) through psycopg 3,
and the SQLite file of a data directory."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from collector.db.location import connect_options


def url_for(shared: str) -> sa.URL:
    """``storage.shared`` as SQLAlchemy's URL, on the psycopg 3 driver whatever it names."""
    url = sa.make_url(shared)
    if url.drivername.split("+")[0] not in ("postgresql", "postgres"):
        raise ValueError(f"storage.shared: {url.get_backend_name()!r} is not postgresql://")
    return url.set(drivername="postgresql+psycopg")


def create(shared: str) -> sa.Engine:
    """An engine for a shared PostgreSQL store (connections checked before use: a server
    restarted meanwhile costs a reconnect, not an error; each with the timeouts of
    ``connect_options``)."""
    return sa.create_engine(
        url_for(shared),
        pool_pre_ping=True,
        pool_size=4,
        max_overflow=4,
        connect_args=connect_options(shared),
    )


def sqlite(path: Path) -> sa.Engine:
    """An engine for the SQLite store at ``path`` (a connection a checkout)."""
    return sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)
