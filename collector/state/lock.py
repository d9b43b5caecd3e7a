"""An exclusive lock on the data directory: one ``skillgauge serve`` per spool.

Two processes appending to the same segment files and replaying the same requests would
each evaluate the other's sessions and corrupt the offsets.  The kernel keeps the second one
out: ``flock`` on the directory itself and on ``skillgauge.lock`` in it, both descriptors held
open for the process's life.  Deleting the lock file does not let a second process in: the
lock on the directory stays with the directory.  The holder writes its pid into the file, so
the refusal can name it (or, the file deleted, the kernel's table of locks).  The kernel releases both
locks with the process, however it ends: after a ``kill -9`` the next start takes them at once.
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
        self._dir_fd: int | None = None

    def acquire(self) -> DataDirLock:
        """Take the lock or raise ``DataDirLocked`` naming the holder's pid; ``RuntimeError``
        if the directory cannot be used at all."""
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as err:
            raise RuntimeError(f"storage.path: cannot lock {directory}: {err}") from None
        fd: int | None = None
        try:
            # The directory first: a holder whose lock file was deleted still holds it.
            fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a serve of an older version takes
        except BlockingIOError:
            holder = self._holder(dir_fd)
            for held in (fd, dir_fd):
                if held is not None:
                    os.close(held)
            raise DataDirLocked(
                f"storage.path: {directory} is in use by another skillgauge serve "
                f"(pid {holder or 'unknown'}, holding {self.path}); stop it, or give this one a "
                "storage.path of its own"
            ) from None
        except OSError as err:
            for held in (fd, dir_fd):
                if held is not None:
                    os.close(held)
            raise RuntimeError(f"storage.path: cannot lock {directory}: {err}") from None
        self._fd, self._dir_fd = fd, dir_fd
        try:  # for the refusal message only: a full disk must not keep serve from starting
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as err:
            log.warning("%s: cannot write this process's pid into the lock file: %s", self.path, err)
        return self

    def _holder(self, dir_fd: int) -> str:
        """The pid of the process holding the lock: from the lock file, or, if it was
        deleted, from the kernel's table of locks."""
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if pid := _read_pid(fd):
                    return pid
            finally:
                os.close(fd)
        return _flock_holder(os.fstat(dir_fd).st_ino)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the last descriptor releases the flock
        self._fd = None
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(int(os.pread(fd, 32, 0).decode().strip()))
    return ""


def _flock_holder(inode: int) -> str:
    """The pid /proc/locks names for a flock on ``inode`` ("" if none is listed)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF"
            if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                return fields[4]
    return ""
