"""An exclusive lock on the data directory: one ``skillgauge serve`` per spool.

Two processes appending to the same segment files and replaying the same requests would
each evaluate the other's sessions and corrupt the offsets.  ``flock`` on ``skillgauge.lock``
in the directory keeps the second one out; the holder writes its pid into the file, so the
refusal can name it.  The kernel releases the lock with the process, however it ends: after
a ``kill -9`` the next start takes it at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_FILE = "skillgauge.lock"


class DataDirLocked(RuntimeError):
    """Another live process holds the data directory."""


class DataDirLock:
    """Held from ``acquire`` until ``release`` (or the process's end)."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        """Take the lock or raise ``DataDirLocked`` naming the holder's pid; ``RuntimeError``
        if the directory cannot be used at all."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise RuntimeError(f"storage.path: cannot lock {self.path.parent}: {err}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise DataDirLocked(
                f"storage.path: {self.path.parent} is in use by another skillgauge serve "
                f"(pid {holder or 'unknown'}, holding {self.path}); stop it, or give this one a "
                "storage.path of its own"
            ) from None
        self._fd = fd
        try:  # for the refusal message only: a full disk must not keep serve from starting
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as err:
            log.warning("%s: cannot write this process's pid into the lock file: %s", self.path, err)
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the last descriptor releases the flock
        self._fd = None


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(int(os.pread(fd, 32, 0).decode().strip()))
    return ""
