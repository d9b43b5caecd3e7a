"""SIGTERM while ``serve`` starts (replaying its spool, which takes minutes after a crash under
load; a rolling update may stop it then): it stops at once and cleanly, exit 0 and no
traceback, and the next start replays what the spool holds, losing nothing."""

from __future__ import annotations

import signal
from pathlib import Path

from perf.bench import recorded_session
from support import Server, export_grpc, wait_for
from test_store_refusal import _evaluated

# Loaded by the serve below at interpreter start (``sitecustomize``): its start waits, once the
# status API is up, until the test creates the gate file, as a long replay would.
HOLD = """
import asyncio, os, pathlib
from collector import service
_gate = pathlib.Path(os.environ["SKILLGAUGE_TEST_GATE"])
_start = service.Chain.start
async def _held(chain):
    print("test: start held", flush=True)
    while not _gate.exists():
        await asyncio.sleep(0.05)
    await _start(chain)
service.Chain.start = _held
"""


def test_sigterm_while_starting_stops_at_once_and_the_next_start_replays_it_all(tmp_path: Path) -> None:
    data = tmp_path / "data"
    storage = {"storage": {"path": str(data)}}
    for run in ("first", "held", "again"):
        (tmp_path / run).mkdir()
    first = Server(tmp_path / "first", {**storage, "sessions": {"idle_timeout": "1h"}})
    try:
        export_grpc(first, recorded_session(0, "starting-0").SerializeToString())  # open at the kill
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
    finally:
        first.stop()

    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "sitecustomize.py").write_text(HOLD)
    gate = tmp_path / "gate"
    held = Server(
        tmp_path / "held", storage, env={"PYTHONPATH": str(hold), "SKILLGAUGE_TEST_GATE": str(gate)}, wait=False
    )
    try:
        wait_for(lambda: "test: start held" in held.log(), timeout=60)
        held.proc.send_signal(signal.SIGTERM)
        code = held.proc.wait(timeout=60)
        log = held.log()
    finally:
        gate.touch()
        held.stop()
    assert code == 0, log
    assert "signal received while starting" in log and "skillgauge stopped" in log
    assert "Traceback" not in log

    again = Server(tmp_path / "again", storage)  # idle timeout 1 s: the session closes
    try:
        wait_for(lambda: _evaluated(again, "starting-0"), timeout=60)
    finally:
        assert again.stop() == 0
