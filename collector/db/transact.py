"""Transactions on the store's engine, tried again when the database aborts one for a
conflict that a later try can win.

PostgreSQL aborts a transaction that would break serializability (SQLSTATE 40001) or that it
chose as a deadlock's victim (40P01); SQLite answers "database is locked" when another
connection's write outlasted the busy timeout.  Each is retried with a jittered, growing
pause, at most ``attempts`` times in all; any other error is raised at once.  ``work`` runs
whole on every try, so it must do nothing outside its transaction.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

T = TypeVar("T")
# serialization_failure, deadlock_detected
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
_FIRST_PAUSE = 0.01  # seconds; doubled each try, with jitter
_MAX_PAUSE = 0.5


def is_retryable(err: BaseException) -> bool:
    """Whether ``err`` is a conflict that the same transaction may win if tried again."""
    if not isinstance(err, sa.exc.DBAPIError):
        return False
    orig = err.orig
    if getattr(orig, "sqlstate", None) in RETRYABLE_SQLSTATES:
        return True
    return isinstance(orig, sqlite3.OperationalError) and "database is locked" in str(orig)


def run(
    engine: sa.Engine,
    work: Callable[[sa.Connection], T],
    *,
    attempts: int = 8,
    pause: Callable[[float], None] = time.sleep,
) -> T:
    """``work(connection)`` in one transaction, committed; retried on a conflict (see the
    module's docstring).  Blocking: call it off the event loop."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    delay = _FIRST_PAUSE
    for attempt in range(1, attempts + 1):
        try:
            with engine.begin() as connection:
                return work(connection)
        except sa.exc.DBAPIError as err:
            if attempt == attempts or not is_retryable(err):
                raise
        pause(random.uniform(0, delay))
        delay = min(_MAX_PAUSE, delay * 2)
    raise AssertionError("unreachable")  # the loop returns or raises
