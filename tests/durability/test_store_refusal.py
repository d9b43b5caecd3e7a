"""A data directory whose database was emptied, deleted, truncated or scribbled over while
request segments hold acknowledged sessions: ``serve`` refuses to start (non-zero, naming the
file and ``skillgauge recover``) and deletes no segment file; ``skillgauge recover`` rebuilds
the database from the segments and the next ``serve`` evaluates every acknowledged session."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from perf.bench import recorded_session
from shared_tables import SharedTables
from support import Server, export_grpc, wait_for

SESSIONS = 6


def _empty(db: Path) -> None:
    db.write_bytes(b"")


def _delete(db: Path) -> None:
    db.unlink()


def _truncate(db: Path) -> None:
    with db.open("r+b") as file:
        file.truncate(db.stat().st_size // 2)


def _scribble(db: Path) -> None:
    """Random bytes over everything after the first page's header (the schema and the rows)."""
    size = db.stat().st_size
    with db.open("r+b") as file:
        file.seek(100)
        file.write(os.urandom(size - 100))


def _segments(data: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((data / "requests").glob("*.seg"))
    }


def _recover(config: Path) -> subprocess.CompletedProcess[str]:
    """``skillgauge recover --config config``, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "collector", "recover", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _evaluated(server: Server, name: str) -> dict[str, Any] | None:
    status, body = server.get_json(f"/v1/sessions/{name}")
    if status != 200 or "open" in body or not body.get("revisions"):
        return None
    return dict(body)


@pytest.mark.parametrize(
    "damage", [_empty, _delete, _truncate, _scribble], ids=["emptied", "deleted", "truncated", "scribbled"]
)
def test_a_broken_database_is_refused_and_recover_brings_every_session_back(
    tmp_path: Path, damage: Callable[[Path], None], shared: SharedTables
) -> None:
    data = tmp_path / "data"
    storage = shared.config({"storage": {"path": str(data)}})
    for run in ("ingest", "refused", "recovered"):
        (tmp_path / run).mkdir()
    names = [f"refusal-{n:02d}" for n in range(SESSIONS)]
    spans = {}
    # Sessions stay open (a long idle timeout) and the process is killed: only the segments
    # and the database hold them (a clean stop would close and evaluate them).
    ingest = Server(tmp_path / "ingest", {**storage, "sessions": {"idle_timeout": "1h"}})
    try:
        for n, name in enumerate(names):
            request = recorded_session(n, name)
            spans[name] = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            export_grpc(ingest, request.SerializeToString())  # acknowledged
    finally:
        ingest.proc.send_signal(signal.SIGKILL)
        ingest.stop()
    db = data / "skillgauge.sqlite"
    # What the WAL holds is copied into the database file and the WAL emptied, as the last
    # connection to close does: the damage below is then all there is of the database.
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    before = _segments(data)
    assert before, "the acknowledged requests are in segment files"
    damage(db)

    refused = Server(tmp_path / "refused", storage, wait=False)
    code = refused.proc.wait(timeout=60)
    refused.stop()
    log = refused.log()
    assert code != 0, log
    assert f"the database {db} " in log, log
    assert "skillgauge recover" in log and "move " in log, log
    assert "Traceback" not in log, log
    assert _segments(data) == before  # no segment file deleted, none changed

    config = refused.config_path
    recovered = _recover(config)
    assert recovered.returncode == 0, recovered.stderr
    assert f"rebuilt with {SESSIONS} requests" in recovered.stdout, recovered.stdout
    assert list(data.glob("skillgauge.sqlite.broken-*")) or damage is _delete  # moved aside, not deleted

    server = Server(tmp_path / "recovered", storage)  # idle timeout 1 s: each session closes
    try:
        for name in names:
            body = wait_for(lambda name=name: _evaluated(server, name), timeout=60)
            coverage = body["revisions"][-1]["records"][-1]["coverage"]
            assert coverage["spans"] == spans[name], (name, coverage)
    finally:
        server.proc.send_signal(signal.SIGTERM)
        assert server.stop() == 0


def test_a_fresh_directory_and_a_sound_one_start_as_before(tmp_path: Path) -> None:
    """No database and no segments is a fresh start; ``recover`` leaves a sound database alone."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    storage = {"storage": {"path": str(tmp_path / "data")}}
    server = Server(tmp_path / "a", storage)
    server.proc.send_signal(signal.SIGTERM)
    assert server.stop() == 0
    done = _recover(server.config_path)
    assert done.returncode == 0, done.stderr
    assert "sound; nothing to recover" in done.stdout
    assert not list((tmp_path / "data").glob("skillgauge.sqlite.broken-*"))
    again = Server(tmp_path / "b", storage)
    again.proc.send_signal(signal.SIGTERM)
    assert again.stop() == 0
