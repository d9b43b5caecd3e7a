"""Where a store's database is: a SQLite file in the data directory, an in-memory SQLite
database (``storage.path: ":memory:"``) that every connection of the process opens by name,
or a PostgreSQL database (``storage.shared``, through psycopg 3).

The in-memory database is SQLite's ``memdb`` VFS under a name of its own: the writer thread,
the readers and startup each open their own connection to it, exactly as they do to the
file, and so run the same code.  It lives while one connection is open; ``keep`` holds one
for the store's lifetime.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

_names = itertools.count(1)
# A PostgreSQL connection's libpq parameters, unless its URL sets them (``connect_options``):
CONNECT_OPTIONS: dict[str, int] = {
    "connect_timeout": 10,  # seconds to connect
    "tcp_user_timeout": 30_000,  # ms that sent data may wait for the server's acknowledgement
    "keepalives_idle": 30,  # an idle connection is probed after 30 s,
    "keepalives_interval": 10,  # every 10 s,
    "keepalives_count": 3,  # and given up after 3 probes unanswered
}


@dataclass
class Location:
    """How to connect to one SQLite store."""

    path: Path | None  # the database file; None: in memory or PostgreSQL
    uri: str = ""  # the in-memory database's name
    url: str = ""  # PostgreSQL's (``postgresql://...``)
    keep: sqlite3.Connection | None = field(default=None, repr=False)

    @classmethod
    def file(cls, path: Path) -> Location:
        return cls(path)

    @classmethod
    def memory(cls) -> Location:
        """A new, empty in-memory database, kept open until ``close``."""
        uri = f"file:/skillgauge-{os.getpid()}-{next(_names)}?vfs=memdb"
        location = cls(None, uri)
        location.keep = location.connect()
        return location

    @classmethod
    def postgresql(cls, url: str) -> Location:
        return cls(None, url=url)

    @property
    def durable(self) -> bool:
        return self.path is not None or bool(self.url)

    @property
    def dialect(self) -> Literal["sqlite", "postgresql"]:
        return "postgresql" if self.url else "sqlite"

    def __str__(self) -> str:
        if self.url:
            return redacted(self.url)
        return str(self.path) if self.path is not None else ":memory:"

    def connect_any(self) -> Any:
        """A connection of the location's driver: sqlite3's, or psycopg's in autocommit mode
        (transactions only as the caller begins them)."""
        if self.url:
            import psycopg

            return psycopg.connect(self.url, autocommit=True, **connect_options(self.url))
        return self.connect(autocommit=True, check_same_thread=False)

    def connect(self, *, autocommit: bool = False, check_same_thread: bool = True) -> sqlite3.Connection:
        """A connection of its own (``autocommit``: transactions only as the caller begins them)."""
        isolation: Literal["DEFERRED"] | None = None if autocommit else "DEFERRED"
        if self.path is not None:
            return sqlite3.connect(self.path, isolation_level=isolation, check_same_thread=check_same_thread)
        return sqlite3.connect(
            self.uri, uri=True, isolation_level=isolation, check_same_thread=check_same_thread
        )

    def close(self) -> None:
        """Let an in-memory database go (once every other connection is closed too)."""
        if self.keep is not None:
            self.keep.close()
            self.keep = None


def connect_options(url: str) -> dict[str, Any]:
    """libpq's connection parameters of ``CONNECT_OPTIONS`` that ``url`` does not set itself:
    a server that never answers (a host that drops packets, the old host of a failover) fails
    a connection in seconds, not after TCP's retries (minutes to connect; ~15 minutes, or a
    two-hour keepalive, on a connection made before)."""
    return {name: value for name, value in CONNECT_OPTIONS.items() if f"{name}=" not in url}


def redacted(url: str) -> str:
    """``url`` without its password (for logs and messages)."""
    import sqlalchemy as sa

    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL: say nothing of it
        return "(unreadable URL)"
