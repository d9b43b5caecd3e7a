"""The store's schema comes from its Alembic migrations, on SQLite and on a real PostgreSQL
alike: what they make matches ``collector.db.schema``, a second run changes nothing, replicas
migrating at once take turns, and a spool made before migrations is brought up to date."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server

from collector.db import engine as engines
from collector.db import migrate
from collector.db.schema import metadata
from collector.state.facade import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    if request.param == "sqlite":
        made = engines.sqlite(tmp_path / "skillgauge.sqlite")
    else:
        server: Postgres = request.getfixturevalue("postgres_server")
        made = engines.create(server.url())
    yield made
    made.dispose()


def test_the_migrated_tables_are_the_schema_and_a_second_run_changes_nothing(engine: sa.Engine) -> None:
    assert migrate.upgrade(engine) == migrate.head()
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []
        tables = set(sa.inspect(conn).get_table_names())
    assert {"spooled", "coverage", "verdicts", "outbox", "judge_pending", "held"} <= tables
    assert migrate.upgrade(engine) == migrate.head()
    with engine.connect() as conn:
        assert migrate.current(conn) == migrate.head()


def test_replicas_migrating_at_once_take_turns(postgres_server: Postgres) -> None:  # noqa: F811
    """Four processes (replicas starting together) migrate one empty database at once."""
    url = postgres_server.url()
    code = "import sys; from collector.db import engine, migrate; print(migrate.upgrade(engine.create(sys.argv[1])))"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outcomes = [proc.communicate(timeout=120) for proc in procs]
    assert [(proc.returncode, out.strip()) for proc, (out, _) in zip(procs, outcomes, strict=True)] == [
        (0, migrate.head())
    ] * 4, [err for _, err in outcomes]


_OLDER_SPOOL = """
CREATE TABLE spooled (id INTEGER PRIMARY KEY, received_at REAL NOT NULL, signal TEXT NOT NULL,
    segment INTEGER NOT NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL);
CREATE TABLE coverage (session TEXT NOT NULL, revision INTEGER NOT NULL, record TEXT NOT NULL,
    evaluated_at REAL NOT NULL, PRIMARY KEY (session, revision));
CREATE TABLE results (key TEXT PRIMARY KEY, session TEXT NOT NULL, revision INTEGER NOT NULL,
    record TEXT NOT NULL, superseded INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL DEFAULT (strftime('%s', 'now')));
CREATE TABLE state (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO spooled VALUES (1, 0, 'traces', 1, 0, 10);
INSERT INTO state VALUES ('replay_from', 1);
"""


def test_a_spool_from_before_migrations_keeps_its_rows_and_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "skillgauge.sqlite"
    line = {
        "session_id": "s1",
        "revision": 1,
        "framework": "strands",
        "closed_at": 1700000000.0,
        "tenant": "team-a",
        "results": [{"evaluation": "skill_invoked", "status": "judged", "reason": "loaded", "passed": True}],
    }
    with sqlite3.connect(path) as db:
        db.executescript(_OLDER_SPOOL)
        db.execute("INSERT INTO coverage VALUES ('team-a/s1', 1, ?, 1700000001.0)", (json.dumps(line),))
    db.close()
    assert migrate.upgrade_sqlite(path) == migrate.head()
    asyncio.run(Store(tmp_path).shutdown())  # its start fills in the listing's columns
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT id, tenant FROM spooled").fetchall() == [(1, "")]
        framework, tenant, closed_at, summary = db.execute(
            "SELECT framework, tenant, closed_at, summary FROM coverage"
        ).fetchone()
        verdicts = db.execute("SELECT evaluation, status FROM verdicts").fetchall()
    db.close()
    assert (framework, tenant, closed_at) == ("strands", "team-a", 1700000000.0)
    assert json.loads(summary)["session_id"] == "s1"
    assert verdicts == [("skill_invoked", "judged")]
