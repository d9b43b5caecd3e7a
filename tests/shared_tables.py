"""Where a serve keeps the shared tables, for tests that read them: the data directory's
SQLite (the default) or ``storage.shared``'s PostgreSQL."""

from __future__ import annotations

import contextlib
import copy
import sqlite3
from pathlib import Path
from typing import Any

import psycopg


class SharedTables:
    """Where a serve keeps the shared tables (``url`` None: its data directory's SQLite)."""

    def __init__(self, url: str | None) -> None:
        self.url = url

    def config(self, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """``config`` with ``storage.shared`` set when the tables are in PostgreSQL."""
        merged = copy.deepcopy(config or {})
        if self.url is not None:
            merged.setdefault("storage", {})["shared"] = self.url
        return merged

    def rows(self, data: Path, sql: str) -> list[Any]:
        """``sql``'s rows, read from the shared tables of the serve whose data directory is ``data``."""
        if self.url is None:
            with contextlib.closing(sqlite3.connect(f"file:{data / 'skillgauge.sqlite'}?mode=ro", uri=True)) as db:
                return db.execute(sql).fetchall()
        with psycopg.connect(self.url) as db:
            return [tuple(row) for row in db.execute(sql).fetchall()]

    def at(self, data: Path) -> Tables:
        """The shared tables of the serve whose data directory is ``data``."""
        return Tables(self, data)


class Tables:
    """``SharedTables.rows`` of one serve."""

    def __init__(self, shared: SharedTables, data: Path) -> None:
        self.shared = shared
        self.data = data

    def rows(self, sql: str) -> list[Any]:
        return self.shared.rows(self.data, sql)


def fresh(shared: SharedTables, new_url: str | None) -> SharedTables:
    """Tables of another database on the same server (``new_url``), for a serve that must not
    see the first one's sessions; the default's are each serve's own already."""
    return shared if shared.url is None else SharedTables(new_url)
