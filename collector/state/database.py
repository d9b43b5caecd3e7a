"""Opening the store's SQLite database: the data directory's file, checked before anything
is written (``collector.state.vouch``) and migrated (``collector.db.migrate``), or a new
in-memory one (``storage.path: ":memory:"``) with the same tables."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from collector.db import engine as engines
from collector.db import migrate
from collector.db.location import Location
from collector.state.segments import SEGMENT_BYTES
from collector.state.vouch import DATABASE, vouch

_WAL_SIZE_LIMIT = 64 * 1024 * 1024
# ``storage.max_bytes`` counts files, and the segment file being appended to is freed only
# once it is full and every request in it is done: segments stay a small share of the limit.
_SEGMENTS_PER_LIMIT = 8
_MIN_SEGMENT_BYTES = 256 * 1024


def sizes_for(max_bytes: int | None) -> tuple[int, int]:
    """(segment file size, WAL size limit) for a store held to ``max_bytes``: each at most an
    eighth of it, so that neither a half-empty segment nor a WAL file SQLite keeps at its
    high-water mark can hold the store over its limit for good."""
    if max_bytes is None:
        return SEGMENT_BYTES, _WAL_SIZE_LIMIT
    share = max(_MIN_SEGMENT_BYTES, max_bytes // _SEGMENTS_PER_LIMIT)
    return min(SEGMENT_BYTES, share), min(_WAL_SIZE_LIMIT, share)


def initialise(path: Path) -> None:
    """Create the store's tables at ``path`` (a new file) or migrate an older store's (the
    caller holds the data directory's lock)."""
    migrate.upgrade_sqlite(path)


def open_file(directory: Path) -> Location:
    """The data directory's database, vouched for and migrated; ``RuntimeError`` (or
    ``StoreRefused``) naming the file and the fix when it cannot be."""
    path = directory / DATABASE
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RuntimeError(
            f"storage.path: cannot open the spool at {path}: {err} - {open_fix(err)}"
        ) from None
    vouch(directory)  # before anything is written: a database we cannot trust is refused
    try:
        initialise(path)
    except (OSError, sqlite3.Error) as err:
        raise RuntimeError(
            f"storage.path: cannot open the spool at {path}: {err} - {open_fix(err)}"
        ) from None
    return Location.file(path)


def open_memory() -> Location:
    """A new in-memory database with the current tables."""
    location = Location.memory()
    assert location.keep is not None
    migrate.create_empty(location.keep)
    return location


def open_fix(err: OSError | sqlite3.Error) -> str:
    """What an operator can do about a store that does not open."""
    if isinstance(err, sqlite3.DatabaseError) and not isinstance(err, sqlite3.OperationalError):
        # "file is not a database", "database disk image is malformed"
        return (
            "the file is damaged: run `skillgauge recover --config FILE` to rebuild it from the "
            "request segments, restore the directory from a backup, or move it aside to start "
            "with an empty spool (what it held is then not evaluated)"
        )
    return "check that the directory exists or can be created, is writable by this user and has free space"


def open_shared(url: str) -> Location:
    """``storage.shared``'s PostgreSQL, migrated (under its advisory lock: replicas starting
    together take turns); ``RuntimeError`` naming the setting and the fix when it cannot be."""
    location = Location.postgresql(url)
    try:
        engine = engines.create(url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
    except Exception as err:  # the driver's, the server's: named, with the way out
        raise RuntimeError(
            f"storage.shared: cannot open the shared store at {location}: {_first_line(err)} - check that "
            "the server runs and is reachable from this host, that the database exists and that the "
            "user may create tables in it (`skillgauge migrate --config FILE` tries it alone)"
        ) from None
    return location


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "orig", None) or err).strip()
    return text.splitlines()[0] if text else type(err).__name__
