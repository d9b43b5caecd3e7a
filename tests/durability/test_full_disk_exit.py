"""SIGTERM while the data directory's disk is completely full: ``serve`` exits cleanly, with
the exit code it documents and no traceback, and keeps what it acknowledged for the next
start."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

from shared_tables import SharedTables
from support import Server, wait_for
from test_full_disk import _export, _request, small_disk  # noqa: F401 - small_disk is a fixture

from collector.cli import EXIT_STORAGE_FULL


def test_sigterm_on_a_full_disk_exits_cleanly_and_keeps_what_it_acknowledged(
    tmp_path: Path, small_disk: Path, shared: SharedTables  # noqa: F811
) -> None:
    storage = shared.config({"storage": {"path": str(small_disk / "data")}})
    # The operator's other files on that disk: deleted before the second start, so that it has
    # room whatever the first one wrote before and after the disk filled (the store's reserve
    # needs twice its 1 MiB free to be made again, ``collector/state/reserve.py``).
    (small_disk / "ballast").write_bytes(b"\0" * (3 << 20))
    server = Server(tmp_path, {**storage, "sessions": {"idle_timeout": "1h", "check_interval": "0.1s"}})
    acked: list[str] = []
    try:
        for n in range(200):
            if _export(server, _request(f"full-{n:03d}", n)) is not None:
                break
            acked.append(f"full-{n:03d}")
        assert len(acked) >= 5
        # Whatever room is left goes too: the disk is completely full.
        with contextlib.suppress(OSError), (small_disk / "rest").open("wb") as rest:
            while True:
                rest.write(b"\0" * 4096)
                rest.flush()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=60)
        log = server.log()
    finally:
        server.stop()
    print(log[-3000:])
    assert code == EXIT_STORAGE_FULL
    assert "Traceback" not in log
    assert "storage failing" in log and "next start" in log
    (small_disk / "rest").unlink()
    (small_disk / "ballast").unlink()
    server = Server(tmp_path, {**storage, "sessions": {"idle_timeout": "1s", "check_interval": "0.1s"}})
    try:
        db = shared.at(small_disk / "data")
        wait_for(lambda: len(db.rows("SELECT 1 FROM coverage")) >= len(acked), timeout=60, interval=0.3)
        sessions = {row[0] for row in db.rows("SELECT session FROM coverage")}
    finally:
        print(server.log()[-3000:])  # the second start's log, shown if this part fails
        assert server.stop() == 0
    assert sessions >= set(acked)
