"""A real ``skillgauge serve`` whose spool segment file an operator's clean-up deletes while
it runs: the request written to the deleted file is refused as retryable (the sender sends it
again), nothing acknowledged after the deletion is lost across a kill -9, and what the
deletion took is counted as quarantined at the restart, not passed over in silence."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
from perf.bench import recorded_session
from shared_tables import SharedTables
from support import Server, export_grpc, metric_value, wait_for

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
        deleted = sorted(p.name for p in requests.iterdir())
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
