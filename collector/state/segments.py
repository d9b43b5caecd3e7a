"""Spooled request bytes, appended to segment files beside the spool's database.

A request's bytes cost one write (0.2 ms per MB) and leave with one unlink, once every
request in their file is done.  (Kept as SQLite blobs they would be written to the WAL,
copied into the database and freed page by page: ~3 ms of CPU per MB, and deletions that
hold acknowledgements up.)

The database keeps where each request is (``Spooled``), committed after its bytes are
written: a process crash can leave bytes no row points to (indexed at the next start from
their frames, ``collector.state.appended``), never a row without its bytes.  Appends are made
on the event loop; reads open the file on their own.

A failed append (a full disk: some bytes written, then ``ENOSPC``) leaves the file as it
was before it: the file is cut back to its last whole request, so the next request's offset
is where its bytes really are.  If the file cannot be cut back, its real end is read again;
if even that fails, the next request starts a new file.

Each request's bytes follow a small frame header (``Frame``: a magic, the signal, the tenant,
the length and the request's id): the files describe themselves, so that a database lost or
damaged can be rebuilt from them (``skillgauge recover``), and so that requests appended but
not yet indexed when the process died are indexed at the next start (``frames_after``).  No checksum: at 1 GB/s, a CRC-32 cost more CPU a
request than the rest of its append; a frame cut short by a crash shows by its length, and a
request that is not what its frame says is quarantined when it is replayed, as any is.  A row's offset is that of the
request's bytes, after their header.  Files written before frames (no magic at their start)
are read through their rows as before; ``frames`` cannot split them.  Frames written before
request ids (magic ``SGR1``) are read with no id.

Appends and ``drop_before`` may run on different threads: both hold ``lock``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_SUFFIX = ".seg"
SEGMENT_BYTES = 64 * 1024 * 1024  # a new file once this is reached: the unit that is freed
# ``os.write``'s shape: the seam through which tests make a disk fill up mid-request.
Write = Callable[[int, memoryview], int]
# ``os.fdatasync``'s shape: the seam through which tests hold a sync back.
Sync = Callable[[int], None]
# A frame header: magic, signal code, tenant length (its UTF-8 bytes follow), payload length,
# request id.  ``_OLD``: the same without the request id.
_MAGIC = b"SGR2"
_HEADER = struct.Struct(">4sBHIQ")
_OLD_MAGIC = b"SGR1"
_OLD_HEADER = struct.Struct(">4sBHI")
_MAGIC_BYTES = 4
HEADER_BYTES = _HEADER.size  # a frame's bytes before its tenant's name and the request's
_SIGNALS = {"traces": 1, "logs": 2}
_SIGNAL_NAMES = {code: name for name, code in _SIGNALS.items()}


# Up to this size a request is copied behind its header and written once; beyond it, the
# header and the request are written apart (a write costs ~3 us; copying a MB, ~80 us).
_COPY_UP_TO = 64 * 1024


def _pieces(header: bytes, payload: bytes) -> tuple[memoryview, ...]:
    if len(payload) <= _COPY_UP_TO:
        return (memoryview(b"".join((header, payload))),)
    return memoryview(header), memoryview(payload)


@dataclass(frozen=True, slots=True)
class Frame:
    """One request as its segment file describes it (``Segments.frames``)."""

    signal: str
    tenant: str
    where: Spooled
    request: int | None = None  # its id (None: a frame written before ids)


@dataclass(frozen=True, slots=True)
class Spooled:
    """Where one request's bytes are."""

    segment: int
    offset: int
    length: int

    def fields(self) -> tuple[int, int, int]:
        return self.segment, self.offset, self.length


