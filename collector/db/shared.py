"""One SQL for both dialects of the shared store: statements are text with named binds
(``:name``) in SQL that SQLite and PostgreSQL both read (``INSERT ... ON CONFLICT``,
``RETURNING``, row values, ``COALESCE(SUM(...), 0)``), run on a DBAPI connection of either
through ``Db``: the sqlite3 connection of the store's writer, or a psycopg 3 connection to
``storage.shared``.  SQLAlchemy turns the binds into the driver's (``%(name)s`` for
psycopg), once a statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

Dialect = Literal["sqlite", "postgresql"]
# Rows in one multi-row INSERT on SQLite (its 32,766 variables; a statement short enough not
# to hold a transaction up).  PostgreSQL takes them through the driver's ``executemany``.
ROWS_PER_STATEMENT = 256
Params = dict[str, Any]


_POSTGRESQL = postgresql.dialect(paramstyle="pyformat")  # type: ignore[no-untyped-call]


@lru_cache(maxsize=512)
def _for_postgresql(statement: str) -> str:
    return str(sa.text(statement).compile(dialect=_POSTGRESQL))


class Db:
    """A connection of the shared store (``dialect``), inside its caller's transaction."""

    def __init__(self, connection: Any, dialect: Dialect) -> None:
        self.connection = connection
        self.dialect: Dialect = dialect

    def _sql(self, statement: str) -> str:
        return statement if self.dialect == "sqlite" else _for_postgresql(statement)

    def execute(self, statement: str, params: Params | None = None) -> Any:
        """Run one statement; returns the driver's cursor (``fetchall``, ``fetchone``,
        ``rowcount``)."""
        return self.connection.execute(self._sql(statement), params or {})

    def rows(self, statement: str, params: Params | None = None) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.execute(statement, params).fetchall()]

    def executemany(self, statement: str, params: Sequence[Params]) -> None:
        if not params:
            return
        if self.dialect == "sqlite":
            self.connection.executemany(statement, params)
        else:
            with self.connection.cursor() as cursor:
                cursor.executemany(self._sql(statement), params)

    def insert(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], conflict: str = ""
    ) -> None:
        """``INSERT INTO table (columns) VALUES ... [conflict]`` for every row: multi-row
        statements on SQLite (each call hands the GIL back to a busy loop), the driver's
        ``executemany`` on PostgreSQL."""
        if not rows:
            return
        names = ", ".join(f'"{c}"' for c in columns)
        if self.dialect == "postgresql":
            binds = ", ".join(f":{c}" for c in columns)
            statement = f"INSERT INTO {table} ({names}) VALUES ({binds}) {conflict}"
            self.executemany(statement, [dict(zip(columns, row, strict=True)) for row in rows])
            return
        placeholder = "(" + ", ".join("?" * len(columns)) + ")"
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start : start + ROWS_PER_STATEMENT]
            self.connection.execute(
                f"INSERT INTO {table} ({names}) VALUES {', '.join([placeholder] * len(chunk))} {conflict}",
                [v for row in chunk for v in row],
            )

    def in_(self, prefix: str, values: Sequence[Any]) -> tuple[str, Params]:
        """``(:prefix0, :prefix1, ...)`` and its params: what ``x IN`` a list reads."""
        params = {f"{prefix}{i}": v for i, v in enumerate(values)}
        return "(" + ", ".join(f":{name}" for name in params) + ")", params


def sqlite_db(connection: sqlite3.Connection) -> Db:
    return Db(connection, "sqlite")
