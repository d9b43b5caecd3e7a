"""The durability tests run twice: with the shared tables in the data directory's SQLite
(the default) and with ``storage.shared`` on a real PostgreSQL, one server per test module
(``postgres.postgres_server``), started only when a test asks for it."""

from __future__ import annotations

import pytest
from postgres import Postgres, postgres_server  # noqa: F401 - each module's own server
from shared_tables import SharedTables


@pytest.fixture(params=["sqlite", "postgresql"])
def shared(request: pytest.FixtureRequest) -> SharedTables:
    if request.param == "sqlite":
        return SharedTables(None)
    server: Postgres = request.getfixturevalue("postgres_server")
    return SharedTables(server.url())
