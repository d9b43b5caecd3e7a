"""Work nobody waits for (``Writer.put``) wakes the writer once for what is put soon after it
too, and keeps its place in line: work put before work someone waits for (``submit``) commits
no later than it; work put alone still commits."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from collector.db.location import Location
from collector.db.writer import Faults, Writer


def _writer(tmp: Path) -> Writer:
    return Writer(Location(tmp / "w.sqlite"), 1 << 20, Faults(), lambda db: None)


async def test_put_work_commits_in_order_before_work_submitted_after_it(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    done: list[str] = []
    gate = threading.Event()
    writer.put(lambda db: gate.wait(30))  # everything below is queued while this runs
    for n in range(100):
        writer.put(lambda db, n=n: done.append(f"put {n}"))
    waited = writer.submit(lambda db: done.append("submitted"))
    writer.put(lambda db: done.append("put after"))
    gate.set()
    await waited
    assert done[:101] == [*(f"put {n}" for n in range(100)), "submitted"]
    await writer.stop(10)
    assert done[101:] == ["put after"]


async def test_work_put_alone_commits(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    committed = threading.Event()
    writer.put(lambda db: committed.set())
    assert await asyncio.to_thread(committed.wait, 30)  # no other work came to take it along
    again = threading.Event()
    writer.put(lambda db: again.set())  # and the next, after the writer went back to waiting
    assert await asyncio.to_thread(again.wait, 30)
    await writer.stop(10)


async def test_work_submitted_soon_commits_alone_and_in_order_with_work_put(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    assert await writer.submit(lambda db: "alone", soon=True) == "alone"  # nothing else came
    done: list[str] = []
    gate = threading.Event()
    writer.put(lambda db: gate.wait(30))
    writer.put(lambda db: done.append("put"))
    later = writer.submit(lambda db: done.append("soon"), soon=True)
    writer.put(lambda db: done.append("put after"))
    gate.set()
    await later
    await writer.stop(10)
    assert done == ["put", "soon", "put after"]
