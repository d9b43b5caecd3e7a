"""Statements over many rows at once.

``executemany`` runs its statement once a row, and each run gives the GIL away and must win
it back behind the busy event loop; a wave of closed sessions then costs the loop a thread
switch per row.  These put up to ``ROWS_PER_STATEMENT`` rows in one statement instead.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

# Rows in one statement: with the widest rows (~20 columns) well under SQLite's 32,766
# variables, and a statement short enough not to hold a transaction up.
ROWS_PER_STATEMENT = 256


def insert_rows(db: sqlite3.Connection, insert: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """``insert`` ("INSERT ... INTO table (columns)", without VALUES) for every row."""
    if not rows:
        return
    placeholder = "(" + ", ".join("?" * len(rows[0])) + ")"
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        db.execute(
            f"{insert} VALUES {', '.join([placeholder] * len(chunk))}", [v for row in chunk for v in row]
        )


def _chunked(
    statement: str, values: Sequence[Any], suffix: tuple[Any, ...]
) -> Iterator[tuple[str, list[Any]]]:
    """``statement`` with "{in}" replaced by placeholders for a chunk of ``values`` at a time,
    with each chunk's parameters followed by ``suffix``."""
    for start in range(0, len(values), ROWS_PER_STATEMENT):
        chunk = list(values[start : start + ROWS_PER_STATEMENT])
        yield statement.replace("{in}", ", ".join("?" * len(chunk))), [*chunk, *suffix]


def where_in(db: sqlite3.Connection, statement: str, values: Sequence[Any], *suffix: Any) -> int:
    """``statement`` run for all ``values`` (see ``_chunked``).  Returns the rows a DELETE or
    UPDATE changed, summed over the chunks."""
    return sum(db.execute(sql, params).rowcount for sql, params in _chunked(statement, values, suffix))


def count_in(db: sqlite3.Connection, statement: str, values: Sequence[Any], *suffix: Any) -> int:
    """``statement``, a ``SELECT COUNT(*)`` with "{in}", summed over the chunks of ``values``."""
    return sum(
        int(db.execute(sql, params).fetchone()[0]) for sql, params in _chunked(statement, values, suffix)
    )
