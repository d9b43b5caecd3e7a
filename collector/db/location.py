"""Where a SQLite store's database is: a file in the data directory, or an in-memory
database (``storage.path: ":memory:"``) that every connection of the process opens by name.

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
from typing import Literal

_names = itertools.count(1)


@dataclass
class Location:
    """How to connect to one SQLite store."""

    path: Path | None  # the database file; None: in memory
    uri: str = ""
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

    @property
    def durable(self) -> bool:
        return self.path is not None

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
