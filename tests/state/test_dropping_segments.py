"""A segment file is deleted only once the deletion of the rows that pointed into it is
durable: the database commits with ``synchronous=NORMAL`` (its commits reach the WAL
unsynced), and a power cut that undid the rows' deletion but not the file's would leave rows
pointing at nothing, and their sessions beyond rebuilding."""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
from pathlib import Path

import pytest

from collector.state.facade import Store
from collector.state.vouch import DATABASE

REQUEST = b"r" * 100_000
REQUESTS = 30  # 3 MB: ten segment files at a 2 MB limit


def _rows(database: Path) -> int:
    db = sqlite3.connect(database)
    try:
        (count,) = db.execute("SELECT COUNT(*) FROM spooled").fetchone()
        return int(count)
    finally:
        db.close()


def _watch_unlinks(monkeypatch: pytest.MonkeyPatch, events: list[tuple[str, str, int]], database: Path) -> None:
    """Each segment file's deletion, recorded with the rows the database holds, as committed."""
    unlink = Path.unlink

    def recorded(path: Path, missing_ok: bool = False) -> None:
        if path.suffix == ".seg":
            events.append(("unlink", path.name, _rows(database)))
        unlink(path, missing_ok)

    monkeypatch.setattr(Path, "unlink", recorded)


def test_a_segment_file_goes_only_after_the_deletion_of_its_rows_is_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / DATABASE
    events: list[tuple[str, str, int]] = []
    checkpointing = False

    fdatasync = os.fdatasync

    def sync(fd: int) -> None:
        fdatasync(fd)
        if checkpointing:  # each file synced, with the rows the database holds as it is synced
            events.append(("sync", Path(os.readlink(f"/proc/self/fd/{fd}")).name, _rows(database)))

    _watch_unlinks(monkeypatch, events, database)
    monkeypatch.setattr(os, "fdatasync", sync)

    async def run() -> None:
        nonlocal checkpointing
        spool = Store(tmp_path, max_bytes=2 * 1024**2)
        ids = [await spool.append("traces", REQUEST) for _ in range(REQUESTS)]
        checkpointing = True
        await spool.checkpoint(ids[-1] + 1)  # every request is done: every row and file goes
        await spool.shutdown()

    asyncio.run(run())
    unlinks = [i for i, event in enumerate(events) if event[0] == "unlink"]
    assert len(unlinks) == 10
    before = events[: unlinks[0]]
    # The WAL synced after the rows' deletion was committed (none left), before any file went.
    assert ("sync", f"{DATABASE}-wal", 0) in before, events


async def _works_again(spool: Store) -> None:
    """Until storage works again: once a probe is stored (the store probes every second)."""
    while spool.faults.unavailable is not None:
        await asyncio.sleep(0.05)


def test_a_failed_sync_leaves_every_file_until_a_later_checkpoint_can_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / DATABASE
    events: list[tuple[str, str, int]] = []
    failing = False

    fdatasync = os.fdatasync

    def sync(fd: int) -> None:
        if failing and os.readlink(f"/proc/self/fd/{fd}").endswith("-wal"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        fdatasync(fd)

    _watch_unlinks(monkeypatch, events, database)
    monkeypatch.setattr(os, "fdatasync", sync)

    async def run() -> tuple[list[str], BaseException | None, list[str], bytes]:
        nonlocal failing
        spool = Store(tmp_path, max_bytes=2 * 1024**2)
        ids = [await spool.append("traces", REQUEST) for _ in range(REQUESTS)]
        files = sorted(p.name for p in (tmp_path / "requests").glob("*.seg"))
        failing = True
        try:
            await spool.checkpoint(ids[-1] + 1)
            refused: BaseException | None = None
        except OSError as err:
            refused = err
        kept = sorted(p.name for p in (tmp_path / "requests").glob("*.seg"))
        failing = False
        await spool.checkpoint(ids[-1] + 1)
        await asyncio.wait_for(_works_again(spool), timeout=60)
        new = await spool.append("traces", b"new")
        (payload,) = [p for i, _, p, _ in spool.requests(1) if i == new]
        await spool.shutdown()
        return files, refused, kept, payload

    files, refused, kept, payload = asyncio.run(run())
    assert len(files) == 10
    assert isinstance(refused, OSError) and refused.errno == errno.EIO
    assert kept == files  # not one file went while its rows' deletion could not be made durable
    assert sorted(name for kind, name, _ in events if kind == "unlink") == files  # the next checkpoint
    assert payload == b"new"
