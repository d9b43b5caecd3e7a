"""Alembic's environment for the store: migrations run on the connection that
``collector.db.migrate`` hands over (``config.attributes["connection"]``), never on a URL of
their own, so that they run under the caller's lock."""

from __future__ import annotations

from alembic import context

from collector.db.schema import metadata

# Any number that names this lock among the database's advisory locks.
_ADVISORY_LOCK = 0x5347_4D49  # "SGMI"

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    if connection.dialect.name == "postgresql":  # replicas starting together: one at a time
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})")
    context.run_migrations()
