"""A PostgreSQL server that goes silent fails the connection in seconds, through psycopg and
through SQLAlchemy's engine alike, instead of holding a start, a status read or the shared
writer until TCP gives up: one that takes connections and never answers (a proxy whose backend
is gone) within the connect timeout, and one that drops every packet after a connection was
made (the old host of a failover) within the TCP user timeout.  A URL that sets one of these
parameters keeps its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.db import engine as engines
from collector.db import location
from collector.db.location import Location


@pytest.fixture
def silent() -> Iterator[str]:
    """The URL of a server that takes connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    taken: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                taken.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"postgresql://skillgauge@127.0.0.1:{server.getsockname()[1]}/store"
    finally:
        stop.set()
        thread.join(10)
        for connection in taken:
            connection.close()
        server.close()


def _fails(connect: Callable[[], Any]) -> BaseException | None:
    """What ``connect`` raised, run on a thread given a minute (None: it did not end)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            connect()
        except BaseException as err:  # what it raised is the answer
            raised.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    return raised[0] if raised else None


def test_a_server_that_never_answers_fails_the_connection(silent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(location.CONNECT_OPTIONS, "connect_timeout", 1)
    direct = _fails(Location.postgresql(silent).connect_any)
    pooled = _fails(lambda: engines.create(silent).connect())
    assert direct is not None and "timeout" in str(direct).lower(), direct
    assert pooled is not None and "timeout" in str(pooled).lower(), pooled


def test_a_url_that_sets_its_own_parameters_keeps_them() -> None:
    own = location.connect_options("postgresql://h/db?connect_timeout=3&keepalives_idle=600")
    assert "connect_timeout" not in own and "keepalives_idle" not in own
    assert own["tcp_user_timeout"] == location.CONNECT_OPTIONS["tcp_user_timeout"]
    assert location.connect_options("postgresql://h/db") == location.CONNECT_OPTIONS


# Run in a network namespace of its own (``unshare -n``), whose loopback it takes down once a
# connection is made: from then on every packet is dropped, as by a host that went away.
SILENCED = """
import json, shutil, subprocess, sys, threading
sys.path[:0] = sys.argv[1:]
from postgres import Postgres
from collector.db import location
from collector.db.location import Location

location.CONNECT_OPTIONS.update(tcp_user_timeout=2000, keepalives_idle=1, keepalives_interval=1, keepalives_count=2)
server = Postgres()
try:
    connection = Location.postgresql(server.url()).connect_any()
    connection.execute("SELECT 1").fetchone()
    subprocess.run(["ip", "link", "set", "lo", "down"], check=True)
    outcome = []

    def query():
        try:
            connection.execute("SELECT 1").fetchone()
            outcome.append("answered")
        except Exception as err:
            outcome.append(f"{type(err).__name__}: {err}")

    thread = threading.Thread(target=query, daemon=True)
    thread.start()
    thread.join(60)
    print(json.dumps(outcome[0] if outcome else None))
finally:
    server.halt()
    shutil.rmtree(server.dir, ignore_errors=True)
"""


def test_a_server_that_drops_every_packet_after_the_connection_was_made_fails_the_query(tmp_path: Path) -> None:
    script = tmp_path / "silenced.py"
    script.write_text(SILENCED)
    tests = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', sys.executable, str(script),
         str(tests), str(tests.parent)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(tests.parent)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome is not None and "OperationalError" in outcome, outcome  # not still waiting
