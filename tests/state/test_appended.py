"""Requests appended on the event loop, indexed after: a frame names its request, a restart
indexes the frames a crash left with no row, and no file a queued row points into is dropped."""

from __future__ import annotations

import asyncio
import sqlite3
import struct
from pathlib import Path

from collector.state.appended import Appended
from collector.state.segments import Segments
from collector.state.store import SqliteSpool


def test_each_frame_names_its_request_and_older_frames_read_without_one(tmp_path: Path) -> None:
    segments = Segments(tmp_path)
    segments.append(b"first", "traces", "acme", request=41)
    segments.append(b"second", "logs", "", request=42)
    segments.close()
    # A file written before request ids: magic SGR1, no id in the header.
    old = struct.pack(">4sBHI", b"SGR1", 1, 0, 3) + b"old"
    (tmp_path / "00000002.seg").write_bytes(old)
    frames = list(segments.frames(1))
    assert [(f.request, f.signal, f.tenant, segments.read(f.where)) for f in frames] == [
        (41, "traces", "acme", b"first"),
        (42, "logs", "", b"second"),
    ]
    assert [(f.request, segments.read(f.where)) for f in segments.frames(2)] == [(None, b"old")]
    # From a frame on: the frames after the first request's.
    assert [f.request for f in segments.frames_after(frames[0].where)] == [42, None]


def test_a_restart_indexes_the_frames_a_crash_left_without_their_rows(tmp_path: Path) -> None:
    async def first_life() -> list[int]:
        spool = SqliteSpool(tmp_path)
        ids = [await spool.append("traces", b"indexed"), await spool.append("traces", b"also")]
        await spool.shutdown()  # their rows are committed
        return ids

    ids = asyncio.run(first_life())
    # The next two were written to their file, and the process died before their rows were.
    segments = Segments(tmp_path / "requests")
    segments.append(b"lost row", "traces", "acme", request=ids[-1] + 1)
    segments.append(b"lost too", "logs", "", request=ids[-1] + 2)
    segments.close()

    async def second_life() -> tuple[list[tuple[int, str, bytes, str]], int]:
        spool = SqliteSpool(tmp_path)
        replayed = list(spool.requests(1))
        new = await spool.append("traces", b"new")
        await spool.shutdown()
        return replayed, new

    replayed, new = asyncio.run(second_life())
    assert replayed == [
        (1, "traces", b"indexed", ""),
        (2, "traces", b"also", ""),
        (3, "traces", b"lost row", "acme"),
        (4, "logs", b"lost too", ""),
    ]
    assert new == 5  # ids never go back
    with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
        assert [r for (r,) in db.execute("SELECT id FROM spooled ORDER BY id")] == [1, 2, 3, 4, 5]


def test_no_file_a_queued_row_points_into_is_dropped(tmp_path: Path) -> None:
    segments = Segments(tmp_path, segment_bytes=1)  # a file a request
    queued: list[object] = []
    appended = Appended(segments, queued.append)  # the writer never runs: rows stay queued
    appended.append(1, "traces", b"one", "")
    appended.append(2, "traces", b"two", "")
    assert len(queued) == 1  # one write for every row that waits
    appended.drop_before(None)  # the database has no row: every file would go
    assert segments.numbers() == [1, 2]
    with sqlite3.connect(":memory:") as db:
        db.execute("CREATE TABLE spooled (id, received_at, signal, segment, offset, length, tenant)")
        appended._write(db)  # the rows are written: nothing holds the files any more
        assert [r for (r,) in db.execute("SELECT id FROM spooled")] == [1, 2]
    appended.drop_before(2)
    assert segments.numbers() == [2]
