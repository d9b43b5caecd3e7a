"""Bring a store's tables to the current schema with Alembic (``collector/db/migrations``).

Run by ``serve`` at start and by ``skillgauge migrate``, always under a lock: a SQLite store
under the data directory's (``collector.state.lock``), which its caller holds; PostgreSQL
under a transaction-scoped advisory lock the migration environment takes, so that replicas
starting together migrate one at a time and the others find the work done.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.pool import StaticPool

from collector.db import engine as engines
from collector.db.schema import metadata

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic (with Mako) is imported by the functions that migrate or read a revision, so that
# a process which never migrates (replay's in-memory store, the tools) does not load it.  It
# tells at INFO which plugins it set up when first imported and what it is about to do at every
# start: the store says what matters, so its logger is quiet below WARNING before any import.
logging.getLogger("alembic").setLevel(logging.WARNING)

_SCRIPTS = Path(__file__).parent / "migrations"
# SQLite pages of new stores.  Requests live in segment files; the tables hold small rows,
# most keyed by session (random keys, so a wave of closed sessions dirties pages all over each
# index, and every dirty page is written whole to the WAL at commit).  4 KB pages cost ~7 %
# less CPU a span than 16 KB ones (new stores only: a store keeps the page size it was made with).
PAGE_SIZE = 4096


def _config(connection: sa.Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest migration's revision."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    revision = ScriptDirectory.from_config(config).get_current_head()
    if revision is None:
        raise RuntimeError(f"no migrations in {_SCRIPTS}")
    return revision


def current(connection: sa.Connection) -> str | None:
    """The revision the store's tables are at (None: never migrated)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: sa.Engine) -> str:
    """Migrate the store behind ``engine`` to the newest revision; returns it."""
    from alembic import command

    with engine.begin() as connection:
        command.upgrade(_config(connection), "head")
        return current(connection) or ""


def upgrade_sqlite(path: Path) -> str:
    """Migrate the SQLite store at ``path`` (created if absent: page size, then WAL)."""
    setup = sqlite3.connect(path)
    try:
        setup.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file only: set before WAL
        setup.execute("PRAGMA journal_mode=WAL")
    finally:
        setup.close()
    engine = engines.sqlite(path)
    try:
        return upgrade(engine)
    finally:
        engine.dispose()


def create_empty(connection: sqlite3.Connection) -> None:
    """Make the current tables in the empty in-memory database of ``connection``
    (``storage.path: ":memory:"``): nothing older to migrate, and the schema is what the
    migrations make (a test holds them to it)."""
    engine = sa.create_engine("sqlite://", creator=lambda: connection, poolclass=StaticPool)
    metadata.create_all(engine)