class Segments:
    def __init__(
        self,
        directory: Path,
        segment_bytes: int = SEGMENT_BYTES,
        write: Write = os.write,
        sync: Sync = os.fdatasync,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._segment_bytes = segment_bytes
        self._write = write
        self._sync = sync
        # (number, descriptor) of the files appended to since the last ``sync``, closed since.
        self._retired: list[tuple[int, int]] = []
        self._created = False  # a file was created since the last ``sync``: its name too
        # Never append to a file from before: a crash may have left it with a torn tail.
        self._number = max(self.numbers(), default=0)
        self._fd: int | None = None
        self._size = 0
        self._last_start = 0  # where the last append's frame begins (``trim``)
        self.lock = threading.Lock()  # held by appends and ``drop_before`` (see the module)

    def numbers(self) -> list[int]:
        return sorted(int(p.stem) for p in self.directory.glob(f"*{_SUFFIX}") if p.stem.isdigit())

    def _path(self, number: int) -> Path:
        return self.directory / f"{number:08d}{_SUFFIX}"

    def append(self, payload: bytes, signal: str = "traces", tenant: str = "", request: int = 0) -> Spooled:
        """Write one request's frame (``request``: its id); its ``Spooled`` points at the payload."""
        with self.lock:
            return self.append_locked(payload, signal, tenant, request)

    def append_locked(self, payload: bytes, signal: str, tenant: str, request: int) -> Spooled:
        """``append``, its caller holding ``lock``."""
        if self._fd is None or self._size >= self._segment_bytes:
            self._retire()
            self._number += 1
            self._fd = self._create(self._path(self._number))
            self._created = True
            self._size = 0
        name = tenant.encode()
        header = _HEADER.pack(_MAGIC, _SIGNALS.get(signal, 0), len(name), len(payload), request) + name
        start = self._size
        try:
            for view in _pieces(header, payload):
                while view:  # a regular file takes all at once; a full disk writes less, then raises
                    view = view[self._write(self._fd, view) :]
        except BaseException:
            self._cut_back(start)
            raise
        if os.fstat(self._fd).st_nlink == 0:  # deleted while in use: its bytes are in no file
            self._abandon()
            raise OSError(
                errno.ENOENT,
                "the spool's segment file was deleted while in use",
                str(self._path(self._number)),
            )
        offset = start + _HEADER.size + len(name)
        self._size, self._last_start = offset + len(payload), start
        return Spooled(self._number, offset, len(payload))

    def sync(self) -> None:
        """Make every frame appended before the call durable (``fdatasync`` of each file
        appended to since the last call, and of the directory when a file was created in
        it); raises ``OSError`` when the disk cannot, or when the file being appended to was
        deleted meanwhile (by something else: its frames are in no file, and the next append
        starts a new one).  Runs on any thread: it holds ``lock`` only to take the files, and syncs a
        duplicate of the current file's descriptor, so appends go on meanwhile."""
        with self.lock:
            retired, self._retired = self._retired, []
            current = os.dup(self._fd) if self._fd is not None else None
            created, self._created = self._created, False
        fds = [fd for _, fd in retired] + ([] if current is None else [current])
        try:
            for fd in fds:
                self._sync(fd)
            if created:
                directory = os.open(self.directory, os.O_RDONLY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)
            # The file being appended to, deleted meanwhile.  (A file retired since was maybe
            # deleted by ``drop_before`` under this very sync: its requests were all done.)
            deleted = current is not None and os.fstat(current).st_nlink == 0
        except BaseException:
            with self.lock:  # not synced: the next call tries again
                self._created = self._created or created
                self._retired[:0] = retired
                fds = [] if current is None else [current]
            raise
        finally:
            for fd in fds:
                os.close(fd)
        if deleted:
            with self.lock:
                if self._fd is not None and os.fstat(self._fd).st_nlink == 0:
                    self._abandon()
            raise OSError(
                errno.ENOENT, "a segment file of the spool was deleted while in use", str(self.directory)
            )

    def trim(self, where: Spooled) -> None:
        """Undo the last ``append`` (its row could not be committed): its bytes go."""
        if (
            self._fd is not None
            and where.segment == self._number
            and where.offset + where.length == self._size
        ):
            self._cut_back(self._last_start)

    def _cut_back(self, size: int) -> None:
        """Make the file end at ``size`` (what its committed requests hold), or failing that
        learn where it really ends; failing both, the next append starts a new file."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, size)
            self._size = size
            return
        except OSError as err:
            log.warning("%s: cannot cut back to %d bytes: %s", self._path(self._number), size, err)
        try:
            self._size = os.fstat(self._fd).st_size
        except OSError:
            self._retire()

    def frames(self, number: int, start: int = 0) -> Iterator[Frame]:
        """The whole requests of file ``number``, in order, from its frame at byte ``start``
        on; stops at the first frame that is cut short or has no magic (a crash mid-append
        leaves one at the end).  Raises ``ValueError`` for a file written without frames."""
        path = self._path(number)
        with path.open("rb") as file:
            end = os.fstat(file.fileno()).st_size
            offset = start
            file.seek(start)
            while True:
                magic = file.read(_MAGIC_BYTES)
                header_type = _HEADER if magic == _MAGIC else _OLD_HEADER if magic == _OLD_MAGIC else None
                if header_type is None:
                    if (
                        offset == 0
                        and magic
                        and not (_MAGIC.startswith(magic) or _OLD_MAGIC.startswith(magic))
                    ):
                        raise ValueError(f"{path} was written without frames")
                    return
                header = magic + file.read(header_type.size - _MAGIC_BYTES)
                if len(header) < header_type.size:
                    return
                _, code, name_length, size, *request = header_type.unpack(header)
                name = file.read(name_length)
                begin = offset + header_type.size + name_length
                if len(name) < name_length or begin + size > end:
                    return
                file.seek(size, os.SEEK_CUR)  # the payload is not read
                yield Frame(
                    _SIGNAL_NAMES.get(code, "unknown"),
                    name.decode(errors="replace"),
                    Spooled(number, begin, size),
                    request[0] if request else None,
                )
                offset = begin + size

    def frames_after(self, where: Spooled | None) -> Iterator[Frame]:
        """Every whole frame after the request at ``where`` (None: in every file), in order:
        those a crash may have left with no row."""
        for number in self.numbers():
            if where is not None and number < where.segment:
                continue
            start = where.offset + where.length if where is not None and number == where.segment else 0
            try:
                yield from self.frames(number, start)
            except ValueError:  # a file from before frames: nothing is appended to it
                continue

    def read(self, where: Spooled) -> bytes:
        with self._path(where.segment).open("rb") as file:
            file.seek(where.offset)
            data = file.read(where.length)
        if len(data) != where.length:
            raise OSError(
                f"{self._path(where.segment)}: {len(data)} of {where.length} bytes at offset {where.offset}"
            )
        return data

    def read_what_is_left(self, where: Spooled) -> bytes:
        """Whatever bytes of ``where`` the file still holds (for a copy kept for inspection)."""
        try:
            with self._path(where.segment).open("rb") as file:
                file.seek(where.offset)
                return file.read(where.length)
        except OSError:
            return b""

    def probe(self, size: int) -> None:
        """Write ``size`` bytes to a scratch file and delete it: raises OSError while the disk
        cannot take a request of that size."""
        path = self.directory / "probe.tmp"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(bytes(size))
            while view:
                view = view[self._write(fd, view) :]
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()

    def drop_before(self, segment: int | None, first: Callable[[], None] | None = None) -> None:
        with self.lock:
            self.drop_before_locked(segment, first)

    def drop_before_locked(self, segment: int | None, first: Callable[[], None] | None = None) -> None:
        """Delete the files before ``segment``, never the one being appended to; None (no
        request needs any file): every file, the one being appended to too (the next append
        starts a new one), so that a spool with nothing left to replay holds no request bytes.
        ``first``: called once before the first file goes, when one does (what makes the
        deletion of the rows that pointed into them durable); an ``OSError`` from it leaves
        every file where it was."""
        # Every request done (None): the file being appended to goes too, unsynced.
        keep_from = self._number + 1 if segment is None else min(segment, self._number)
        going = [number for number in self.numbers() if number < keep_from]
        if going:
            if first is not None:
                first()
            # Files that go hold no frame a sync still needs.
            kept = [(number, fd) for number, fd in self._retired if number >= keep_from]
            for number, fd in self._retired:
                if number < keep_from:
                    os.close(fd)
            self._retired = kept
        if segment is None and self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._size = 0
        for number in going:
            with contextlib.suppress(FileNotFoundError):
                self._path(number).unlink()

    def size_bytes(self) -> int:
        total = 0
        for number in self.numbers():
            with contextlib.suppress(OSError):
                total += self._path(number).stat().st_size
        return total

    def _create(self, path: Path) -> int:
        """A new file to append to; the directory made again first if it was deleted (by
        something else: the data directory must still be there)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        try:
            return os.open(path, flags, 0o600)
        except FileNotFoundError:
            self.directory.mkdir()
            log.error("spool: %s was deleted while in use (not by skillgauge); made again", self.directory)
            parent = os.open(self.directory.parent, os.O_RDONLY)  # its name made durable
            try:
                os.fsync(parent)
            finally:
                os.close(parent)
            return os.open(path, flags, 0o600)

    def _retire(self) -> None:
        """Stop appending to the current file; the next ``sync`` syncs and closes it."""
        if self._fd is not None:
            self._retired.append((self._number, self._fd))
            self._fd = None

    def _abandon(self) -> None:
        """Stop appending to the current file, which was deleted while in use (by something
        other than this process): the next append starts a new one."""
        assert self._fd is not None
        log.error(
            "spool: %s was deleted while in use (not by skillgauge): the requests spooled in it "
            "cannot be replayed after a restart, and those not yet acknowledged are refused as "
            "retryable; new requests go to a new file. Do not delete files under %s while "
            "skillgauge runs",
            self._path(self._number),
            self.directory,
        )
        os.close(self._fd)
        self._fd = None

    def close(self) -> None:
        """Close the file being appended to (and those ``sync`` has not synced: nothing is
        acknowledged from them once the process stops appending)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        with self.lock:
            retired, self._retired = self._retired, []
        for _, fd in retired:
            os.close(fd)
