"""``storage.max_bytes`` at any size: backpressure ends once the spool is trimmed.

Below the 64 MiB segment size, the spool used to stay over its limit for good: the segment
being appended to was never freed (it rolls over only when full, and backpressure stopped
the appends that would fill it), and SQLite keeps the WAL file at up to 64 MiB after a burst.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from support import FRAMEWORKS, trace_requests

from collector.component import Retryable
from collector.config import parse
from collector.otlp.received import Received
from collector.service import Chain
from collector.state.database import sizes_for
from collector.state.facade import Store


def test_segments_and_the_wal_are_a_small_share_of_a_small_limit() -> None:
    assert sizes_for(None) == (64 * 1024**2, 64 * 1024**2)
    assert sizes_for(4 * 1024**3) == (64 * 1024**2, 64 * 1024**2)  # the default limit: as before
    assert sizes_for(10 * 1024**2) == (10 * 1024**2 // 8, 10 * 1024**2 // 8)
    assert sizes_for(1000) == (256 * 1024, 256 * 1024)


def test_a_spool_with_nothing_to_replay_holds_no_request_bytes(tmp_path: Path) -> None:
    async def run() -> tuple[int, int, bytes]:
        spool = Store(tmp_path, max_bytes=2 * 1024**2)
        ids = [await spool.append("traces", b"r" * 100_000) for _ in range(30)]  # 3 MB
        before = spool.size_bytes()
        await spool.checkpoint(ids[-1] + 1)  # every request is done
        after = spool.size_bytes()
        new = await spool.append("traces", b"new")  # a new file, a new id
        (payload,) = [p for i, _, p, _ in spool.requests(1) if i == new]
        await spool.shutdown()
        return before, after, payload

    before, after, payload = asyncio.run(run())
    assert before > 2 * 1024**2 > after
    assert payload == b"new"
    assert [p.name for p in (tmp_path / "requests").iterdir()] == ["00000011.seg"]  # ten files of three went


@pytest.mark.parametrize("max_bytes", ["1MB", "3MB"])
def test_backpressure_at_a_small_limit_ends_once_the_sessions_close(tmp_path: Path, max_bytes: str) -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    config = parse(
        {
            "storage": {"path": str(tmp_path), "max_bytes": max_bytes, "checkpoint_interval": "0.01s"},
            "sessions": {"idle_timeout": "1h"},
        }
    )

    async def tick(chain: Chain) -> None:
        await chain.sessions_stage.tick()  # closes what is due, checkpoints the store
        await asyncio.gather(*chain.sessions_stage._checkpoints)
        chain.refresh()

    async def run() -> tuple[int, bool]:
        chain = Chain(config)
        await chain.start()
        taken = 0
        while True:  # until the limit is reached
            await tick(chain)
            try:
                await chain.admit()
            except Retryable:
                break
            await chain.consume(Received("traces", request, "test"))
            await chain.sessions_stage.settle()
            await chain.sessions_stage.close_all("shutdown")
            await chain.drain()
            taken += 1
            assert taken < 10_000, "the limit was never reached"
        # Every session is closed and evaluated: ticks checkpoint the store until its size is
        # back under the limit (the WAL shrinks once SQLite has copied it into the database).
        admitted = False
        deadline = time.monotonic() + 20
        while not admitted and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            await tick(chain)
            try:
                await chain.admit()
                admitted = True
            except Retryable:
                pass
        await chain.store.shutdown()
        return taken, admitted

    taken, admitted = asyncio.run(run())
    assert taken > 0 and admitted
