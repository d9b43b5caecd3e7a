"""A segment file deleted while the store appends to it (by an operator's clean-up, not by
skillgauge): a request written to it after the deletion is in no file, so it is refused as
retryable rather than acknowledged, and the next request goes to a new file.  What the file
held before the deletion cannot be replayed after a restart: it is quarantined as unreadable,
and nothing else is.  The database deleted under the store: no segment file goes from then on,
so that ``recover`` brings every request back."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from collector.component import Retryable
from collector.state.facade import Store
from collector.state.recover import recover
from collector.state.segments import Segments
from collector.state.vouch import StoreRefused


def _delete_segments(directory: Path) -> list[str]:
    deleted = sorted(p.name for p in (directory / "requests").glob("*.seg"))
    for name in deleted:
        (directory / "requests" / name).unlink()
    return deleted


async def _started(directory: Path, **seams: Any) -> Store:
    """A store on ``directory`` whose start-up probe is done: it writes a scratch file in
    ``requests/`` from the writer thread, which a deletion by the test must not race."""
    store = Store(directory, **seams)
    await store.transact(lambda db: None)  # after what was queued before it: the probe
    return store


def _before_refused_after(directory: Path, delete: Callable[[], object], **seams: Any) -> list[str]:
    """One request stored, then ``delete``, then one refused (written to what was deleted)
    and one stored again; the segment files left."""

    async def first_life() -> list[str]:
        store = await _started(directory, **seams)
        await store.append("traces", b"before")
        delete()
        with pytest.raises(Retryable):
            await store.append("traces", b"refused")
        await store.append("traces", b"after")
        await store.shutdown()
        return sorted(p.name for p in (directory / "requests").glob("*.seg"))

    return asyncio.run(first_life())


async def _replayed(directory: Path) -> tuple[list[bytes], dict[str, int]]:
    """What a restart replays, and what it quarantined."""
    store = Store(directory)
    payloads = [payload for _, _, payload, _ in store.requests(1)]
    quarantined = dict(store.faults.quarantined)
    await store.shutdown()
    return payloads, quarantined


def test_a_request_written_after_the_deletion_is_refused_and_the_next_goes_to_a_new_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def first_life() -> tuple[list[str], str, list[str]]:
        store = await _started(tmp_path)
        for n in range(3):
            await store.append("traces", b"before-%d" % n)
        deleted = _delete_segments(tmp_path)
        with pytest.raises(Retryable) as refused:
            await store.append("traces", b"refused")
        for n in range(2):
            await store.append("traces", b"after-%d" % n)
        files = sorted(p.name for p in (tmp_path / "requests").glob("*.seg"))
        await store.shutdown()
        return deleted, str(refused.value), files

    deleted, refused, files = asyncio.run(first_life())
    assert deleted == ["00000001.seg"]
    assert "No such file or directory" in refused and refused.endswith("retry later")
    assert files == ["00000002.seg"]
    assert "00000001.seg was deleted while in use (not by skillgauge)" in caplog.text
    payloads, quarantined = asyncio.run(_replayed(tmp_path))
    assert payloads == [b"after-0", b"after-1"]  # every request acknowledged after the deletion
    assert quarantined == {"unreadable": 3, "undecodable": 0}  # the three the deletion took


def test_a_deletion_between_the_write_and_its_sync_refuses_the_request(tmp_path: Path) -> None:
    fdatasync = os.fdatasync
    deleting = False

    def sync(fd: int) -> None:
        nonlocal deleting
        if deleting:  # after the request's frame was written, before it is made durable
            deleting = False
            _delete_segments(tmp_path)
        fdatasync(fd)

    def from_the_next_sync() -> None:
        nonlocal deleting
        deleting = True

    assert _before_refused_after(tmp_path, from_the_next_sync, sync=sync) == ["00000002.seg"]
    payloads, quarantined = asyncio.run(_replayed(tmp_path))
    assert payloads == [b"after"]
    # "before" went with the file, and the refused request's row points into it too.
    assert quarantined == {"unreadable": 2, "undecodable": 0}


def test_a_file_the_store_dropped_itself_is_no_deletion_for_its_next_sync(tmp_path: Path) -> None:
    segments = Segments(tmp_path, segment_bytes=10)
    segments.append(b"x" * 20)
    segments.append(b"y" * 20)  # the first file is retired, not yet synced
    segments.drop_before(None)  # every request done: every file goes
    segments.sync()  # raises nothing: no frame it was to sync is needed any more
    segments.append(b"z")
    segments.sync()
    segments.close()
    assert [p.name for p in tmp_path.iterdir()] == ["00000003.seg"]


def test_the_requests_directory_deleted_while_in_use_is_made_again(tmp_path: Path) -> None:
    deleted = _before_refused_after(tmp_path, lambda: shutil.rmtree(tmp_path / "requests"))
    assert deleted == ["00000002.seg"]
    payloads, quarantined = asyncio.run(_replayed(tmp_path))
    assert payloads == [b"after"]
    assert quarantined == {"unreadable": 1, "undecodable": 0}


def test_the_database_deleted_while_in_use_keeps_every_segment_for_recover(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def first_life() -> list[str]:
        store = await _started(tmp_path)
        ids = [await store.append("traces", b"before-%d" % n) for n in range(3)]
        for database in tmp_path.glob("skillgauge.sqlite*"):
            database.unlink()
        ids += [await store.append("traces", b"after-%d" % n) for n in range(3)]
        await store.checkpoint(ids[-1] + 1)  # every request done: their files would all go
        await store.shutdown()
        return sorted(p.name for p in (tmp_path / "requests").glob("*.seg"))

    assert asyncio.run(first_life()) == ["00000001.seg"]
    assert "was deleted or replaced while serve runs" in caplog.text
    with pytest.raises(StoreRefused):  # the next start says what to do
        Store(tmp_path)
    assert recover(tmp_path).requests == 6
    payloads, quarantined = asyncio.run(_replayed(tmp_path))
    assert payloads == [b"before-0", b"before-1", b"before-2", b"after-0", b"after-1", b"after-2"]
    assert quarantined == {"unreadable": 0, "undecodable": 0}


def test_a_retired_file_the_store_drops_while_a_sync_holds_it_is_no_deletion(tmp_path: Path) -> None:
    dropping = True

    def sync(fd: int) -> None:
        nonlocal dropping
        if dropping:  # a checkpoint on the writer thread, while this sync runs: file 1 is done
            dropping = False
            segments.drop_before(2)
        os.fdatasync(fd)

    segments = Segments(tmp_path, segment_bytes=10, sync=sync)
    segments.append(b"x" * 20)
    segments.append(b"y" * 20)  # file 1 retired, file 2 appended to; the next sync takes both
    segments.sync()  # raises nothing: file 1 went for good reason
    segments.close()
    assert [p.name for p in tmp_path.iterdir()] == ["00000002.seg"]
