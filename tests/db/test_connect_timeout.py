"""A PostgreSQL server that never answers (a host that drops packets, a proxy whose backend is
gone) fails a connection within the connect timeout, through psycopg and through SQLAlchemy's
engine alike, instead of holding a status read or a start until TCP gives up; a URL that sets
its own ``connect_timeout`` keeps it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
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
    monkeypatch.setattr(location, "CONNECT_TIMEOUT", 1)
    direct = _fails(Location.postgresql(silent).connect_any)
    pooled = _fails(lambda: engines.create(silent).connect())
    assert direct is not None and "timeout" in str(direct).lower(), direct
    assert pooled is not None and "timeout" in str(pooled).lower(), pooled


def test_a_url_that_sets_its_own_connect_timeout_keeps_it() -> None:
    assert Location.postgresql("postgresql://h/db?connect_timeout=3").connect_timeout() == {}
    assert Location.postgresql("postgresql://h/db").connect_timeout() == {"connect_timeout": location.CONNECT_TIMEOUT}
