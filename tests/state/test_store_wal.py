"""The WAL's pages reach the database while the writer goes on committing: a thread of the
store's own checkpoints them (the writer itself only past a backstop of thousands of pages),
and it stops with the store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from collector.state.facade import Store
from collector.state.types import encode_record


def test_committed_pages_reach_the_database_without_the_writer_and_the_checkpointer_stops(
    tmp_path: Path,
) -> None:
    database = tmp_path / "skillgauge.sqlite"

    async def run() -> tuple[int, int, bool]:
        spool = Store(tmp_path)
        try:
            await spool.append("traces", b"request")  # the schema and the first commit are in
            before = database.stat().st_size
            # Rows go to the WAL; in WAL mode only a checkpoint writes the database file.
            await spool.save_coverage(
                [(f"s{i}", 1, [encode_record({"n": i})], encode_record({"spans": i})) for i in range(2000)]
            )
            deadline = time.monotonic() + 30
            while database.stat().st_size <= before and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            after = database.stat().st_size
        finally:
            await spool.shutdown()
        return before, after, spool._writer.checkpointer.is_alive()

    before, after, alive = asyncio.run(run())
    assert after > before, "no checkpoint copied the WAL's pages into the database"
    assert not alive
