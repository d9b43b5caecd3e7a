"""A real PostgreSQL server for one test module: a copy of a cluster that ``initdb`` made once a
process, in a temporary directory, and ``postgres`` on a free loopback port, as the
``postgres`` user when the tests run as root (the server refuses to run as root).  Each module
starts its own (``postgres_server`` below, module scope) and never shares it with another
module."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

BIN = Path(os.environ.get("SKILLGAUGE_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _as_postgres() -> dict[str, Any]:
    """Popen's arguments that run a server binary as ``postgres`` when the tests are root."""
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}


# Nothing here outlives the server or survives a crash of the machine, so the server need not
# force its writes to disk: with fsync its shutdown checkpoint alone took seconds.  What a test
# sees over a connection is the same (a killed ``skillgauge`` process, the only crash the tests
# make, leaves the server running).
_NO_SYNC = ["-c", "fsync=off", "-c", "full_page_writes=off"]


def _free_port() -> int:
    """A loopback port free now (postgres binds it itself; a lost race is retried)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _owned_dir(prefix: str) -> Path:
    """A new temporary directory that the server's user owns."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")
    return path


@functools.cache
def _initialized() -> Path:
    """A data directory as ``initdb`` leaves it, made once a process (``initdb`` takes about
    a second; a copy, a few milliseconds) and removed when the process ends."""
    root = _owned_dir("skillgauge-pg-initdb-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    data = root / "data"
    subprocess.run(
        [str(BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
         "-E", "UTF8", "--no-sync", "--no-instructions"],
        check=True, capture_output=True, cwd=root, **_as_postgres(),
    )
    return data


class Postgres:
    """One server; ``url()`` names a fresh database on it for each caller that asks."""

    def __init__(self) -> None:
        self.dir = _owned_dir("skillgauge-pg-")
        data, sockets = self.dir / "data", self.dir / "sockets"
        sockets.mkdir()
        if os.geteuid() == 0:
            shutil.chown(sockets, "postgres", "postgres")
        # A copy of this process's freshly initialized cluster: what ``initdb`` would write.
        subprocess.run(["cp", "-a", str(_initialized()), str(data)], check=True, cwd=self.dir, **_as_postgres())
        self.log = self.dir / "postgres.log"
        for _ in range(5):
            self.port = _free_port()
            self._launch()
            if self._wait_ready():
                return
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError(f"postgres did not start: {self.log.read_text()}")

    def _launch(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "postgres"), "-D", str(self.dir / "data"), "-p", str(self.port),
                 "-k", str(self.dir / "sockets"), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
                 *_NO_SYNC],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, **_as_postgres(),
            )

    def halt(self) -> None:
        """Stop the server at once (an immediate shutdown: as a crash, to its clients), its
        databases kept for ``resume``."""
        self.proc.send_signal(signal.SIGQUIT)
        self.proc.wait(timeout=60)

    def resume(self) -> None:
        """Start the halted server again, on the same port."""
        self._launch()
        if not self._wait_ready():
            raise RuntimeError(f"postgres did not start again: {self.log.read_text()}")

    def _wait_ready(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with psycopg.connect(self.admin_dsn, connect_timeout=2):
                    return True
            except psycopg.OperationalError:
                time.sleep(0.1)
        return False

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self) -> str:
        """A new, empty database's URL (``postgresql://``: the psycopg driver)."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: smart shutdown; the sessions are the test's
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[Postgres]:
    """A server of this test module's own."""
    server = Postgres()
    try:
        yield server
    finally:
        server.stop()
