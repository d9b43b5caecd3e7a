"""Room on the data directory's disk kept for finishing what was acknowledged.

A disk that fills with requests must still take the writes that let their files go: the
closed revisions, the evaluated sessions, the deletions and the checkpoint after them.  None
of them is large, but with not one free page none can be committed, and the request files
stay until they are: the store would stay full for good.  So the store keeps ``size`` bytes
in a file of its own (``reserve.room`` in the data directory) and lets it go
(``release``) when one of its own writes fails for want of room; from then on requests are
refused (``released``) and the room goes to those writes.  The file is written back
(``restore``, the store's probe of failing storage) once the disk has room for it twice
over; requests are taken again after that.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from pathlib import Path

from collector.state.segments import Write

log = logging.getLogger(__name__)

RESERVE_BYTES = 1024 * 1024
NAME = "reserve.room"
_CHUNK = 64 * 1024


def reserve_for(max_bytes: int | None) -> int:
    """The reserve of a store held to ``max_bytes`` (``storage.max_bytes``): a sixteenth of
    it, 64 KiB to ``RESERVE_BYTES``."""
    return RESERVE_BYTES if max_bytes is None else min(RESERVE_BYTES, max(64 * 1024, max_bytes // 16))


class Reserve:
    """``size`` bytes held in ``directory / NAME``; ``write`` is how they reach the file."""

    def __init__(self, directory: Path, size: int = RESERVE_BYTES, write: Write = os.write) -> None:
        self.path = directory / NAME
        self.size = size
        self._write = write
        self._lock = threading.Lock()  # ``release`` (the writer thread) and ``restore`` may race
        self.released = not self._held()

    def _held(self) -> bool:
        try:
            return self.path.stat().st_size >= self.size
        except OSError:
            return False

    def release(self) -> bool:
        """Delete the file (requests are refused until ``restore``); True if that freed room."""
        with self._lock:
            if self.released:
                return False
            self.released = True
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            log.warning(
                "spool: the disk is full; the %d bytes kept in reserve go to recording what was "
                "acknowledged, and requests are refused until there is room again",
                self.size,
            )
            return True

    def restore(self) -> None:
        """Write the file back; ``OSError`` (``ENOSPC``) while the disk has less than twice its
        size free (the file is then left absent)."""
        with self._lock:
            if not self.released:
                return
            stat = os.statvfs(self.path.parent)
            if stat.f_bavail * stat.f_frsize < 2 * self.size:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                zeros = memoryview(bytes(_CHUNK))
                left = self.size
                while left:
                    left -= self._write(fd, zeros[: min(left, _CHUNK)])
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    self.path.unlink()
                raise
            os.close(fd)
            self.released = False
