"""The data directory's lock: one holder at a time, named when another is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collector.state.lock import LOCK_FILE, DataDirLock, DataDirLocked


def test_a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go(tmp_path: Path) -> None:
    first = DataDirLock(tmp_path / "data").acquire()  # the directory is made if need be
    assert (tmp_path / "data" / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    with pytest.raises(DataDirLocked, match=rf"in use by another skillgauge serve \(pid {os.getpid()},"):
        DataDirLock(tmp_path / "data").acquire()
    first.release()
    second = DataDirLock(tmp_path / "data").acquire()
    second.release()


def test_a_directory_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(RuntimeError, match=r"storage\.path: cannot lock"):
        DataDirLock(tmp_path / "file" / "data").acquire()


def test_a_deleted_lock_file_leaves_the_directory_locked(tmp_path: Path) -> None:
    first = DataDirLock(tmp_path).acquire()
    (tmp_path / LOCK_FILE).unlink()
    with pytest.raises(DataDirLocked, match=r"in use by another skillgauge serve"):
        DataDirLock(tmp_path).acquire()
    first.release()
    DataDirLock(tmp_path).acquire().release()
