"""Files of a real ``skillgauge serve``'s data directory deleted while it runs, as an
operator's clean-up might.

A spool segment file: the request written to the deleted file is refused as retryable (the
sender sends it again), nothing acknowledged after the deletion is lost across a kill -9, and
what the deletion took is counted as quarantined at the restart, not passed over in silence.

The database: what is evaluated after it went is in no file, so no request file is deleted
from then on; the next start is refused, and ``skillgauge recover`` brings every session back
to be evaluated again."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
from perf.bench import recorded_session
from shared_tables import SharedTables
from support import Server, export_grpc, metric_value, wait_for
from test_store_refusal import _evaluated, _recover

BEFORE, AFTER = 4, 6  # sessions acknowledged before the deletion, and after it


def _send(server: Server, body: bytes) -> int:
    """Send ``body`` as an exporter does, again after each retryable refusal (UNAVAILABLE);
    returns the refusals."""
    refusals = 0
    deadline = time.monotonic() + 60
    while True:
        try:
            export_grpc(server, body)
            return refusals
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE, err
            assert time.monotonic() < deadline, "still refused after 60 s"
            refusals += 1
            time.sleep(0.2)


def test_a_segment_file_deleted_under_serve_loses_nothing_acknowledged_after_it(tmp_path: Path) -> None:
    sessions = [(f"deleted-{n:02d}", recorded_session(n, f"deleted-{n:02d}").SerializeToString()) for n in range(BEFORE + AFTER)]
    requests = tmp_path / "data" / "requests"
    server = Server(tmp_path, {"sessions": {"idle_timeout": "1h", "check_interval": "0.1s"}})
    try:
        for _, body in sessions[:BEFORE]:
            assert _send(server, body) == 0
        deleted = sorted(p.name for p in requests.glob("*.seg"))
        for name in deleted:
            (requests / name).unlink()
        refusals = [_send(server, body) for _, body in sessions[BEFORE:]]
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        first_log = server.log()
    finally:
        server.stop()
    assert deleted == ["00000001.seg"]
    assert refusals[0] >= 1  # written to the deleted file: refused, then sent again
    assert "00000001.seg was deleted while in use (not by skillgauge)" in first_log

    server = Server(tmp_path, {"sessions": {"idle_timeout": "1s", "check_interval": "0.1s"}})
    db = SharedTables(None).at(tmp_path / "data")
    after = {name for name, _ in sessions[BEFORE:]}
    try:
        wait_for(lambda: {row[0] for row in db.rows("SELECT session FROM coverage")} >= after, timeout=60, interval=0.3)
        evaluated = {row[0] for row in db.rows("SELECT session FROM coverage")}
        quarantined = metric_value(server.metrics(), "skillgauge_spool_quarantined_total", reason="unreadable")
    finally:
        print(server.log()[-3000:])
        assert server.stop() == 0
    assert evaluated == after  # every session acknowledged after the deletion; none before it
    assert quarantined == BEFORE  # what the deletion took, counted (one request a session)


def test_the_database_deleted_under_serve_is_refused_at_the_next_start_and_recover_loses_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    names = [f"db-deleted-{n}" for n in range(6)]
    config = {
        "sessions": {"idle_timeout": "0.5s", "check_interval": "0.1s"},
        "storage": {"path": str(data), "checkpoint_interval": "0.1s"},
    }
    for run in ("first", "refused", "recovered"):
        (tmp_path / run).mkdir()
    first = Server(tmp_path / "first", config)
    try:
        for n, name in enumerate(names):
            if n == 3:  # three sessions evaluated before the deletion, three after it
                for database in data.glob("skillgauge.sqlite*"):
                    database.unlink()
            export_grpc(first, recorded_session(n, name).SerializeToString())
            wait_for(lambda name=name: _evaluated(first, name), timeout=60)
        wait_for(lambda: "was deleted or replaced while serve runs" in first.log(), timeout=60)
    finally:
        assert first.stop() == 0
    assert sorted(p.name for p in (data / "requests").glob("*.seg")) == ["00000001.seg"]

    refused = Server(tmp_path / "refused", config, wait=False)
    code = refused.proc.wait(timeout=60)
    refused.stop()
    assert code != 0 and "skillgauge recover" in refused.log(), refused.log()
    recovered = _recover(refused.config_path)
    assert recovered.returncode == 0, recovered.stderr

    again = Server(tmp_path / "recovered", config)
    try:
        for name in names:  # each evaluated again: the three recorded after the deletion too
            wait_for(lambda name=name: _evaluated(again, name), timeout=60)
    finally:
        assert again.stop() == 0
