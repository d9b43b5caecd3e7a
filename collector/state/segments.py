"""Spooled request bytes, appended to segment files beside the spool's database.

As SQLite blobs, each ~1 MB request was written to the WAL, copied into the database, and
freed again page by page once no session needed it: ~3 ms of CPU a request (insert 1.6 ms,
delete 1.4 ms per MB), a sixth of the serving process's time at saturation, and the
deletions held acknowledgements up.  Appended to a file, the bytes cost one write (0.2 ms
per MB) and leave with one unlink once every request in the file is done.

The database keeps where each request is (``Spooled``), committed after its bytes are
written: a process crash can leave bytes no row points to, never a row without its bytes.
Only the spool's writer thread appends; reads open the file on their own.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

_SUFFIX = ".seg"
SEGMENT_BYTES = 64 * 1024 * 1024  # a new file once this is reached: the unit that is freed


@dataclass(frozen=True, slots=True)
class Spooled:
    """Where one request's bytes are."""

    segment: int
    offset: int
    length: int


class Segments:
    def __init__(self, directory: Path, segment_bytes: int = SEGMENT_BYTES) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._segment_bytes = segment_bytes
        # Never append to a file from before: a crash may have left it with a torn tail.
        self._number = max(self.numbers(), default=0)
        self._fd: int | None = None
        self._size = 0

    def numbers(self) -> list[int]:
        return sorted(int(p.stem) for p in self.directory.glob(f"*{_SUFFIX}") if p.stem.isdigit())

    def _path(self, number: int) -> Path:
        return self.directory / f"{number:08d}{_SUFFIX}"

    def append(self, payload: bytes) -> Spooled:
        if self._fd is None or self._size >= self._segment_bytes:
            self.close()
            self._number += 1
            self._fd = os.open(
                self._path(self._number), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600
            )
            self._size = 0
        view = memoryview(payload)
        while view:  # a regular file takes it all at once; a full disk raises OSError
            view = view[os.write(self._fd, view) :]
        where = Spooled(self._number, self._size, len(payload))
        self._size += len(payload)
        return where

    def read(self, where: Spooled) -> bytes:
        with self._path(where.segment).open("rb") as file:
            file.seek(where.offset)
            data = file.read(where.length)
        if len(data) != where.length:
            raise OSError(
                f"{self._path(where.segment)}: {len(data)} of {where.length} bytes at offset {where.offset}"
            )
        return data

    def drop_before(self, segment: int | None) -> None:
        """Delete the files before ``segment`` (None: every file), never the one being
        appended to."""
        keep_from = self._number if segment is None else min(segment, self._number)
        for number in self.numbers():
            if number >= keep_from:
                break
            with contextlib.suppress(FileNotFoundError):
                self._path(number).unlink()

    def size_bytes(self) -> int:
        total = 0
        for number in self.numbers():
            with contextlib.suppress(OSError):
                total += self._path(number).stat().st_size
        return total

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
