"""The SQLite outbox and the memory spool's: the same entries, order and drop counts as
``MemoryOutbox``; the SQLite one's length kept with each put and ack (not counted from the
rows each time), right across restarts."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.export.outbox import Entry, MemoryOutbox, SpoolOutbox
from collector.state.facade import Store
from collector.testing import memory_store

KEYS = st.sampled_from("abcdefgh")
# ("put", keys) puts one entry a key, some waiting already (each replaced); ("ack", keys)
# acknowledges them, waiting or not.
OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["put", "ack"]), st.lists(KEYS, max_size=6)),  # a put may name a key twice
    min_size=1,
    max_size=25,
)


def _rows(path: Path, channel: str) -> int:
    with sqlite3.connect(path / "skillgauge.sqlite") as db:
        (count,) = db.execute("SELECT COUNT(*) FROM outbox WHERE channel = ?", (channel,)).fetchone()
    return int(count)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=OPERATIONS, capacity=st.integers(1, 5))
def test_puts_and_acks_keep_the_memory_outboxs_entries_and_a_true_length(
    operations: list[tuple[str, list[str]]], capacity: int
) -> None:
    async def run(path: Path) -> None:
        spool = Store(path, outbox_capacity=capacity)
        durable, model = SpoolOutbox(spool, "traces"), MemoryOutbox(capacity)
        in_memory = SpoolOutbox(memory_store(outbox_capacity=capacity), "traces")  # storage.path ":memory:"
        other = SpoolOutbox(spool, "logs")  # a second channel, counted apart
        try:
            await other.put([Entry("a", b"log", 0.0)])
            for step, (op, keys) in enumerate(operations):
                if op == "put":
                    entries = [Entry(k, f"{k}{step}".encode(), float(step)) for k in keys]
                    waiting = {e.key for e in await model.peek(capacity)}
                    # Dropped: the oldest entries beyond the capacity once the put is in.
                    dropped = max(0, len(waiting | set(keys)) - capacity)
                    assert await durable.put(entries) == dropped
                    assert await in_memory.put(entries) == dropped
                    assert await model.put(entries) == dropped
                else:
                    await durable.ack(keys)
                    await in_memory.ack(keys)
                    await model.ack(keys)
                assert await durable.peek(10) == await in_memory.peek(10) == await model.peek(10)
                assert await in_memory.peek(2) == await model.peek(2)
                assert len(durable) == len(in_memory) == len(model) == _rows(path, "traces")
            assert len(other) == 1 == _rows(path, "logs")
        finally:
            await spool.shutdown()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp)))


def test_the_length_is_counted_from_the_rows_at_a_restart(tmp_path: Path) -> None:
    async def put_three() -> None:
        spool = Store(tmp_path)
        await SpoolOutbox(spool, "traces").put([Entry(k, b"x", 0.0) for k in "abc"])
        await spool.shutdown()

    async def length_after_restart() -> tuple[int, int]:
        spool = Store(tmp_path)
        outbox = SpoolOutbox(spool, "traces")
        try:
            before = len(outbox)
            await outbox.ack(["a"])
            return before, len(outbox)
        finally:
            await spool.shutdown()

    asyncio.run(put_three())
    # A count that went wrong (a spool from before the count was kept, or a hand edit) is
    # put right when the spool opens.
    with sqlite3.connect(tmp_path / "skillgauge.sqlite") as db:
        db.execute("UPDATE outbox_rows SET count = 99")
    assert asyncio.run(length_after_restart()) == (3, 2)
    assert _rows(tmp_path, "traces") == 2
