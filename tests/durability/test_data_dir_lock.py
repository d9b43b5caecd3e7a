"""Two ``skillgauge serve`` on one data directory: the second refuses to start (exit 2, the
holder's pid named); once the holder is killed with SIGKILL, a new one starts at once."""

from __future__ import annotations

import signal
from pathlib import Path

from support import Server


def test_a_second_serve_on_the_same_data_directory_exits_2_and_a_killed_holder_frees_it(
    tmp_path: Path,
) -> None:
    data = {"storage": {"path": str(tmp_path / "shared")}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    holder = Server(tmp_path / "a", data)
    try:
        second = Server(tmp_path / "b", data, wait=False)
        assert second.proc.wait(timeout=30) == 2
        second.stop()
        log = second.log()
        assert f"in use by another skillgauge serve (pid {holder.proc.pid}" in log, log
        assert holder.get_json("/readyz")[0] == 200  # the holder is untouched
        holder.proc.send_signal(signal.SIGKILL)
        holder.proc.wait()
        after = Server(tmp_path / "c", data)  # the kernel dropped the lock with the process
        try:
            assert after.get_json("/readyz")[0] == 200
        finally:
            assert after.stop() == 0
    finally:
        holder.stop()


def test_deleting_the_lock_file_does_not_let_a_second_serve_in(tmp_path: Path) -> None:
    """The lock is the kernel's, held on the directory: ``rm skillgauge.lock`` under a running
    serve leaves it held, and a second serve on the directory still exits 2."""
    data = {"storage": {"path": str(tmp_path / "shared")}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    holder = Server(tmp_path / "a", data)
    try:
        (tmp_path / "shared" / "skillgauge.lock").unlink()
        second = Server(tmp_path / "b", data, wait=False)
        assert second.proc.wait(timeout=30) == 2, second.log()
        second.stop()
        assert "in use by another skillgauge serve" in second.log()
        assert holder.get_json("/readyz")[0] == 200  # the holder is untouched
    finally:
        holder.proc.send_signal(signal.SIGTERM)
        assert holder.stop() == 0
